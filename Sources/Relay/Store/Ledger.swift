import RelayCore

/// The store's one connection, and the tally of its failures. Every read and write the relay makes goes through
/// here, on the relay's executor, one at a time; it decides nothing. A call the store refuses writes one
/// `store.failed` line, counts it, and answers nil (or false): the caller keeps its work and tries again.
///
/// The pause tracker's writes must land in the order the PauseWatcher decided them, with nothing in between: it calls
/// `inOrder`, which runs synchronously because both actors share the relay's one serial executor (it traps
/// otherwise: a check, not an assumption). Everyone else awaits.
actor Ledger {
    /// On the relay's one executor thread, with the other owners (`RelayExecutor`).
    nonisolated var unownedExecutor: UnownedSerialExecutor { RelayExecutor.shared.asUnownedSerialExecutor() }

    /// While store writes fail, a write is tried this often on its own (`Store.probeWrite`): an idle relay has no
    /// writes of its own to show that the store works again.
    static let probeInterval: Double = 5

    /// What the store held at start-up, read before the ledger takes the store and handed to the owners that pick
    /// up from it (`RelayOwners`); nobody keeps it after.
    struct Startup: Sendable {
        var pauses: [PauseRecord]
        /// Pauses whose announce never reached the outbox before the last stop.
        var unannounced: [String]
        /// Ended pauses whose Live Activities were never ended.
        var unended: [String]
        var nextDueMs: Int64?
        var habits: [String: FlowHabits.Habit]

        init(reading store: Store, now: Double) throws {
            // Fan-outs the last run left open become rows first, so the drain's first look sees them.
            let reopened = try store.reopenFanOuts()
            if reopened.fanOuts > 0 {
                Log.info("outbox.reopened", ["fanouts": String(reopened.fanOuts), "pushes": String(reopened.pushes)])
            }
            pauses = try store.allPauses()
            unannounced = try store.unannouncedPauses()
            unended = try store.pausesWithActivitiesLeft(endedAfter: Int64(now) - PauseJob.endRetryWindow)
            nextDueMs = try store.nextDueMs()
            habits = try store.flowHabits()
        }
    }

    nonisolated let path: String
    /// Touched only on this actor (its extensions), never handed out.
    let store: Store
    private let tally: MetricsTally
    /// Failures since the last write that worked (`HealthVerdict` judges it).
    private(set) var streak = FailureStreak()
    private var lastProbe = 0.0

    init(store: sending Store, tally: MetricsTally) {
        path = store.path
        self.store = store
        self.tally = tally
    }

    /// Runs `body` on this actor synchronously: the caller is on the relay's executor (checked; traps otherwise).
    nonisolated func inOrder<T: Sendable>(_ body: (isolated Ledger) throws -> T) rethrows -> T {
        try assumeIsolated(body)
    }

    /// `body` on the store; nil (and one `store.failed` line with `action`) when it threw. `wrote`: it changed rows,
    /// so it shows the store can write. `action` is only built for that line: a watcher action described by
    /// reflection took a third of the executor's time in a fan-out benchmark when it was built for every write.
    func attempt<T: Sendable>(_ action: @autoclosure () -> String, level: Config.LogLevel = .error, wrote: Bool = false,
                              _ body: (Store) throws -> T) -> T? {
        // Not `try?`: it would flatten a `T` that is itself optional (the props read), taking a failure for "none".
        do { return try attemptThrowing(action(), level: level, wrote: wrote, body) } catch { return nil }
    }

    /// Like `attempt`, but the error itself is the caller's to judge (the API's answers name busy and full disks).
    func attemptThrowing<T: Sendable>(_ action: @autoclosure () -> String, level: Config.LogLevel = .error,
                                      wrote: Bool = false, _ body: (Store) throws -> T) throws -> T {
        do {
            let value = try body(store)
            if wrote { succeeded() }
            return value
        } catch {
            failed(level: level, ["action": action(), "error": "\(error)"])
            throw error
        }
    }

    /// A store read or write failed: one `store.failed` line, counted, and the failure streak goes on.
    func failed(level: Config.LogLevel = .error, _ fields: KeyValuePairs<String, String>) {
        Log.emit(level, "store.failed", fields)
        tally.count { $0.storeErrors += 1 }
        let error = fields.first { $0.key == "error" }?.value ?? "unknown"
        streak.failed(at: SystemClock.monotonic(), error: error)
    }

    /// A store write committed: the streak, if any, is over.
    func succeeded() {
        if streak.isFailing { Log.info("store.recovered", ["failures": String(streak.count)]) }
        streak.succeeded()
    }

    /// Whether the path still names the file this connection opened (false: deleted or replaced underneath).
    var fileIsStillOurs: Bool { store.fileIsStillOurs }

    /// Every tick: while writes fail, one is tried on its own now and then.
    func probeIfFailing() {
        let time = SystemClock.monotonic()
        guard streak.isFailing, time - lastProbe >= Ledger.probeInterval else { return }
        lastProbe = time
        _ = attempt("probe", wrote: true) { try $0.probeWrite() }
    }

    /// Adds to the registry's counters (`/metrics`).
    func countDevices(_ change: (inout Metrics) -> Void) { tally.count(change) }

    /// Checkpoints the write-ahead log at shutdown, after the background checkpointer has stopped (so the two
    /// never contend); the connection itself closes with the process.
    func checkpoint() {
        store.stopCheckpointing()
        do { try store.database.execute("PRAGMA wal_checkpoint(TRUNCATE)") } catch {
            Log.warn("store.checkpoint_failed", ["error": "\(error)"])
        }
    }
}

/// The relay's counters, shared by the owners that add to them (each its own) and read whole by `/metrics`. A lock
/// rather than an actor: adding one is a few nanoseconds on the executor thread, and a scrape needs no hop to read.
final class MetricsTally: Sendable {
    private let metrics = Locked(Metrics())

    func count(_ change: (inout Metrics) -> Void) { metrics.withLock { change(&$0) } }

    var snapshot: Metrics { metrics.withLock { $0 } }
}
