import RelayCore

/// A pause's first reads, begun on the events socket's thread the moment its Paused event is parsed: the run read
/// is on its way to Prefect before the event has reached the pause tracker and the announce job has started, and when
/// its answer shows the pause naming input rows, the pool's thread sends the rows' read at once, without waking the
/// job in between. The announce's gather takes each answer as its own first attempt (`take`, `takeInput`), so
/// Prefect sees the requests it would have seen anyway, only sooner.
///
/// Only live pauses are read ahead (`maxEventAge`): a reconnect's backfill replays pauses that may long be
/// announced, and a read nobody takes would only load the server. An answer not taken within `maxAnswerAge` is
/// dropped; the table holds at most `capacity` pauses.
final class RunReadAhead: Sendable {
    /// A Paused event older than this (by its `occurred`) is history from a backfill, not read ahead.
    static let maxEventAge: Double = 10
    /// An answer older than this is no longer "the run just after its pause": the job reads for itself.
    static let maxAnswerAge: Double = 1
    static let capacity = 64

    typealias Answer = Result<HTTPReply, HTTPFailure>

    /// A read's answer as the gather takes it. The run's answer is read on the pool's thread (for the input rows'
    /// read); the run comes along so the gather doesn't read the answer a second time.
    struct Taken: Sendable {
        let answer: Answer
        /// The run, when the answer was a 200 that read as one; nil otherwise (the gather retries from `answer`).
        var run: RunDetails? = nil
    }

    /// One read's progress; a waiter is the gather that asked before the answer came.
    private enum Step {
        case pending(waiter: CheckedContinuation<Taken?, Never>?)
        case answered(Taken)
        case taken

        var hasWaiter: Bool {
            if case .pending(let waiter) = self { return waiter != nil }
            return false
        }
    }

    private struct Entry {
        var run: Step? = .pending(waiter: nil)
        /// nil: no input read was sent.
        var input: Step?
        /// Monotonic seconds of the last answer (or of the start).
        var at: Double

        /// Nobody waits on it, and what it holds is too old to be taken.
        func expired(now: Double) -> Bool {
            run?.hasWaiter != true && input?.hasWaiter != true && now - at >= RunReadAhead.maxAnswerAge
        }
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
    /// Reads only the few fields it needs, on the socket's thread; the pause tracker parses the event in full.
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
            table = table.filter { !$0.value.expired(now: now) }
            guard table[stateID] == nil, table.count < Self.capacity else { return false }
            table[stateID] = Entry(at: now)
            return true
        }
        guard begin else { return }
        prefect.begin("GET", "/flow_runs/\(runID)", run: runID) { [self] answer in runAnswered(runID, stateID, answer) }
    }

    /// The answer to the run read begun for this pause, waited for if it is still under way; nil when none was
    /// begun or it is too old. Taken once; the caller reads it as its own first attempt (`PrefectClient.flowRun`).
    func take(stateID: String) async -> Taken? {
        await take(stateID, \.run)
    }

    /// The answer to the input rows' read sent on the run's answer, as `take` (without JSON: not parsed here).
    func takeInput(stateID: String) async -> Answer? {
        await take(stateID, \.input)?.answer
    }

    private func take(_ stateID: String, _ step: WritableKeyPath<Entry, Step?>) async -> Taken? {
        await withCheckedContinuation { continuation in
            let ready = table.withLock { table -> Taken?? in
                guard let entry = table[stateID] else { return .some(nil) }
                switch entry[keyPath: step] {
                case nil, .taken?:
                    return .some(nil)
                case .pending?:
                    table[stateID]![keyPath: step] = .pending(waiter: continuation)
                    return .none
                case .answered(let answer)?:
                    table[stateID]![keyPath: step] = .taken
                    return .some(monotonic() - entry.at < Self.maxAnswerAge ? answer : nil)
                }
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// On the pool's thread: sends the input rows' read at once when the run's answer shows this pause naming them
    /// (what the gather would send next), then hands the run's answer on: the rows' read goes out first, since it
    /// is what the alert waits for, and the gather has the run to work on meanwhile.
    private func runAnswered(_ runID: String, _ stateID: String, _ answer: Answer) {
        let run: RunDetails? = if case .success(let reply) = answer, reply.status == 200 {
            (try? JSONParser.parse(reply.body)).flatMap(RunDetails.init(prefect:))
        } else { nil }
        let taken = Taken(answer: answer, run: run)
        var inputRead: (path: String, body: JSONValue)?
        if let run, run.state?.id == stateID {
            inputRead = ContextGatherer.inputFilter(runID: runID, keyset: run.state?.runInputKeyset)
        }
        let at = monotonic()
        let kept = table.withLock { table -> Bool in
            // Gone: dropped unanswered for its age, and the gather (if any) has read for itself.
            guard table[stateID] != nil else { return false }
            table[stateID]!.at = at
            if inputRead != nil { table[stateID]!.input = .pending(waiter: nil) }
            return true
        }
        guard kept else { return }
        if let inputRead {
            prefect.begin("POST", inputRead.path, body: inputRead.body, run: runID) { [self] answer in
                let at = monotonic()
                let rows = Taken(answer: answer)
                let waiter = table.withLock { table -> CheckedContinuation<Taken?, Never>? in
                    guard table[stateID]?.input != nil else { return nil }
                    table[stateID]!.at = at
                    return Self.answered(&table[stateID]!.input!, rows)
                }
                waiter?.resume(returning: rows)
            }
        }
        let waiter = table.withLock { table -> CheckedContinuation<Taken?, Never>? in
            guard table[stateID]?.run != nil else { return nil }
            return Self.answered(&table[stateID]!.run!, taken)
        }
        waiter?.resume(returning: taken)
    }

    /// Records an answer; returns the waiter to resume with it (outside the lock), if one was waiting.
    private static func answered(_ step: inout Step, _ answer: Taken) -> CheckedContinuation<Taken?, Never>? {
        guard case .pending(let waiter) = step else { return nil }
        step = waiter == nil ? .answered(answer) : .taken
        return waiter
    }
}
