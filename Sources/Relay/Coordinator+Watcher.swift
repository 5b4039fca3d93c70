import Glibc
import RelayCore

/// Driving the pure `Watcher` from the socket, the listing and the clock, and applying what it decides: store
/// writes first (in order, on this actor), then the pushes they guard, off the actor so a slow phone or a slow
/// Prefect read never holds up the next event. A write the store refuses is undone in the watcher's memory too,
/// and the run is read again later: memory never claims what the store does not hold.
extension Coordinator {
    static let listingInterval: Double = 60
    /// While the events socket is down, the listing is what finds pauses (REST may well still work).
    static let disconnectedListingInterval: Double = 3
    static let tickInterval: Double = 1

    /// One message from the events socket, in arrival order.
    func received(_ message: SocketMessage) {
        switch message {
        case .subscribed:
            subscribed = true
            authRejected = false
            Log.info("events.subscribed")
            metrics.subscribed = true
            requestListing()
        case .event(let json):
            metrics.eventsReceived += 1
            guard let event = PrefectEvent(json: json) else { return }
            guard let state = event.stateEvent else {
                if let (runID, artifact) = RunArtifact.fromCollectionEvent(event) {
                    recentEvents.add(artifact, runID: runID)
                    cameLate(runID: runID)
                    return
                }
                // A custom event on a run: context an alert may want before Prefect has stored it.
                if let runID = event.runID, let runEvent = RunEvent(prefect: json) {
                    Log.debug("events.custom", ["run": runID, "name": String(event.name.prefix(80))])
                    if recentEvents.add(runEvent, runID: runID) {
                        cameLate(runID: runID)
                        let flowID = event.related(role: "flow").map { String($0.id.dropFirst("prefect.flow.".count)) }
                        remember(habits.sawContextEvent(runID: runID, flowID: flowID))
                    }
                }
                return
            }
            habits.sawRun(state.runID, flowID: state.flowID)
            if !state.isPaused { recentEvents.follow(state.runID) }
            apply(watcher.handle(.event(state), now: now()))
        case .disconnected(let reason, let retryIn):
            if subscribed || Log.isEnabled(.debug) {
                Log.warn("events.closed", ["reason": reason, "retry_in_ms": String(Int(retryIn * 1000))])
            }
            if subscribed { socketDownSince = SystemClock.monotonic() }
            subscribed = false
            recentEvents.stopFollowing()
            authRejected = SocketMessage.isAuthRejection(reason)
            metrics.subscribed = false
            metrics.reconnects += 1
        }
    }

    /// Every `tickInterval`: reminders and pruning, the paused listing when it is due, work to try again, stored
    /// pushes that are due, and a look at the database file.
    func tick() {
        guard store.fileIsStillOurs else {
            // Writing on would go to an unlinked file that vanishes at exit: stop, so the supervisor restarts us on
            // the file that is there now.
            Log.error("store.lost", ["path": store.path, "fix": "the database file was deleted or replaced; restarting"])
            exit(1)
        }
        let time = now()
        apply(watcher.handle(.tick, now: time))
        // A refused credential is refused on REST too: list at the slow pace rather than every 3 s.
        let interval = subscribed || authRejected ? Coordinator.listingInterval : Coordinator.disconnectedListingInterval
        if time - lastListing >= interval { requestListing() }
        retryDueWork(now: time)
        flushSettled()
        watchHealth()
        Log.writeSuppressedCounts()
        drainOutbox()
        if time - lastOutboxPrune >= 300 { pruneOutbox() }
    }

    func requestListing() {
        lastListing = now()
        let prefect = self.prefect
        Task(executorPreference: RelayExecutor.shared) {
            let body: JSONValue = ["flow_runs": ["state": ["type": ["any_": ["PAUSED"]]]], "sort": "EXPECTED_START_TIME_DESC",
                                   "limit": 200]
            switch await prefect.json("POST", "/flow_runs/filter", body: body) {
            case .success(let reply) where reply.status == 200:
                guard let json = try? JSONParser.parse(reply.body) else { return }
                await self.listed(FlowRun.list(json: json))
            case .success(let reply):
                Log.warn("prefect.listing_failed", ["status": String(reply.status)])
            case .failure(let failure):
                Log.warn("prefect.listing_failed", ["error": failure.reason])
            }
        }
    }

