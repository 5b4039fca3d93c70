/// The pause lifecycle (`docs/architecture.md`) as a pure state machine: inputs in, actions out, no I/O.
///
/// Its memory is the set of `PauseRecord`s, keyed by the PAUSED state's id. Every change it makes to that
/// memory comes out as a store action (`record`, `setTimeout`, `markReminded`, `markEnded`, `prune`), placed
/// *before* the effect it guards (`announce`, `remind`, `end`), so the relay applies actions in order and a
/// restart resumes from the store exactly where memory was. (The relay writes `markReminded` together with the
/// reminder's pushes, in one transaction, rather than on its own.) Give `init(pauses:)` every stored pause, ended
/// ones included: an ended pause replayed by a reconnect's backfill must still be recognised.
///
/// Rules, where the design leaves a choice:
/// - A pause starts on a state of type `PAUSED` (never by name). Announced at most once: only when first
///   recorded, and only if its state timestamp is under 15 minutes old; older ones are recorded quietly.
/// - A state (event or REST) may end a pause only if it is *after* the pause: its `follows` is the pause's
///   id, or it occurred later than the pause's state timestamp. For pauses restored from the store only the
///   whole second is known, so an event in that same second does not count (a backfilled Running event
///   from just before the pause must never end it); a REST read of the run's current state does count.
/// - A new PAUSED state for a run that already has a waiting pause ends the old one, with `ended` = the new
///   state's name, then starts the new one. A PAUSED state *older* than a pause already known for its run
///   is a replay of history: it is recorded as already ended and never announced.
/// - A waiting pause whose run is missing from the paused listing is not ended on the listing's word (the
///   listing can be older than an event just handled); the PauseWatcher asks for the run (`fetchRun`) and the
///   answer (`run`, or `runNotFound`) ends it, with the run's current state name.
/// - Reminder: once, for an announced pause whose timeout gave it at least 10 minutes (5 s of slack: Prefect
///   computes `pause_timeout` on the flow's clock a few ms before the state's timestamp), when at most 5
///   minutes are left and the timeout has not passed. N = whole minutes left, rounded down, at least 1.
public struct PauseWatcher: Sendable {
    // MARK: - Inputs and actions

    public enum Input: Sendable, Equatable {
        /// A flow-run state event from the socket (live or backfilled, in any order, possibly repeated).
        case event(StateEvent)
        /// The complete list of runs in a `PAUSED` state (after each subscribe, and every 60 s).
        case listing([FlowRun])
        /// `GET /flow_runs/{id}`: after an `announce` (it reads the run for the alert anyway) or a `fetchRun`.
        case run(FlowRun)
        /// `GET /flow_runs/{id}` answered 404: the run was deleted.
        case runNotFound(runID: String)
        /// Time passed (the relay ticks every few seconds): reminders and pruning.
        case tick
    }

    /// What the relay learned a new pause from; the alert's context starts here.
    public enum Origin: Sendable, Equatable {
        case event(StateEvent)
        case run(FlowRun)
    }

    /// Apply in order. Store writes come first and are idempotent per state id.
    public enum Action: Sendable, Equatable {
        /// Store: insert this new pause row (if absent). `announcedAt` is set when an `announce` follows;
        /// if the store already had the row, the relay should skip that `announce`.
        case record(PauseRecord)
        /// Store: the pause's `timeout_at` became known (from REST; events do not carry it).
        case setTimeout(stateID: String, timeoutAt: Int64)
        /// Store: the reminder was decided at `at`.
        case markReminded(stateID: String, at: Int64)
        /// Store: the pause ended at `at`, the run now in state `state` (`nil` when the run is gone).
        case markEnded(stateID: String, at: Int64, state: String?)
        /// Send the pause's alert and live-activity start. Read `GET /flow_runs/{runID}` for the context
        /// (re-read until its `state.id` is the pause's) and hand that run back as `.run`.
        case announce(PauseRecord, Origin)
        /// Send the reminder alert: "Times out in N min. " + the original body.
        case remind(PauseRecord, minutesLeft: Int)
        /// End the run's live activities; `endedState` in the record is the new state's name.
        case end(PauseRecord)
        /// Read `GET /flow_runs/{runID}` and hand the answer back as `.run` (or `.runNotFound`).
        case fetchRun(runID: String)
    }

