import RelayCore

/// Driving the pure `PauseWatcher` from the socket, the listing and the clock, and applying what it decides: store
/// writes first (in order, synchronously through the `Ledger`), then the jobs they guard, which run on their own
/// so a slow phone or a slow Prefect read never holds up the next event.
extension PauseTracker {
    /// One message from the events socket, in arrival order.
    func received(_ message: SocketMessage) {
        switch message {
        case .subscribed:
            subscribed = true
            authRejected = false
            Log.info("events.subscribed")
            tally.count { $0.subscribed = true }
            requestListing()
        case .event(let json):
            tally.count { $0.eventsReceived += 1 }
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
        case .disconnected(let ending, let reason, let retryIn):
            if subscribed || Log.isEnabled(.debug) {
                Log.warn("events.closed", ["reason": reason, "retry_in_ms": String(Int(retryIn * 1000))])
            }
            if subscribed { socketDownSince = SystemClock.monotonic() }
            subscribed = false
            recentEvents.stopFollowing()
            authRejected = ending.isRefusal
            tally.count {
                $0.subscribed = false
                $0.reconnects += 1
            }
        }
    }

    func requestListing() {
        lastListing = steady()
        let prefect = self.prefect
        Task {
            await withTaskExecutorPreference(RelayExecutor.shared) {
                let body: JSONValue = ["flow_runs": ["state": ["type": ["any_": ["PAUSED"]]]], "sort": "EXPECTED_START_TIME_DESC",
                                       "limit": 200]
                switch await prefect.json("POST", "/flow_runs/filter", body: body) {
                case .success(let reply) where reply.status == 200:
                    guard let json = try? JSONParser.parse(reply.body) else { return }
                    self.listed(FlowRun.list(json: json))
                case .success(let reply):
                    Log.warn("prefect.listing_failed", ["status": String(reply.status)])
                case .failure(let failure):
                    Log.warn("prefect.listing_failed", ["error": failure.reason])
                }
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
    func apply(_ actions: [PauseWatcher.Action], receivedAt: Double = SystemClock.monotonic()) {
        for case .announce(let pause, let origin) in actions {
            Log.info("pause.detected", ["run": pause.runID, "state": pause.stateID, "name": pause.stateName])
            start(PauseJob(.announce(origin), pause), receivedAt: receivedAt)
        }
        var skipped: Set<String> = []
        for action in actions {
            switch action {
            case .record, .setTimeout, .markEnded:
                switch write(action) {
                case nil:
                    storeRefused(action, skipped: &skipped)
                    continue
                case false?:
                    if case .record(let pause) = action { skipped.insert(pause.stateID) }
                    if case .markEnded(let stateID, _, _) = action { skipped.insert(stateID) }
                case true?:
                    break
                }
            default:
                break
            }
            switch action {
            case .record, .setTimeout, .markReminded, .announce:
                // The reminder is claimed in the store by its own outbox write, in one transaction
                // (`Ledger.enqueue`): a kill between a separate claim and the pushes would lose it for good.
                // Announces were started above.
                break
            case .markEnded(let stateID, _, _):
                propsArrivals[stateID] = nil
                drop(PauseJob.Kind.announce(nil), stateID: stateID)
            case .remind(let pause, let minutes):
                guard !skipped.contains(pause.stateID) else { continue }
                tally.count { $0.reminded += 1 }
                Log.info("pause.remind", ["run": pause.runID, "state": pause.stateID, "minutes_left": String(minutes)])
                start(PauseJob(.remind(minutesLeft: minutes), pause), receivedAt: receivedAt)
            case .end(let pause):
                guard !skipped.contains(pause.stateID) else { continue }
                tally.count {
                    $0.ended += 1
                    $0.recordPauseEnd(pause)
                }
                logEnd(pause)
                start(PauseJob(.end, pause), receivedAt: receivedAt)
            case .fetchRun(let runID):
                fetchRun(runID)
            }
        }
    }

    /// `pause.end`; for an announced pause also what the wait histogram counted (`Metrics.recordPauseEnd`).
    private func logEnd(_ pause: PauseRecord) {
        let ended = pause.endedState ?? "?"
        guard pause.announcedAt != nil else {
            Log.info("pause.end", ["run": pause.runID, "state": pause.stateID, "ended": ended])
            return
        }
        Log.info("pause.end", ["run": pause.runID, "state": pause.stateID, "ended": ended,
                               "outcome": PauseOutcome.of(pause).rawValue,
                               "waited_s": String(PauseOutcome.waited(pause))])
    }

    /// One of the watcher's store writes, in order, now: whether it changed a row (false: the row was not there to
    /// change, and what it guards is skipped); nil when the store refused it. Only a write that changed a row
    /// shows the store can write (a no-op needs no disk space).
    private func write(_ action: PauseWatcher.Action) -> Bool? {
        ledger.inOrder { ledger in
            let changed = ledger.attempt(String("\(action)".prefix(60))) { store -> Bool in
                switch action {
                case .record(let pause): return try store.insertPause(pause)
                case .setTimeout(let stateID, let timeoutAt):
                    try store.setTimeout(stateID: stateID, timeoutAt: timeoutAt)
                    return true
                case .markEnded(let stateID, let at, let state): return try store.markEnded(stateID: stateID, state: state, at: at)
                default: return true
                }
            }
            if changed == true { ledger.succeeded() }
            return changed
        }
    }

    /// The store could not write `action`: undo it in memory, skip what it guards, and read the run again later.
    private func storeRefused(_ action: PauseWatcher.Action, skipped: inout Set<String>) {
        watcher.revert(action)
        switch action {
        case .record(let pause):
            skipped.insert(pause.stateID)
            unrecordedRuns.failed(pause.runID, now: steady(), random: Double.random(in: 0..<1))
        case .markEnded(let stateID, _, _):
            skipped.insert(stateID)
            if let runID = watcher.pauses[stateID]?.runID {
                unrecordedRuns.failed(runID, now: steady(), random: Double.random(in: 0..<1))
            }
        default:
            break
        }
    }

    func fetchRun(_ runID: String) {
        let prefect = self.prefect
        Task {
            await withTaskExecutorPreference(RelayExecutor.shared) {
                switch await prefect.flowRun(id: runID) {
                case .found(let json):
                    // An answer we can't read says nothing about the run: never end a pause on it.
                    guard let read = FlowRun(json: json) else {
                        Log.warn("prefect.run_unreadable", ["run": runID])
                        return
                    }
                    self.fetched(runID, read)
                case .notFound: self.fetched(runID, nil)
                case .failed: self.runReadFailed(runID)
                }
            }
        }
    }

    /// A run we must read again (its state could not be recorded) could not be read: later, on the schedule.
    private func runReadFailed(_ runID: String) {
        guard unrecordedRuns.contains(runID) else { return }  // otherwise the next listing asks again
        unrecordedRuns.failed(runID, now: steady(), random: Double.random(in: 0..<1))
    }
}
