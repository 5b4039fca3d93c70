/// The last `capacity` ids seen, for dropping events delivered twice (a reconnect's backfill overlaps what
/// was already received). Memory is bounded: once full, the oldest id is forgotten first.
public struct RecentIDs: Sendable, Equatable {
    public let capacity: Int
    private var members: Set<String> = []
    private var ring: [String] = []
    private var next = 0

    public init(capacity: Int) {
        precondition(capacity > 0, "RecentIDs needs room for at least one id")
        self.capacity = capacity
        members.reserveCapacity(capacity)
        ring.reserveCapacity(capacity)
    }

    public var count: Int { members.count }

    public func contains(_ id: String) -> Bool { members.contains(id) }

    /// Remembers `id`; `false` if it was already remembered (a duplicate).
    @discardableResult
    public mutating func insert(_ id: String) -> Bool {
        guard !members.contains(id) else { return false }
        if ring.count < capacity {
            ring.append(id)
        } else {
            members.remove(ring[next])
            ring[next] = id
            next = (next + 1) % capacity
        }
        members.insert(id)
        return true
    }

    /// Forgets `id` so it counts as new again (its slot in the ring is reused later as usual).
    public mutating func remove(_ id: String) {
        members.remove(id)
    }
}
