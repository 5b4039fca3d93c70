import RelayCore

/// Driving the pure `Watcher` from the socket, the listing and the clock, and applying what it decides: store
/// writes first (in order, on this actor), then the pushes they guard, off the actor so a slow phone or a slow
/// Prefect read never holds up the next event.
extension Relay {
    static let listingInterval: Double = 60
    static let tickInterval: Double = 5

    /// One message from the events socket, in arrival order.
    func received(_ message: SocketMessage) {
        switch message {
        case .subscribed:
            subscribed = true
            Log.info("events.subscribed")
            metrics.subscribed = true
            requestListing()
        case .event(let json):
            metrics.eventsReceived += 1
            guard let event = PrefectEvent(json: json) else { return }
            guard let state = event.stateEvent else {
                // A custom event on a run: context an alert may want before Prefect has stored it.
                if let runID = event.runID, let runEvent = RunEvent(prefect: json) {
                    Log.debug("events.custom", ["run": runID, "name": String(event.name.prefix(80))])
                    recentEvents.add(runEvent, runID: runID)
                }
                return
            }
            apply(watcher.handle(.event(state), now: now()))
        case .disconnected(let reason, let retryIn):
            if subscribed || Log.isEnabled(.debug) {
                Log.warn("events.closed", ["reason": reason, "retry_in_ms": String(Int(retryIn * 1000))])
            }
            subscribed = false
            metrics.subscribed = false
            metrics.reconnects += 1
        }
    }

    /// Every `tickInterval`: reminders and pruning; every `listingInterval`: the paused listing.
    func tick() {
        apply(watcher.handle(.tick, now: now()))
        if subscribed && now() - lastListing >= Relay.listingInterval { requestListing() }
    }

    func requestListing() {
        lastListing = now()
        let prefect = self.prefect
        Task {
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
        apply(watcher.handle(run.map { .run($0) } ?? .runNotFound(runID: runID), now: now()))
    }

    /// Applies the watcher's actions in order. A store write that fails stops the effect it guards: better one
    /// missed push than a push the relay can't remember sending.
    func apply(_ actions: [Watcher.Action], receivedAt: Double = Clock.monotonic()) {
        var skipped: Set<String> = []
        for action in actions {
            do {
                switch action {
                case .record(let pause):
                    if try !store.insertPause(pause) { skipped.insert(pause.stateID) }
                case .setTimeout(let stateID, let timeoutAt):
                    try store.setTimeout(stateID: stateID, timeoutAt: timeoutAt)
                case .markReminded(let stateID, let at):
                    if try !store.markReminded(stateID: stateID, at: at) { skipped.insert(stateID) }
                case .markEnded(let stateID, let at, let state):
                    if try !store.markEnded(stateID: stateID, state: state, at: at) { skipped.insert(stateID) }
                case .prune(let before):
                    let pruned = try store.prunePauses(endedBefore: before)
                    if pruned > 0 { Log.debug("pauses.pruned", ["count": String(pruned)]) }
                case .announce(let pause, let origin):
                    guard !skipped.contains(pause.stateID) else { continue }
                    Log.info("pause.detected", ["run": pause.runID, "state": pause.stateID, "name": pause.stateName])
                    background { notifier in await notifier.announce(pause, origin, receivedAt: receivedAt) }
                case .remind(let pause, let minutes):
                    guard !skipped.contains(pause.stateID) else { continue }
                    metrics.reminded += 1
                    Log.info("pause.remind", ["run": pause.runID, "state": pause.stateID, "minutes_left": String(minutes)])
                    background { notifier in await notifier.remind(pause, minutesLeft: minutes, receivedAt: receivedAt) }
                case .end(let pause):
                    guard !skipped.contains(pause.stateID) else { continue }
                    metrics.ended += 1
                    Log.info("pause.end", ["run": pause.runID, "state": pause.stateID, "ended": pause.endedState ?? "?"])
                    background { notifier in await notifier.end(pause, receivedAt: receivedAt) }
                case .fetchRun(let runID):
                    let prefect = self.prefect
                    Task {
                        let run = await prefect.flowRun(id: runID)
                        switch run {
                        case .found(let json):
                            // An answer we can't read says nothing about the run: never end a pause on it.
                            guard let read = FlowRun(json: json) else {
                                Log.warn("prefect.run_unreadable", ["run": runID])
                                return
                            }
                            await self.fetched(runID, read)
                        case .notFound: await self.fetched(runID, nil)
                        case .failed: break  // the next listing asks again
                        }
                    }
                }
            } catch {
                Log.error("store.failed", ["action": "\(action)".prefix(60).description, "error": "\(error)"])
                if case .record(let pause) = action { skipped.insert(pause.stateID) }
            }
        }
    }

    /// Runs push work off the actor, counted so shutdown can wait for it.
    private func background(_ work: @escaping @Sendable (Notifier) async -> Void) {
        guard let notifier else { return }
        inFlight += 1
        Task {
            await work(notifier)
            await self.finishedBackground()
        }
    }

    private func finishedBackground() { inFlight -= 1 }
}
