import RelayCore

extension APNsClient {
    /// Pushes of one fan-out in flight at once. A connection carries at most 1,000 streams (`Options`), so a
    /// window twice that keeps every stream busy while bounding the memory of a fan-out to thousands of phones.
    package static let fanOutWindow = 2_048

    /// Delivers every item with the device rules of `deliver(_:to:)` (the other host on BadDeviceToken, dead tokens
    /// reported) and the retry rules of `send` (`retry`, default the client's policy), at most `window` at a time,
    /// calling `done` with each item's index and answer as it arrives, and `drained` once the answers that came
    /// together have each been through `done` (so a caller that gathers them hands them on without waiting for
    /// more). Returns how many were delivered.
    ///
    /// No task per push: requests go to each host's connection in batches (`APNsHostLoop.submit`) and answers
    /// come back through one stream, so a fan-out to thousands of phones costs one task, not thousands.
    package func fanOut(_ items: [(push: Push, device: Device)], window: Int = APNsClient.fanOutWindow, retry: Backoff? = nil,
                drained: @escaping @Sendable () async -> Void = {},
                done: @escaping @Sendable (_ index: Int, _ delivery: Delivery) async -> Void) async -> Int {
        guard !items.isEmpty else { return 0 }
        var fan = FanOut(items: items, policy: retry ?? self.retry)
        guard let token = currentToken() else {
            for index in items.indices {
                await done(index, Delivery(outcome: .unreachable("could not sign the provider token"),
                                           environment: items[index].device.environment, effect: .none))
            }
            return 0
        }
        fan.token = token
        let mailbox = AnswerMailbox()
        let send: @Sendable ([(index: Int, push: Push)], String) -> Void = { batch, token in
            self.submit(batch, token: token, to: mailbox)
        }
        send(fan.admit(window: window), token)
        var delivered = 0
        while true {
            for item in await mailbox.take() {
                let index = item.index
                let outcome = Self.outcome(of: item.answer)
                // Jitter only matters for a retry; drawing it for every answer cost a getrandom(2) each.
                let random = outcome.isDelivered ? 0 : Double.random(in: 0..<1)
                switch fan.answered(index, outcome, random: random) {
                case .resend(let push, let token):
                    send([(index, push)], token)
                case .resendLater(let push, let token, let ms):
                    // On the relay's executor, like the fan-out: an unstructured task would run on the global pool.
                    Task(executorPreference: RelayExecutor.shared) {
                        try? await Task.sleep(nanoseconds: UInt64(ms) * 1_000_000)
                        send([(index, push)], token)
                    }
                case .renew(let reason, let environment):
                    if let token = renewed(after: fan.token, reason: reason, on: environment) {
                        fan.token = token
                        send([(index, fan.resendPush(index))], token)
                        continue
                    }
                    // No new token may be signed yet: this answer stands.
                    await done(index, fan.finish(index, outcome))
                case .finished(let delivery):
                    if delivery.effect != .none {
                        Log.info("apns.device_effect", ["device": Log.short(items[index].push.deviceToken),
                                                        "effect": "\(delivery.effect)", "reason": delivery.outcome.label])
                    }
                    if delivery.outcome.isDelivered { delivered += 1 }
                    await done(index, delivery)
                }
            }
            await drained()
            if fan.isComplete { return delivered }
            send(fan.admit(window: window), fan.token)
        }
    }

    /// Requests handed to a connection at a time: its loop is writing the first ones while the rest are made.
    static let submitChunk = 64

    /// Hands a batch to each host's connection, `submitChunk` requests at a time; answers come back to `sink` from
    /// the loop threads.
    private func submit(_ batch: [(index: Int, push: Push)], token: String, to sink: any APNsAnswerSink) {
        var production: [(index: Int, request: APNsRequest)] = []
        var development: [(index: Int, request: APNsRequest)] = []
        var shared: (push: Push, request: APNsRequest)?
        for (index, push) in batch {
            // Consecutive pushes of one message share its encoded headers and body; only the path differs.
            if shared == nil || !push.sameMessage(as: shared!.push) { shared = (push, Self.request(push, token: token)) }
            let request = APNsRequest(path: push.path, fields: shared!.request.fields, body: shared!.request.body)
            if push.environment == .production {
                queue((index, request), in: &production, for: .production, sink)
            } else {
                queue((index, request), in: &development, for: .development, sink)
            }
        }
        handOver(&production, to: .production, sink)
        handOver(&development, to: .development, sink)
    }

    /// Adds one request to an environment's pending ones, handing them over once there are `submitChunk`.
    private func queue(_ request: (index: Int, request: APNsRequest),
                       in pending: inout [(index: Int, request: APNsRequest)], for environment: APNsEnvironment,
                       _ sink: any APNsAnswerSink) {
        pending.append(request)
        if pending.count == Self.submitChunk { handOver(&pending, to: environment, sink) }
    }

    private func handOver(_ pending: inout [(index: Int, request: APNsRequest)], to environment: APNsEnvironment,
                          _ sink: any APNsAnswerSink) {
        guard !pending.isEmpty else { return }
        connection(for: environment).submit(pending, to: sink)
        pending.removeAll(keepingCapacity: true)
    }
}

