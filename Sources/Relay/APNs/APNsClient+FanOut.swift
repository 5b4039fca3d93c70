import RelayCore

extension APNsClient {
    /// Pushes of one fan-out in flight at once. A connection carries at most 1,000 streams (`Options`), so a
    /// window twice that keeps every stream busy while bounding the memory of a fan-out to thousands of phones
    /// (each push in flight holds its task, request and continuation: ~5 KB).
    static let fanOutWindow = 2_048

    /// Delivers every item (`deliver(_:to:)`: the device rules included), at most `window` at a time, calling
    /// `done` with each item's index and answer as it arrives. Returns how many were delivered.
    func fanOut(_ items: [(push: Push, device: Device)], window: Int = APNsClient.fanOutWindow, retry: RetryPolicy? = nil,
                done: @escaping @Sendable (_ index: Int, _ delivery: Delivery) async -> Void) async -> Int {
        await withTaskGroup(of: Bool.self) { group in
            var next = 0
            var finished = 0
            var delivered = 0
            while next < items.count || finished < next {
                while next < items.count && next - finished < window {
                    let index = next
                    let item = items[index]
                    next += 1
                    group.addTask {
                        let delivery = await self.deliver(item.push, to: item.device, retry: retry)
                        await done(index, delivery)
                        return delivery.outcome.isDelivered
                    }
                }
                guard let ok = await group.next() else { break }
                finished += 1
                if ok { delivered += 1 }
            }
            return delivered
        }
    }
}