    private func listed(_ runs: [FlowRun]) {
        apply(watcher.handle(.listing(runs), now: now()))
    }

    /// `run` nil: Prefect answered 404, the run is gone.
    private func fetched(_ runID: String, _ run: FlowRun?) {
        unrecordedRuns.succeeded(runID)
        apply(watcher.handle(run.map { .run($0) } ?? .runNotFound(runID: runID), now: now()))
    }

    /// Applies the watcher's actions in order. A store write that fails stops the effect it guards and is undone
    /// in the watcher, and the run is read again on the retry schedule: the step is taken again, not forgotten.
    ///
    /// Announces are the exception: they are not held back by the writes. A live pause's first Prefect reads are
    /// already under way (begun on the socket's thread, `RunReadAhead`), and its job, queued first, runs on the
    /// relay's thread as soon as this one is done (`RelayExecutor`). What guards them is the announce's own outbox
    /// write, which needs the pause's record (failing without it, so the job is tried
    /// again once the pause is recorded) and sends nothing for a pause already announced (`Store.setProps`).
    func apply(_ actions: [Watcher.Action], receivedAt: Double = SystemClock.monotonic()) {
        for case .announce(let pause, let origin) in actions {
            Log.info("pause.detected", ["run": pause.runID, "state": pause.stateID, "name": pause.stateName])
            start(PauseJob(.announce(origin), pause), receivedAt: receivedAt)
        }
        var skipped: Set<String> = []
        for action in actions {
            let skippedBefore = skipped.count
            do {
                switch action {
                case .record(let pause):
                    if try !store.insertPause(pause) { skipped.insert(pause.stateID) }
                case .setTimeout(let stateID, let timeoutAt):
                    try store.setTimeout(stateID: stateID, timeoutAt: timeoutAt)
                case .markReminded:
                    // Claimed in the store by the reminder's own outbox write, in one transaction (`enqueue`): a
                    // kill between a separate claim and the pushes would lose the reminder for good.
                    break
                case .markEnded(let stateID, let at, let state):
                    if try !store.markEnded(stateID: stateID, state: state, at: at) { skipped.insert(stateID) }
                    propsArrivals[stateID] = nil
                    drop(PauseJob.Kind.announce(nil), stateID: stateID)
                case .announce:
                    break  // started above
                case .remind(let pause, let minutes):
                    guard !skipped.contains(pause.stateID) else { continue }
                    metrics.reminded += 1
                    Log.info("pause.remind", ["run": pause.runID, "state": pause.stateID, "minutes_left": String(minutes)])
                    start(PauseJob(.remind(minutesLeft: minutes), pause), receivedAt: receivedAt)
                case .end(let pause):
                    guard !skipped.contains(pause.stateID) else { continue }
                    metrics.ended += 1
                    Log.info("pause.end", ["run": pause.runID, "state": pause.stateID, "ended": pause.endedState ?? "?"])
                    start(PauseJob(.end, pause), receivedAt: receivedAt)
                case .fetchRun(let runID):
                    fetchRun(runID)
                }
                // Only a write that changed a row shows the store can write (a no-op needs no disk space).
                if action.writesStore && skipped.count == skippedBefore { storeWrote() }
            } catch {
                storeFailed(["action": "\(action)".prefix(60).description, "error": "\(error)"])
                storeRefused(action, skipped: &skipped)
            }
        }
    }

    /// The store could not write `action`: undo it in memory, skip what it guards, and read the run again later.
    private func storeRefused(_ action: Watcher.Action, skipped: inout Set<String>) {
        watcher.revert(action)
        switch action {
        case .record(let pause):
            skipped.insert(pause.stateID)
            unrecordedRuns.failed(pause.runID, now: now(), random: Double.random(in: 0..<1))
        case .markEnded(let stateID, _, _):
            skipped.insert(stateID)
            if let runID = watcher.pauses[stateID]?.runID {
                unrecordedRuns.failed(runID, now: now(), random: Double.random(in: 0..<1))
            }
        default:
            break
        }
    }

