import Glibc
import RelayCore

/// Which runs are paused, and what is owed for each: the pure `PauseWatcher` driven by the events socket, the paused
/// listing and the clock, its decisions written to the store in order (through the `Ledger`), and the pause jobs
/// (announce, remind, end, refresh) they call for, run by `PauseJobs` and tried again until done. It also keeps
/// what the socket told about each run (custom events, artifacts, the flow's habits) for the jobs' alert text.
///
/// A write the store refuses is undone in the watcher's memory too, and the run is read again later: memory never
/// claims what the store does not hold.
actor PauseTracker {
    /// On the relay's one executor thread, with the other owners (`RelayExecutor`).
    nonisolated var unownedExecutor: UnownedSerialExecutor { RelayExecutor.shared.asUnownedSerialExecutor() }

    static let listingInterval: Double = 60
    /// While the events socket is down, the listing is what finds pauses (REST may well still work).
    static let disconnectedListingInterval: Double = 3
    static let tickInterval: Double = 1
    /// How often ended pauses past the store's retention are pruned.
    static let pruneInterval: Double = 300

    let ledger: Ledger
    let prefect: PrefectClient
    let runner: PauseJobs
    let tally: MetricsTally
    /// Wall time, for what is compared with Prefect's timestamps (reminders, timeouts, retention).
    let now: @Sendable () -> Double
    /// `SystemClock.steadyNow`: the clock of this tracker's own timers (listing and prune intervals, job retries),
    /// which a step of the wall clock must not move.
    let steady: @Sendable () -> Double

    var watcher: PauseWatcher
    var subscribed = false
    /// The events socket's last attempt was refused for its credential (close 1008, upgrade 401/403).
    var authRejected = false
    /// When the events socket last went down, or the relay started (monotonic seconds); read while not subscribed.
    var socketDownSince = SystemClock.monotonic()
    var lastListing = -Double.infinity
    var lastPrune = 0.0
    var recentEvents = RecentRunEvents()
    /// Announces waiting for a late custom event, by run (`PauseTracker+LiveEvents.swift`).
    var liveWaiters: [String: [LiveWaiter]] = [:]
    var lastLiveWaiter = 0
    /// Announced pauses still waiting, with how many of their run's live events and artifacts their stored props
    /// were built with: one that comes later refreshes them (`refreshIfBehind`). The counts are this process's own:
    /// a start sets every announced waiting pause to 0.
    var propsArrivals: [String: Int] = [:]
    var habits: FlowHabits
    /// Pause jobs owed and not yet done (see `PauseJob`), their retry times, and the ones running now.
    var jobs: [String: PauseJob] = [:]
    var jobRetries = Retries<String>(.pauseJobs)
    var runningJobs: Set<String> = []
    /// Jobs running now, counted so shutdown can wait for them (bounded).
    var backgroundWork = 0
    /// Runs whose latest state could not be recorded (store failure): read again on the retry schedule.
    var unrecordedRuns = Retries<String>(.pauseJobs)

    /// Picks up where the last run stopped: pauses whose announce never reached the outbox, and ended pauses whose
    /// Live Activities were never ended, are owed again.
    init(ledger: Ledger, startup: Ledger.Startup, prefect: PrefectClient, runner: PauseJobs, tally: MetricsTally,
         now: @escaping @Sendable () -> Double = SystemClock.unixNow,
         steady: @escaping @Sendable () -> Double = SystemClock.steadyNow) {
        watcher = PauseWatcher(pauses: startup.pauses)
        let started = steady()
        let unfinished = startup.unannounced.map { ($0, PauseJob.Kind.announce(nil)) }
            + startup.unended.map { ($0, PauseJob.Kind.end) }
        for (stateID, kind) in unfinished {
            guard let pause = watcher.pauses[stateID] else { continue }
            let job = PauseJob(kind, pause)
            jobs[job.key] = job
            jobRetries.now(job.key, at: started)
        }
        // Announced before this start, with props built from events this process never saw: any custom event or
        // artifact that comes for the run from now on may be news, so it gets the props built again (a refresh
        // that finds them unchanged sends nothing).
        let withoutProps = Set(startup.unannounced)
        for pause in watcher.pauses.values
        where pause.isWaiting && pause.announcedAt != nil && !withoutProps.contains(pause.stateID) {
            propsArrivals[pause.stateID] = 0
        }
        habits = FlowHabits(known: startup.habits)
        self.ledger = ledger
        self.prefect = prefect
        self.runner = runner
        self.tally = tally
        self.now = now
        self.steady = steady
    }

    /// What `/health` and `/metrics` need from here.
    struct Status: Sendable {
        var subscribed: Bool
        var authRejected: Bool
        var socketDownSince: Double
        var waiting: Int
        /// The relay's counters, read in the same turn as `waiting`: a scrape never sees a pause ended in the
        /// counters but still waiting, or the other way round.
        var counts: Metrics
    }

    func status() -> Status {
        Status(subscribed: subscribed, authRejected: authRejected, socketDownSince: socketDownSince,
               waiting: watcher.waitingCount, counts: tally.snapshot)
    }

    /// Every `tickInterval`: reminders and pruning, the paused listing when it is due, work to try again, and a look
    /// at the database file.
    func tick() {
        guard ledger.inOrder({ $0.fileIsStillOurs }) else {
            // Writing on would go to an unlinked file that vanishes at exit: stop, so the supervisor restarts us on
            // the file that is there now.
            Log.error("store.lost", ["path": ledger.path, "fix": "the database file was deleted or replaced; restarting"])
            exit(1)
        }
        apply(watcher.handle(.tick, now: now()))
        let time = steady()
        // A refused credential is refused on REST too: list at the slow pace rather than every 3 s.
        let interval = subscribed || authRejected ? PauseTracker.listingInterval : PauseTracker.disconnectedListingInterval
        if time - lastListing >= interval { requestListing() }
        retryDueWork(at: time)
        if time - lastPrune >= PauseTracker.pruneInterval { prune() }
    }

    /// Ended pauses past the store's retention (a day) go; memory forgot them long before (`PauseWatcher.Rules`).
    /// Their answers go with them; so do those `AnswerRetention`'s row cap no longer keeps.
    func prune() {
        lastPrune = steady()
        let wall = now()
        let cutoff = Int64(wall - watcher.rules.retention)
        let pruned = ledger.inOrder { $0.attempt("prune_pauses") { try $0.prunePauses(endedBefore: cutoff) } }
        if let pruned, pruned > 0 { Log.debug("pauses.pruned", ["count": String(pruned)]) }
        let answers = ledger.inOrder { $0.attempt("prune_answers") { try $0.pruneAnswers() } }
        if let answers, answers > 0 { Log.debug("answers.pruned", ["count": String(answers)]) }
    }
}