    /// The lifecycle's numbers, in seconds; tests may shrink them.
    public struct Rules: Sendable, Equatable {
        public var announceWindow: Double = 15 * 60
        public var reminderLead: Double = 5 * 60
        public var reminderMinimumTimeout: Int64 = 10 * 60
        public var reminderSlack: Int64 = 5
        /// How long the store keeps an ended pause (the relay prunes it with the outbox, `PauseTracker.prune`).
        public var retention: Double = 24 * 3600
        /// How long, and how many, ended pauses memory keeps. An ended pause is needed in memory only while an event
        /// about it may still come (a replay after a reconnect reaches back minutes, not hours), and `seen` drops a
        /// replayed event by its state id anyway; the store keeps the day's record. Without a bound, a relay's
        /// memory grew with every pause of the last 24 h (about 2 KB each).
        public var memoryRetention: Double = 2 * 3600
        public var memoryEndedLimit = 512
        public var seenCapacity = 4096

        public init() {}
    }

    // MARK: - State

    public let rules: Rules
    /// Every known pause, waiting or ended, by state id.
    public private(set) var pauses: [String: PauseRecord] = [:]
    /// The state ids of each run's pauses: a state event looks at its run's pauses, not at every pause kept for
    /// the day (`retention`), so it costs the same with ten pauses kept or ten thousand.
    private var byRun: [String: [String]] = [:]
    /// The state ids of the pauses still waiting (a handful, against a day's ended ones).
    private var waitingIDs: Set<String> = []
    /// Exact state timestamps of pauses seen this session; the store keeps whole seconds only.
    private var exactStart: [String: Double] = [:]
    private var seen: RecentIDs

    public init(pauses: [PauseRecord], rules: Rules = Rules()) {
        self.rules = rules
        self.seen = RecentIDs(capacity: rules.seenCapacity)
        for pause in pauses { keep(pause) }
    }

    /// Pauses still waiting on a person, for `/health`.
    public var waitingCount: Int { waitingIDs.count }

    /// Waiting pauses, oldest first (ties by state id), so actions come out in a stable order.
    public var waiting: [PauseRecord] { Self.inOrder(waitingIDs.compactMap { pauses[$0] }) }

    /// The run's pauses still waiting, oldest first.
    public func waiting(ofRun runID: String) -> [PauseRecord] {
        Self.inOrder(pauses(ofRun: runID).filter(\.isWaiting))
    }

    private func pauses(ofRun runID: String) -> [PauseRecord] { (byRun[runID] ?? []).compactMap { pauses[$0] } }

    private static func inOrder(_ records: [PauseRecord]) -> [PauseRecord] {
        records.sorted { ($0.pausedAt, $0.stateID) < ($1.pausedAt, $1.stateID) }
    }

    /// Adds or replaces a pause (a state id always belongs to one run): every change to `pauses` goes through
    /// here or `forget`, which keep the indexes with it.
    private mutating func keep(_ record: PauseRecord) {
        if pauses.updateValue(record, forKey: record.stateID) == nil {
            byRun[record.runID, default: []].append(record.stateID)
        }
        if record.isWaiting { waitingIDs.insert(record.stateID) } else { waitingIDs.remove(record.stateID) }
    }

    private mutating func forget(_ stateID: String) {
        waitingIDs.remove(stateID)
        guard let removed = pauses.removeValue(forKey: stateID) else { return }
        byRun[removed.runID]?.removeAll { $0 == stateID }
        if byRun[removed.runID]?.isEmpty == true { byRun[removed.runID] = nil }
    }

    // MARK: - Handling