    private func fetchRun(_ runID: String) {
        let prefect = self.prefect
        Task(executorPreference: RelayExecutor.shared) {
            switch await prefect.flowRun(id: runID) {
            case .found(let json):
                // An answer we can't read says nothing about the run: never end a pause on it.
                guard let read = FlowRun(json: json) else {
                    Log.warn("prefect.run_unreadable", ["run": runID])
                    return
                }
                await self.fetched(runID, read)
            case .notFound: await self.fetched(runID, nil)
            case .failed: await self.runReadFailed(runID)
            }
        }
    }

    /// A run we must read again (its state could not be recorded) could not be read: later, on the schedule.
    private func runReadFailed(_ runID: String) {
        guard unrecordedRuns.contains(runID) else { return }  // otherwise the next listing asks again
        unrecordedRuns.failed(runID, now: now(), random: Double.random(in: 0..<1))
    }

    // MARK: - Jobs

    /// Runs a pause job off the actor (one per key at a time); a failure keeps it for `retryDueWork`.
    func start(_ job: PauseJob, receivedAt: Double = SystemClock.monotonic()) {
        jobs[job.key] = job
        guard runningJobs.insert(job.key).inserted else { return }
        let followed = recentEvents.follows(job.pause.runID)
        background { notifier in
            let done = await notifier.perform(job, receivedAt: receivedAt, followed: followed)
            await self.finished(job, done: done)
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
            let delay = jobRetries.failed(job.key, now: now(), random: Double.random(in: 0..<1))
            Log.warn("pause.retry", ["job": job.key, "run": job.pause.runID, "in_ms": String(Int(delay * 1000))])
        }
    }

    private func drop(_ kind: PauseJob.Kind, stateID: String) {
        guard let pause = watcher.pauses[stateID] else { return }
        let key = PauseJob(kind, pause).key
        jobs[key] = nil
        jobRetries.succeeded(key)
    }

    /// Jobs and run reads whose retry time has come, while they still matter.
    private func retryDueWork(now time: Double) {
        for key in jobRetries.due(now: time) where !runningJobs.contains(key) {
            guard let job = jobs[key], job.isWorthRetrying(current: watcher.pauses[job.pause.stateID], now: time) else {
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

    /// Runs push work off the actor, counted so shutdown can wait for it. It starts on the relay's thread once the
    /// caller's job (its store writes) is done (`RelayExecutor`); an announce's first Prefect reads don't wait for
    /// that, the socket's thread began them (`RunReadAhead`).
    func background(_ work: @escaping @Sendable (Notifier) async -> Void) {
        guard let notifier else { return }
        backgroundWork += 1
        Task.detached(executorPreference: RelayExecutor.shared) {
            await work(notifier)
            await self.finishedBackground()
        }
    }

    private func finishedBackground() { backgroundWork -= 1 }
}

// MARK: - Flow habits

extension Coordinator {
    /// An announce found no context even after waiting: the flow is learned to send none.
    func foundNoContext(flowID: String?) { remember(habits.announcedWithoutContext(flowID: flowID)) }

    /// Stores what was learned about a flow. A failure only costs a wait (or a missed wait) after a restart.
    private func remember(_ learned: FlowHabits.Learned?) {
        guard let learned else { return }
        Log.info("flow.habit", ["flow": learned.flowID, "sends_context": learned.habit == .sendsContext ? "yes" : "no"])
        do { try store.setFlowHabit(flowID: learned.flowID, learned.habit, at: Int64(now())) } catch {
            storeFailed(level: .warn, ["action": "flow_habit", "error": "\(error)"])
        }
    }
}

private extension Watcher.Action {
    /// The actions `apply` writes to the store: one that commits shows the store works.
    var writesStore: Bool {
        switch self {
        case .record, .setTimeout, .markEnded: return true
        case .markReminded, .announce, .remind, .end, .fetchRun: return false
        }
    }
}