/// Answers handed from the connections' loop threads to the fan-out's one task: posted in batches (one per loop
/// turn, `AnswerBatch`) and taken all at once, so a burst of answers costs the task one lock and at most one
/// wake-up, where a stream cost a lock on both sides and a possible wake-up per answer.
private final class AnswerMailbox: APNsAnswerSink {
    typealias Answer = (index: Int, answer: APNsExchange)

    private struct State {
        var answers: [Answer] = []
        var waiter: CheckedContinuation<[Answer], Never>?
    }

    private let state = Locked(State())

    /// From a loop thread: queues the answers, or hands them to the task if it is waiting.
    func post(_ answers: [Answer]) {
        let waiter = state.withLock { state -> CheckedContinuation<[Answer], Never>? in
            guard let waiter = state.waiter else {
                state.answers.append(contentsOf: answers)
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume(returning: answers)
    }

    /// Every answer posted since the last take; waits for some if there are none.
    func take() async -> [Answer] {
        if let ready = state.withLock({ Self.takeAll(&$0) }) { return ready }
        return await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> [Answer]? in
                if let ready = Self.takeAll(&state) { return ready }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    private static func takeAll(_ state: inout State) -> [Answer]? {
        guard !state.answers.isEmpty else { return nil }
        defer { state.answers = [] }
        return state.answers
    }
}

/// The bookkeeping of one fan-out: which items are admitted, where each stands in the retry and device rules,
/// and when all are answered. A value owned by the fan-out's one task.
private struct FanOut {
    enum Next {
        case resend(Push, token: String)
        case resendLater(Push, token: String, ms: Int)
        case renew(APNsReason, APNsEnvironment)
        case finished(Delivery)
    }

    private struct Item {
        var retries = 0
        var renewed = false
        /// The first host's answer once the item moved to the other host (BadDeviceToken).
        var firstAnswer: APNsOutcome?
        var started = monotonicMs()
    }

    let items: [(push: Push, device: Device)]
    /// Each item's device's stored host, apart: reading it through `items` copied the whole (push, device) pair,
    /// a retain of each of their strings per answer.
    private let environments: [APNsEnvironment]
    let policy: Backoff
    var token = ""
    /// Per item, while it is in flight (nil before it is admitted and after it is answered).
    private var state: [Item?]
    private var next = 0
    private var finished = 0

    init(items: [(push: Push, device: Device)], policy: Backoff) {
        self.items = items
        environments = items.map(\.device.environment)
        self.policy = policy
        state = Array(repeating: nil, count: items.count)
    }

    var isComplete: Bool { finished == items.count }

    /// Admits items up to `window` in flight; returns them, each aimed at its device's stored host. Refills in
    /// chunks (not one push per answer) so the connection's inbox is locked and its loop woken once per chunk.
    mutating func admit(window: Int, chunk: Int = 64) -> [(index: Int, push: Push)] {
        let room = window - (next - finished)
        guard room > 0, room >= min(chunk, window, items.count - next) else { return [] }
        var batch: [(index: Int, push: Push)] = []
        while next < items.count && next - finished < window {
            state[next] = Item()
            batch.append((next, items[next].push.on(items[next].device.environment)))
            next += 1
        }
        return batch
    }

    /// The push as it is to be sent now (on the other host once it moved there).
    func resendPush(_ index: Int) -> Push {
        let (push, device) = items[index]
        return push.on(state[index]?.firstAnswer == nil ? device.environment : device.environment.other)
    }

    mutating func answered(_ index: Int, _ outcome: APNsOutcome, random: Double) -> Next {
        guard var item = state[index] else { preconditionFailure("an answer for a push that is not in flight") }
        let stored = environments[index]
        let environment = item.firstAnswer == nil ? stored : stored.other
        APNsClient.log(items[index].push, on: environment, outcome, attempt: APNsOutcome.attempt(retries: item.retries, renewed: item.renewed),
                       ms: monotonicMs() - item.started)
        switch outcome.nextStep(items[index].push.purpose, retries: &item.retries, renewed: &item.renewed, backoff: policy, random: random) {
        case .renewToken(let reason):
            item.started = monotonicMs()
            state[index] = item
            return .renew(reason, environment)
        case .retry(let ms):
            item.started = monotonicMs() + Int64(ms)
            state[index] = item
            return .resendLater(items[index].push.on(environment), token: token, ms: ms)
        case .finish where item.firstAnswer == nil && DeliveryTable.step(items[index].push.purpose, outcome.fate) == .tryOtherHost:
            item = Item(firstAnswer: outcome)
            state[index] = item
            return .resend(items[index].push.on(stored.other), token: token)
        case .finish:
            return .finished(finish(index, outcome))
        }
    }

    /// The item's final answer, with the device rules applied; it leaves the fan-out.
    mutating func finish(_ index: Int, _ outcome: APNsOutcome) -> Delivery {
        let stored = environments[index]
        let first = state[index]?.firstAnswer
        state[index] = nil
        finished += 1
        // After a move to the other host, the first host's answer leads and this one is the second. The token's role
        // is only worked out for a token to drop: reading it copies the whole (push, device) pair.
        return Delivery.resolve(items[index].push.purpose, first: first ?? outcome, stored: stored, second: first == nil ? nil : outcome,
                                role: TokenRole(token: items[index].push.deviceToken, device: items[index].device))
    }
}