    public mutating func handle(_ input: Input, now: Double) -> [Action] {
        var actions: [Action] = []
        switch input {
        case .event(let event):
            guard seen.insert(event.stateID) else { break }
            if event.isPaused {
                begin(event.stateID, runID: event.runID, name: event.stateName, at: event.stateTimestamp,
                      timeout: nil, follows: event.follows, origin: .event(event), fromREST: false,
                      now: now, into: &actions)
            } else {
                leave(runID: event.runID, to: event.stateName, at: event.occurred, follows: event.follows,
                      fromREST: false, now: now, into: &actions)
            }
        case .listing(let runs):
            var listed: Set<String> = []
            for run in runs where run.isPaused {
                listed.insert(run.id)
                observe(run, now: now, into: &actions)
            }
            var asked: Set<String> = []
            for pause in waiting where !listed.contains(pause.runID) && asked.insert(pause.runID).inserted {
                actions.append(.fetchRun(runID: pause.runID))
            }
            remind(now: now, into: &actions)
        case .run(let run):
            observe(run, now: now, into: &actions)
            remind(now: now, into: &actions)
        case .runNotFound(let runID):
            for pause in waiting(ofRun: runID) {
                end(pause, state: nil, now: now, into: &actions)
            }
        case .tick:
            remind(now: now, into: &actions)
            prune(now: now)
        }
        return actions
    }

    /// Undoes in memory what a store action would have written, after the store failed to write it (locked,
    /// full, gone), so memory never runs ahead of the store: the step is taken again the next time the pause is
    /// seen (a run read, the listing, an event), instead of being remembered as done when nothing was kept.
    public mutating func revert(_ action: Action) {
        switch action {
        case .record(let pause):
            forget(pause.stateID)
            exactStart[pause.stateID] = nil
            seen.remove(pause.stateID)
        case .setTimeout(let stateID, _):
            change(stateID) { $0.timeoutAt = nil }  // differs from the next read again, so it is written again
        case .markReminded(let stateID, _):
            change(stateID) { $0.remindedAt = nil }
        case .markEnded(let stateID, _, _):
            change(stateID) { pause in
                pause.endedAt = nil
                pause.endedState = nil
            }
        case .announce, .remind, .end, .fetchRun:
            break
        }
    }

    private mutating func change(_ stateID: String, _ edit: (inout PauseRecord) -> Void) {
        guard var pause = pauses[stateID] else { return }
        edit(&pause)
        keep(pause)
    }

    // MARK: - Rules

    /// A REST view of a run: a pause to start (or learn the timeout of), or a state that ends its pause.
    private mutating func observe(_ run: FlowRun, now: Double, into actions: inout [Action]) {
        if run.isPaused {
            begin(run.stateID, runID: run.id, name: run.stateName, at: run.stateTimestamp, timeout: run.pauseTimeout,
                  follows: nil, origin: .run(run), fromREST: true, now: now, into: &actions)
        } else {
            leave(runID: run.id, to: run.stateName, at: run.stateTimestamp, follows: nil, fromREST: true,
                  now: now, into: &actions)
        }
    }

    private mutating func begin(_ stateID: String, runID: String, name: String, at timestamp: Double,
                                timeout: Double?, follows: String?, origin: Origin, fromREST: Bool,
                                now: Double, into actions: inout [Action]) {
        if var known = pauses[stateID] {
            if exactStart[stateID] == nil { exactStart[stateID] = timestamp }
            if known.isWaiting, let timeout, known.timeoutAt != Self.seconds(timeout) {
                known.timeoutAt = Self.seconds(timeout)
                keep(known)
                actions.append(.setTimeout(stateID: stateID, timeoutAt: known.timeoutAt!))
            }
            return
        }

        var record = PauseRecord(stateID: stateID, runID: runID, stateName: name,
                                 pausedAt: Self.seconds(timestamp), timeoutAt: timeout.map(Self.seconds))
        exactStart[stateID] = timestamp

        // A replay of an earlier pause of a run whose later pause is already known: history, not news.
        if let later = pauses(ofRun: runID).first(where: { starts(after: timestamp, $0) }) {
            record.endedAt = Self.seconds(now)
            record.endedState = later.stateName
            keep(record)
            actions.append(.record(record))
            return
        }

        // The run paused again: its previous pause is over.
        leave(runID: runID, to: name, at: timestamp, follows: follows, fromREST: fromREST, now: now, into: &actions)

        if now - timestamp < rules.announceWindow { record.announcedAt = Self.seconds(now) }
        keep(record)
        actions.append(.record(record))
        if record.announcedAt != nil { actions.append(.announce(record, origin)) }
    }

