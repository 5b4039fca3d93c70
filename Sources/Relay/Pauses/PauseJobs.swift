import RelayCore

/// Does the pause jobs the tracker owes: reads the run's context (Prefect, and what the socket told the tracker),
/// builds the pause's props, has the `PushPlanner` turn them and a snapshot of the recipients into outbox batches,
/// writes those (`OutboxSender.enqueue`) and sends them. Each job runs on the tracker's isolation (`tracker` is
/// an `isolated` parameter, passed by the job's own task): it reads the tracker's state without a hop, and holds
/// no reference to it.
struct PauseJobs: Sendable {
    let outbox: OutboxSender
    let ledger: Ledger
    let gatherer: ContextGatherer
    let planner: PushPlanner
    let now: @Sendable () -> Double

    /// Pushes are built and stored only with an APNs key; without one the announce still stores its props.
    private var sending: Bool { outbox.apns != nil }

    /// Does one pause job; false when it could not (Prefect or the store failed) and should be tried again.
    /// `followed`: the socket has told the run's history since before the pause (read as the job started, so the
    /// announce's Prefect reads don't wait for anything first).
    func perform(_ job: PauseJob, tracker: isolated PauseTracker, receivedAt: Double, followed: Bool) async -> Bool {
        switch job.kind {
        case .announce(let origin):
            await announce(job.pause, origin, tracker: tracker, receivedAt: receivedAt, followed: followed)
        case .remind(let minutes):
            await remind(job.pause, minutesLeft: minutes, tracker: tracker, receivedAt: receivedAt, followed: followed)
        case .end: await end(job.pause, tracker: tracker, receivedAt: receivedAt, followed: followed)
        case .refresh: await refresh(job.pause, tracker: tracker, receivedAt: receivedAt, followed: followed)
        }
    }

    /// Reads the context, then writes the props and every device's alert and Live Activity start to the outbox in
    /// one transaction, then sends them. `origin` nil: a retry, with only the stored record to go on.
    private func announce(_ pause: PauseRecord, _ origin: PauseWatcher.Origin?, tracker: isolated PauseTracker,
                          receivedAt: Double, followed: Bool) async -> Bool {
        let (flowID, flowName, pausedAt): (String?, String?, Double?) = switch origin {
        case .event(let event)?: (event.flowID, event.flowName, event.stateTimestamp)
        case .run(let run)?: (run.flowID, nil, run.stateTimestamp)
        case nil: (nil, nil, nil)
        }
        // The registry is read while Prefect is (it doesn't depend on the context), off the path to the first push.
        async let registered = ledger.devices()
        let request = PropsRequest(pause: pause, flowID: flowID, flowName: flowName, pausedAt: pausedAt,
                                   followed: followed, announcing: true, receivedAt: receivedAt)
        let props: WaitingProps
        let arrivals: Int
        switch await buildProps(request, tracker: tracker) {
        case .built(let built, let seen): (props, arrivals) = (built, seen)
        case .over: return true
        case .unavailable: return false
        }
        guard let devices = await registered else { return false }
        let batches = sending ? planner.announce(pause, props, to: devices, now: Int64(now())) : []
        let alongside = Ledger.Alongside(props: (pause.stateID, props.encoded(), false))
        switch await outbox.enqueueAndSend(batches, alongside: alongside, receivedAt: receivedAt, runID: pause.runID,
                                           purpose: "announce") {
        case .refused:
            return false
        case .nothingOwed:
            tracker.builtWith(arrivals, stateID: pause.stateID, replacing: false)
        case .queued:
            tracker.builtWith(arrivals, stateID: pause.stateID, replacing: false)
            tracker.tally.count { $0.announced += 1 }
            if !sending { Log.info("apns.disabled", ["run": pause.runID, "note": "no APNs key; nothing sent"]) }
        }
        return true
    }

