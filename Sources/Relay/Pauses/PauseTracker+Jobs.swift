import RelayCore

/// The pause jobs: each started once per key, run by `PauseJobs` on this actor, and kept for another try (bounded
/// backoff) until it is done or no longer matters.
extension PauseTracker {
    /// Runs a pause job (one per key at a time); a failure keeps it for `retryDueWork`.
    func start(_ job: PauseJob, receivedAt: Double = SystemClock.monotonic()) {
        jobs[job.key] = job
        guard runningJobs.insert(job.key).inserted else { return }
        let followed = recentEvents.follows(job.pause.runID)
        backgroundWork += 1
        let runner = self.runner
        // On this actor (the task inherits it): the job reads and waits on the tracker's state without a hop, and
        // its awaits (Prefect, the outbox) let events through meanwhile. The preference keeps what it awaits outside
        // any actor (the Prefect reads, `async let`, `APNsClient.fanOut`) on the relay's thread: a bare task ran
        // those on the default pool, waking its threads (a 1,000-device fan-out ~7 % slower: docs/benchmarks.md).
        Task {
            await withTaskExecutorPreference(RelayExecutor.shared) {
                let done = await runner.perform(job, tracker: self, receivedAt: receivedAt, followed: followed)
                self.finished(job, done: done)
                self.backgroundWork -= 1
            }
        }
    }

    private func finished(_ job: PauseJob, done: Bool) {
        runningJobs.remove(job.key)
        if done {
            jobs[job.key] = nil
            jobRetries.succeeded(job.key)
            // An event may have come while it read (an announce or a refresh): the props are built again.
            refreshIfBehind(stateID: job.pause.stateID)
        } else {
            let delay = jobRetries.failed(job.key, now: steady(), random: Double.random(in: 0..<1))
            Log.warn("pause.retry", ["job": job.key, "run": job.pause.runID, "in_ms": String(Int(delay * 1000))])
        }
    }

    func drop(_ kind: PauseJob.Kind, stateID: String) {
        guard let pause = watcher.pauses[stateID] else { return }
        let key = PauseJob(kind, pause).key
        jobs[key] = nil
        jobRetries.succeeded(key)
    }

    /// Jobs and run reads whose retry time has come, while they still matter.
    /// Jobs and run reads whose retry is due at `time` (`steady()`).
    func retryDueWork(at time: Double) {
        let wall = now()
        for key in jobRetries.due(now: time) where !runningJobs.contains(key) {
            guard let job = jobs[key], job.isWorthRetrying(current: watcher.pauses[job.pause.stateID], now: wall) else {
                jobs[key] = nil
                jobRetries.succeeded(key)
                continue
            }
            start(job)
        }
        for runID in unrecordedRuns.due(now: time) {
            unrecordedRuns.failed(runID, now: time, random: Double.random(in: 0..<1))  // until the answer comes
            fetchRun(runID)
        }
    }

    /// What an announce's reads came to, in one hop: its run read doubles as the watcher's source for the pause's
    /// timeout, and the answer is the run's custom events seen live so far and whether a pause of its flow may wait
    /// for a late one (`FlowHabits.shouldWait`).
    ///
    /// The watcher takes the run now; what it decides (the timeout's store write, mostly) is applied in a job of
    /// its own on this actor, right after this one: the announce goes on to its alert text meanwhile instead of
    /// waiting for a transaction that its pushes don't depend on.
    func contextRead(_ run: FlowRun?, runID: String, flowID: String?) -> ContextRead {
        if let run {
            let actions = watcher.handle(.run(run), now: now())
            if !actions.isEmpty { Task { self.apply(actions) } }
        }
        return ContextRead(live: liveEvents(runID: runID), mayWait: habits.shouldWait(flowID: flowID),
                           at: SystemClock.monotonic())
    }

    /// What an announce's look at the tracker comes back with.
    struct ContextRead: Sendable {
        /// The run's custom events and artifacts seen live on the socket so far.
        var live: LiveEvents
        /// Whether a pause of its flow may wait for a late one.
        var mayWait: Bool
        /// When `live` was looked at (monotonic seconds): the announce looks again if its input rows came much later.
        var at: Double
    }

    /// An announce or refresh stored props built with `arrivals` of the run's live events and artifacts: set by its
    /// announce, only raised by a refresh (and never for a pause that has ended meanwhile, which has no entry left).
    func builtWith(_ arrivals: Int, stateID: String, replacing: Bool) {
        if !replacing {
            propsArrivals[stateID] = arrivals
        } else if let used = propsArrivals[stateID] {
            propsArrivals[stateID] = max(used, arrivals)
        }
    }

    /// A refresh found no props to build again: later events start none (an announce that stores props counts again).
    func nothingToRefresh(stateID: String) { propsArrivals[stateID] = nil }
}

// MARK: - Flow habits

extension PauseTracker {
    /// An announce found no context even after waiting: the flow is learned to send none.
    func foundNoContext(flowID: String?) { remember(habits.announcedWithoutContext(flowID: flowID)) }

    /// Stores what was learned about a flow. A failure only costs a wait (or a missed wait) after a restart.
    func remember(_ learned: FlowHabits.Learned?) {
        guard let learned else { return }
        Log.info("flow.habit", ["flow": learned.flowID, "sends_context": learned.habit == .sendsContext ? "yes" : "no"])
        let at = Int64(now())
        _ = ledger.inOrder { $0.attempt("flow_habit", level: .warn) { try $0.setFlowHabit(flowID: learned.flowID, learned.habit, at: at) } }
    }
}

