import RelayCore

/// A pause's run read, begun on the events socket's thread the moment its Paused event is parsed: it is on its way
/// to Prefect before the event has reached the coordinator and the announce job has started. The announce's first
/// run read takes it instead of sending its own (`take`), so Prefect sees no extra request.
///
/// Only live pauses are read ahead (`maxEventAge`): a reconnect's backfill replays pauses that may long be
/// announced, and a read nobody takes would only load the server. An answer not taken within `maxAnswerAge` is
/// dropped; the table holds at most `capacity` reads.
final class RunReadAhead: Sendable {
    /// A Paused event older than this (by its `occurred`) is history from a backfill, not read ahead.
    static let maxEventAge: Double = 10
    /// An answer older than this is no longer "the run just after its pause": the job reads for itself.
    static let maxAnswerAge: Double = 1
    static let capacity = 64

    typealias Answer = Result<HTTPReply, HTTPFailure>

    private enum Entry {
        case pending(waiter: CheckedContinuation<Answer?, Never>?)
        case answered(Answer, at: Double)
    }

    private let prefect: PrefectClient
    private let now: @Sendable () -> Double
    private let monotonic: @Sendable () -> Double
    /// By state id (the Paused event's id).
    private let table = Locked<[String: Entry]>([:])

    init(prefect: PrefectClient, now: @escaping @Sendable () -> Double = SystemClock.unixNow,
         monotonic: @escaping @Sendable () -> Double = { SystemClock.monotonic() }) {
        self.prefect = prefect
        self.now = now
        self.monotonic = monotonic
    }

    /// The pause a socket message announces, if it is a live flow-run Paused/Suspended event: (run id, state id).
    /// Reads only the few fields it needs, on the socket's thread; the coordinator parses the event in full.
    static func livePause(_ message: SocketMessage, now: Double) -> (runID: String, stateID: String)? {
        guard case .event(let event) = message, let resource = event["resource"],
              resource["prefect.state-type"]?.string == "PAUSED",
              let stateID = event["id"]?.string, !stateID.isEmpty,
              let resourceID = resource["prefect.resource.id"]?.string, resourceID.hasPrefix("prefect.flow-run."),
              let occurred = event["occurred"]?.string.flatMap(Timestamp.parse), now - occurred < maxEventAge
        else { return nil }
        let runID = String(resourceID.dropFirst("prefect.flow-run.".count))
        return runID.isEmpty ? nil : (runID, stateID)
    }

    /// Reads the run ahead if `message` is a live pause not already being read. Any thread.
    func consider(_ message: SocketMessage) {
        guard let (runID, stateID) = Self.livePause(message, now: now()) else { return }
        let now = monotonic()
        let begin = table.withLock { table -> Bool in
            table = table.filter { _, entry in
                if case .answered(_, let at) = entry { return now - at < Self.maxAnswerAge }
                return true
            }
            guard table[stateID] == nil, table.count < Self.capacity else { return false }
            table[stateID] = .pending(waiter: nil)
            return true
        }
        guard begin else { return }
        prefect.readFlowRun(id: runID) { [self] answer in answered(stateID, answer) }
    }

    /// The answer to the read begun for this pause, waited for if it is still under way; nil when none was begun
    /// or it is too old. Each is taken once; the caller reads it as its own first attempt (`PrefectClient.flowRun`).
    func take(stateID: String) async -> Answer? {
        await withCheckedContinuation { continuation in
            let ready = table.withLock { table -> Answer?? in
                switch table[stateID] {
                case nil:
                    return .some(nil)
                case .answered(let answer, let at)?:
                    table[stateID] = nil
                    return .some(monotonic() - at < Self.maxAnswerAge ? answer : nil)
                case .pending?:
                    table[stateID] = .pending(waiter: continuation)
                    return .none
                }
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    private func answered(_ stateID: String, _ answer: Answer) {
        let at = monotonic()
        let waiter = table.withLock { table -> CheckedContinuation<Answer?, Never>? in
            guard case .pending(let waiter)? = table[stateID] else { return nil }
            table[stateID] = waiter == nil ? .answered(answer, at: at) : nil
            return waiter
        }
        waiter?.resume(returning: answer)
    }
}