    /// The reminder's pushes go to the outbox in the transaction that claims the pause's one reminder, so a kill
    /// can't leave it claimed but never queued.
    private func remind(_ pause: PauseRecord, minutesLeft: Int, tracker: isolated PauseTracker, receivedAt: Double,
                        followed: Bool) async -> Bool {
        let claim = Ledger.Alongside(reminded: (stateID: pause.stateID, at: pause.remindedAt ?? Int64(now())))
        guard sending else { return await enqueueAndSend([], alongside: claim, pause, receivedAt: receivedAt, purpose: "remind") }
        guard let props = await storedProps(pause, tracker: tracker, followed: followed),
              let devices = await ledger.devices() else { return false }
        let batches = planner.remind(pause, props, minutesLeft: minutesLeft, to: devices, now: Int64(now()))
        return await enqueueAndSend(batches, alongside: claim, pause, receivedAt: receivedAt, purpose: "remind")
    }

    /// Ends the run's Live Activity on every phone that registered one; the end pushes are queued and the tokens
    /// forgotten in one transaction.
    private func end(_ pause: PauseRecord, tracker: isolated PauseTracker, receivedAt: Double, followed: Bool) async -> Bool {
        guard let activities = await ledger.activities(runID: pause.runID) else { return false }
        guard !activities.isEmpty else { return true }
        let forget = Ledger.Alongside(forgetActivitiesOf: pause.runID)
        guard sending else { return await enqueueAndSend([], alongside: forget, pause, receivedAt: receivedAt, purpose: "end") }
        guard let props = await storedProps(pause, tracker: tracker, followed: followed) else { return false }
        let batches = planner.end(pause, props, activities: activities, now: Int64(now()))
        return await enqueueAndSend(batches, alongside: forget, pause, receivedAt: receivedAt, purpose: "end")
    }

    /// A late custom event or artifact for an announced pause: its props are built again and, when the text changed,
    /// stored in place of the announced ones (the reminder and the Live Activity's end are made from them) in the
    /// transaction that queues a silent update of the run's Live Activities (`PauseJob.Kind.refresh`). No alert:
    /// the phone already has one.
    private func refresh(_ pause: PauseRecord, tracker: isolated PauseTracker, receivedAt: Double,
                         followed: Bool) async -> Bool {
        guard let read = await ledger.props(stateID: pause.stateID) else { return false }  // tried again
        guard let text = read, let json = try? JSONParser.parse(text), let stored = WaitingProps(json: json) else {
            // Ended and pruned, never announced, or props this version can't read: nothing to refresh, now or on the
            // next event. Still counted as behind, it would be started again as soon as it is done, without end.
            tracker.nothingToRefresh(stateID: pause.stateID)
            return true
        }
        let request = PropsRequest(pause: pause, flowName: stored.flowName, followed: followed)
        guard case .built(let props, let arrivals) = await buildProps(request, tracker: tracker),
              let activities = await ledger.activities(runID: pause.runID) else { return false }
        let batches = sending ? planner.update(pause, props, activities: activities, now: Int64(now())) : []
        let replacing = Ledger.Alongside(props: (pause.stateID, props.encoded(), true))
        let enqueued = await outbox.enqueueAndSend(batches, alongside: replacing, receivedAt: receivedAt,
                                                   runID: pause.runID, purpose: "refresh")
        // A refresh that found nothing new still counts what it was built with (or it would be started again).
        if enqueued != .refused { tracker.builtWith(arrivals, stateID: pause.stateID, replacing: true) }
        if case .queued(let items) = enqueued {
            Log.info("pause.refreshed", ["run": pause.runID, "state": pause.stateID, "updates": String(items.count)])
        }
        return enqueued != .refused
    }

    private func enqueueAndSend(_ batches: [OutboxBatch], alongside: Ledger.Alongside, _ pause: PauseRecord,
                                receivedAt: Double, purpose: String) async -> Bool {
        await outbox.enqueueAndSend(batches, alongside: alongside, receivedAt: receivedAt, runID: pause.runID,
                                    purpose: purpose) != .refused
    }
}