    /// The run is in a new state (named `name`, at `timestamp`): end its waiting pauses that state follows.
    private mutating func leave(runID: String, to name: String, at timestamp: Double, follows: String?,
                                fromREST: Bool, now: Double, into actions: inout [Action]) {
        for pause in waiting(ofRun: runID) {
            guard follows == pause.stateID || isAfter(pause, timestamp, lenient: fromREST) else { continue }
            end(pause, state: name, now: now, into: &actions)
        }
    }

    private mutating func end(_ pause: PauseRecord, state: String?, now: Double, into actions: inout [Action]) {
        var ended = pause
        ended.endedAt = Self.seconds(now)
        ended.endedState = state
        keep(ended)
        actions.append(.markEnded(stateID: pause.stateID, at: ended.endedAt!, state: state))
        actions.append(.end(ended))
    }

    private mutating func remind(now: Double, into actions: inout [Action]) {
        for pause in waiting where pause.announcedAt != nil && pause.remindedAt == nil {
            guard let timeout = pause.timeoutAt,
                  timeout - pause.pausedAt >= rules.reminderMinimumTimeout - rules.reminderSlack
            else { continue }
            let left = Double(timeout) - now
            guard left > 0, left <= rules.reminderLead else { continue }
            var reminded = pause
            reminded.remindedAt = Self.seconds(now)
            keep(reminded)
            actions.append(.markReminded(stateID: pause.stateID, at: reminded.remindedAt!))
            actions.append(.remind(reminded, minutesLeft: max(1, Int(left / 60))))
        }
    }

    /// Memory forgets ended pauses past `memoryRetention` or beyond the newest `memoryEndedLimit` (the store keeps
    /// them for `retention`).
    private mutating func prune(now: Double) {
        let memoryCutoff = Self.seconds(now - rules.memoryRetention)
        let ended = pauses.values.filter { !$0.isWaiting }
        let overLimit = ended.count - rules.memoryEndedLimit
        if overLimit > 0 || ended.contains(where: { $0.endedAt! < memoryCutoff }) {
            let oldestFirst = ended.sorted { ($0.endedAt!, $0.stateID) < ($1.endedAt!, $1.stateID) }
            for (index, pause) in oldestFirst.enumerated() where index < overLimit || pause.endedAt! < memoryCutoff {
                forget(pause.stateID)
                exactStart[pause.stateID] = nil
            }
        }
    }

    // MARK: - Time

    /// Whether `timestamp` is later than the pause's state timestamp. With only the stored whole second,
    /// a strict reading (events) needs the next second; a lenient one (a run's current state) takes it.
    private func isAfter(_ pause: PauseRecord, _ timestamp: Double, lenient: Bool) -> Bool {
        if let exact = exactStart[pause.stateID] { return timestamp > exact }
        let second = Double(pause.pausedAt)
        return lenient ? timestamp >= second : timestamp >= second + 1
    }

    /// Whether `pause` began later than `timestamp` (it is certainly newer).
    private func starts(after timestamp: Double, _ pause: PauseRecord) -> Bool {
        if let exact = exactStart[pause.stateID] { return exact > timestamp }
        return Double(pause.pausedAt) > timestamp
    }

    /// Unix seconds as stored: rounded down.
    static func seconds(_ time: Double) -> Int64 { Int64(time.rounded(.down)) }
}
