import RelayCore

/// Turns the watcher's announce / remind / end decisions into APNs pushes: gathers the context,
/// builds one `WaitingProps` per pause, writes every device's push to the outbox (through the relay, which owns
/// the store), then fans out to every device at once over the shared connections. Runs off the relay actor.
struct Notifier: Sendable {
    let relay: Coordinator
    let gatherer: ContextGatherer
    let apns: APNsClient?
    let uiRoot: String
    let topic: String
    let now: @Sendable () -> Double

    /// How long APNs may hold an undelivered push when the pause has no timeout (Suspended runs).
    static let defaultExpiry: Int64 = 24 * 3600

    /// Does one pause job; false when it could not (Prefect or the store failed) and should be tried again.
    /// `followed`: the socket has told the run's history since before the pause (read on the actor as the job
    /// started, so the announce's Prefect reads don't wait for an actor hop first).
    func perform(_ job: PauseJob, receivedAt: Double, followed: Bool) async -> Bool {
        switch job.kind {
        case .announce(let origin): await announce(job.pause, origin, receivedAt: receivedAt, followed: followed)
        case .remind(let minutes):
            await remind(job.pause, minutesLeft: minutes, receivedAt: receivedAt, followed: followed)
        case .end: await end(job.pause, receivedAt: receivedAt, followed: followed)
        case .refresh: await refresh(job.pause, receivedAt: receivedAt, followed: followed)
        }
    }

    /// Reads the context, then writes the props and every device's alert and Live Activity start to the outbox in
    /// one transaction, then sends them. `origin` nil: a retry, with only the stored record to go on.
    private func announce(_ pause: PauseRecord, _ origin: Watcher.Origin?, receivedAt: Double,
                          followed: Bool) async -> Bool {
        let (flowID, flowName, pausedAt): (String?, String?, Double?) = switch origin {
        case .event(let event)?: (event.flowID, event.flowName, event.stateTimestamp)
        case .run(let run)?: (run.flowID, nil, run.stateTimestamp)
        case nil: (nil, nil, nil)
        }
        // The registry is read while Prefect is (it doesn't depend on the context), off the path to the first push.
        async let registered = relay.devices()
        let props: WaitingProps
        let arrivals: Int
        switch await buildProps(pause, flowID: flowID, flowName: flowName, pausedAt: pausedAt, followed: followed,
                                announcing: true, receivedAt: receivedAt) {
        case .built(let built, let seen): (props, arrivals) = (built, seen)
        case .over: return true
        case .unavailable: return false
        }
        guard let devices = await registered else { return false }
        let stamp = Int64(now())
        let expiry = props.timeoutAt ?? stamp + Notifier.defaultExpiry
        let batches = apns == nil ? [] : perServer(devices, props) { deviceProps, group in
            var batches = [OutboxBatch(
                message: message(Payloads.alert(deviceProps, stateID: pause.stateID), .alert, pause, expiry: expiry),
                recipients: group.map { ($0, $0.token) })]
            let starters = group.compactMap { device in device.startToken.map { (device, $0) } }
            if !starters.isEmpty {
                let start = Payloads.liveActivityStart(deviceProps, stateID: pause.stateID, now: stamp)
                batches.append(OutboxBatch(message: message(start, .start, pause, expiry: expiry), recipients: starters))
            }
            return batches
        }
        guard let items = await relay.enqueue(batches, props: (pause.stateID, props.encoded(), arrivals, false)) else {
            return false
        }
        guard apns != nil else {
            Log.info("apns.disabled", ["run": pause.runID, "note": "no APNs key; nothing sent"])
            return true
        }
        await send(items, receivedAt: receivedAt, runID: pause.runID, purpose: "announce")
        return true
    }

    /// The reminder's pushes go to the outbox in the transaction that claims the pause's one reminder, so a kill
    /// can't leave it claimed but never queued.
    private func remind(_ pause: PauseRecord, minutesLeft: Int, receivedAt: Double, followed: Bool) async -> Bool {
        let claim = (stateID: pause.stateID, at: pause.remindedAt ?? Int64(now()))
        guard apns != nil else { return await relay.enqueue([], reminded: claim) != nil }
        guard let props = await storedProps(pause, followed: followed), let devices = await relay.devices() else {
            return false
        }
        let expiry = props.timeoutAt ?? Int64(now()) + 300
        let batches = perServer(devices, props) { deviceProps, group in
            let reminder = Payloads.reminder(deviceProps, stateID: pause.stateID, minutesLeft: minutesLeft)
            return [OutboxBatch(message: message(reminder, .reminder, pause, expiry: expiry),
                                recipients: group.map { ($0, $0.token) })]
        }
        guard let items = await relay.enqueue(batches, reminded: claim) else { return false }
        await send(items, receivedAt: receivedAt, runID: pause.runID, purpose: "remind")
        return true
    }

    /// Ends the run's Live Activity on every phone that registered one; the end pushes are queued and the tokens
    /// forgotten in one transaction.
    private func end(_ pause: PauseRecord, receivedAt: Double, followed: Bool) async -> Bool {
        guard let activities = await relay.activities(runID: pause.runID) else { return false }
        guard !activities.isEmpty else { return true }
        guard apns != nil else { return await relay.enqueue([], forgetActivitiesOf: pause.runID) != nil }
        guard let props = await storedProps(pause, followed: followed) else { return false }
        let stamp = Int64(now())
        let ended = pause.endedState ?? "Deleted"  // nil: the run is gone from the server
        let batches = perActivity(activities, props, .end, pause, expiry: stamp + 3600) { deviceProps in
            Payloads.liveActivityEnd(deviceProps, endedState: ended, now: stamp)
        }
        guard let items = await relay.enqueue(batches, forgetActivitiesOf: pause.runID) else { return false }
        await send(items, receivedAt: receivedAt, runID: pause.runID, purpose: "end")
        return true
    }

    // MARK: - Props

    /// A late custom event or artifact for an announced pause: its props are built again and, when the text changed,
    /// stored in place of the announced ones (the reminder and the Live Activity's end are made from them) in the
    /// transaction that queues a silent update of the run's Live Activities (`PauseJob.Kind.refresh`). No alert:
    /// the phone already has one.
    private func refresh(_ pause: PauseRecord, receivedAt: Double, followed: Bool) async -> Bool {
        guard let read = await relay.props(stateID: pause.stateID) else { return false }  // tried again
        guard let text = read, let json = try? JSONParser.parse(text), let stored = WaitingProps(json: json) else {
            return true  // ended and pruned, or never announced: nothing to refresh
        }
        guard case .built(let props, let arrivals) = await buildProps(pause, flowID: nil, flowName: stored.flowName,
                                                                      followed: followed),
              let activities = await relay.activities(runID: pause.runID) else { return false }
        let stamp = Int64(now())
        let expiry = props.timeoutAt ?? stamp + Notifier.defaultExpiry
        let batches = apns == nil ? [] : perActivity(activities, props, .update, pause, expiry: expiry) { deviceProps in
            Payloads.liveActivityUpdate(deviceProps, now: stamp)
        }
        guard let items = await relay.enqueue(batches, props: (pause.stateID, props.encoded(), arrivals, true)) else {
            return false
        }
        await send(items, receivedAt: receivedAt, runID: pause.runID, purpose: "refresh")
        return true
    }

    /// What reading a pause's context came to.
    private enum PropsResult {
        /// `arrivals`: how many of the run's live events and artifacts it was built with (`RecentRunEvents.arrivals`).
        case built(WaitingProps, arrivals: Int)
        /// Announcing history: the run has already moved past the pause.
        case over
        /// Prefect could not be read (or gave nothing usable): try again later.
        case unavailable
    }

    /// Reads the run's context and builds the pause's props (the announce stores them for the reminder and the end).
    /// When `announcing`, a run that has already moved past the pause gets nothing: it is history replayed by a
    /// reconnect, and the run read ends the pause in the watcher instead.
    /// A run the socket has `followed` since before the pause needs no history reads: it told us all of it.
    private func buildProps(_ pause: PauseRecord, flowID: String?, flowName: String? = nil, pausedAt: Double? = nil,
                            followed: Bool, announcing: Bool = false,
                            receivedAt: Double = SystemClock.monotonic()) async -> PropsResult {
        // One hop, while the input rows are read: the run read for the watcher, the run's live events, and whether
        // its flow's pauses wait for one.
        guard let (gathered, read) = await gatherer.gather(
            runID: pause.runID, stateID: pause.stateID, pausedAt: pausedAt ?? Double(pause.pausedAt), flowID: flowID,
            flowName: flowName, readHistory: !followed,
            onRun: { run in
                await relay.contextRead(FlowRun(details: run), runID: pause.runID, flowID: run.flowID ?? flowID)
            })
        else {
            Log.warn("pause.context_unavailable", ["run": pause.runID, "state": pause.stateID])
            return .unavailable
        }
        var context = gathered.context
        let flowID = context.run.flowID ?? flowID
        if announcing && gathered.movedOn {
            Log.info("pause.already_over", ["run": pause.runID, "state": pause.stateID,
                                            "now": context.run.state?.name ?? "?"])
            return .over
        }
        // The input rows can take tens of ms to appear on a real server: a custom event may have come meanwhile.
        var live = SystemClock.monotonic() - read.at < Notifier.liveEventsFresh ? read.live
            : await relay.liveEvents(runID: pause.runID)
        var text = Notifier.adding(live, to: &context)
        if announcing && text.contextSource == .none && read.mayWait {
            // A custom event emitted just before the pause can reach the socket just after it (seen 216 ms
            // late). For a flow known to send one (or never seen), give it until `eventGrace` after the Paused event
            // arrived, looking again each time something comes for the run; a flow known to send none doesn't wait.
            let deadline = receivedAt + Notifier.eventGrace
            while text.contextSource == .none && SystemClock.monotonic() < deadline {
                live = await relay.liveEvents(runID: pause.runID, after: live.arrivals, until: deadline)
                text = Notifier.adding(live, to: &context)
            }
            if text.contextSource == .none { await relay.foundNoContext(flowID: flowID) }
        }
        var run = context.run
        if run.state?.id != pause.stateID || run.state?.isPaused != true {
            // The run moved on (or lags) before we read it: describe the pause we were told about.
            run.state = RunState(id: pause.stateID, type: "PAUSED", name: pause.stateName,
                                 timestamp: Timestamp.format(Double(pause.pausedAt)),
                                 pauseTimeout: pause.timeoutAt.map { Timestamp.format(Double($0)) })
        }
        guard let props = WaitingProps(run: run, flowName: context.flowName, text: text, serverId: "",
                                       uiRoot: uiRoot) else { return .unavailable }
        Log.info("pause.text", ["run": pause.runID, "title": String(props.title.prefix(60)), "category": props.category,
                                "context": text.contextSource.rawValue])
        return .built(props, arrivals: live.arrivals)
    }

    /// How long after its Paused event an announce with no context may wait for a late custom event. The flow's
    /// client sends its events on a connection of its own, so they can come well after the server's Paused event:
    /// ~90 ms on an idle machine, 216 ms on a loaded one (a test run with Prefect busy with other flows). The wait
    /// ends the moment the event is there, so the bound is paid in full only by a flow's first pause when it sends
    /// none (it is then known not to), and by a flow that sends one on some pauses only.
    static let eventGrace = 0.5

    /// The run's live events read beside its run read are taken as they are if the input rows came within this long
    /// after; otherwise they are looked at again.
    static let liveEventsFresh = 0.005

    /// Adds the run's custom events seen live on the socket (not yet in `/events/filter`) and reads the text.
    private static func adding(_ live: Coordinator.LiveEvents, to context: inout PauseContext) -> AlertText {
        // Whole events are compared: one without an id must not be added again each time the grace loop looks.
        let stored = Set(context.events.compactMap(\.id))
        for event in live.events where event.id.map({ !stored.contains($0) }) ?? !context.events.contains(event) {
            context.events.append(event)
        }
        // Artifacts seen live, newest first, ahead of what was read (the same artifact twice changes nothing).
        let read = context.artifacts
        context.artifacts = live.artifacts + read.filter { artifact in !live.artifacts.contains(artifact) }
        return AlertText(context: context, readers: .live)
    }

    /// The props the pause was announced with, or (none stored: announced before they were kept, or unreadable)
    /// built again; nil when neither the store nor Prefect could be read.
    private func storedProps(_ pause: PauseRecord, followed: Bool) async -> WaitingProps? {
        guard let read = await relay.props(stateID: pause.stateID) else { return nil }
        if let text = read, let json = try? JSONParser.parse(text), let props = WaitingProps(json: json) {
            return props
        }
        if case .built(let props, _) = await buildProps(pause, flowID: nil, followed: followed) { return props }
        return nil
    }

    // MARK: - Sending

    /// The batches `make` builds for each server id's devices, given the props that carry that id.
    private func perServer(_ devices: [Device], _ props: WaitingProps,
                           _ make: (WaitingProps, [Device]) -> [OutboxBatch]) -> [OutboxBatch] {
        Dictionary(grouping: devices, by: \.serverID).sorted { $0.key < $1.key }.flatMap { serverID, group in
            make(props.forDevice(serverId: serverID), group)
        }
    }

    /// One batch per Live Activity token of the run (`activities`), built from the props for its device's server id.
    private func perActivity(_ activities: [(Device, String)], _ props: WaitingProps, _ purpose: PushPurpose,
                             _ pause: PauseRecord, expiry: Int64,
                             _ make: (WaitingProps) -> PushMessage) -> [OutboxBatch] {
        activities.map { device, token in
            OutboxBatch(message: message(make(props.forDevice(serverId: device.serverID)), purpose, pause, expiry: expiry),
                        recipients: [(device, token)])
        }
    }

    private func message(_ message: PushMessage, _ purpose: PushPurpose, _ pause: PauseRecord,
                         expiry: Int64) -> OutboxMessage {
        let meta = message.metadata
        return OutboxMessage(stateID: pause.stateID, runID: pause.runID, purpose: purpose,
                             kind: meta.pushType, topic: meta.topic(topic),
                             priority: meta.priority, collapseID: meta.collapseID, expiresAt: expiry,
                             payload: message.json)
    }

    /// Sends stored pushes over the shared connections (`APNsClient.fanOut`, each push tried once here: the outbox
    /// owns retries) and settles each answer; one `apns.fanout` line sums it up.
    func send(_ items: [OutboxItem], receivedAt: Double, runID: String?, purpose: String) async {
        guard !items.isEmpty, let apns else { return }
        let started = SystemClock.monotonic()
        let relay = self.relay
        // Answers reach the relay in batches: those that came together (one actor hop per burst, at most
        // `Coordinator.settleBatch` a hop), not held back for more, so the relay can make them durable at once.
        let answered = Locked<[(OutboxItem, Delivery, Double)]>([])
        let handOver: @Sendable () async -> Void = {
            let batch = answered.withLock { answers in defer { answers.removeAll(keepingCapacity: true) }; return answers }
            if !batch.isEmpty { await relay.settled(batch) }
        }
        let delivered = await apns.fanOut(items.map { ($0.push, $0.device) }, retry: .noRetries,
                                          drained: handOver) { index, delivery in
            let full = answered.withLock { answers in
                answers.append((items[index], delivery, SystemClock.monotonic() - receivedAt))
                return answers.count >= Coordinator.settleBatch
            }
            if full { await handOver() }
        }
        await handOver()
        await relay.flushSettled()
        Log.info("apns.fanout", ["run": runID ?? "", "for": purpose, "pushes": String(items.count),
                                 "delivered": String(delivered), "ms": String(Int((SystemClock.monotonic() - started) * 1000))])
    }

    /// `POST /devices/{id}/test`: one plain alert to the device, answered with APNs' verdict.
    func test(_ device: Device) async -> APIResponse {
        guard let apns else {
            return APIError.unavailable("APNs is not configured: set APNS_KEY (or APNS_KEY_PATH), APNS_KEY_ID and APNS_TEAM_ID")
                .response
        }
        let payload: JSONValue = ["aps": ["alert": ["title": "prefect-push", "body": "Test notification: this phone will hear about paused runs."],
                                          "sound": "default"]]
        let push = Push(kind: .alert, deviceToken: device.token, environment: device.environment, topic: topic,
                        priority: 10, collapseID: nil, expiration: 0, payload: payload.encoded())
        let started = SystemClock.monotonic()
        let delivery = await apns.deliver(push, to: device)
        await relay.delivered(delivery, push: push, device: device, runID: nil, seconds: SystemClock.monotonic() - started)
        var body: [String: JSONValue] = ["sent": .bool(delivery.outcome.isDelivered),
                                         "environment": .string(delivery.environment.rawValue),
                                         "outcome": .string(delivery.outcome.label)]
        if delivery.outcome.status > 0 { body["status"] = .int(Int64(delivery.outcome.status)) }
        if case .rejected(let rejection) = delivery.outcome {
            if let reason = rejection.reason { body["reason"] = .string(reason.rawValue) }
            if let id = rejection.apnsID { body["apns_id"] = .string(id) }
        }
        if case .delivered(let id) = delivery.outcome, let id { body["apns_id"] = .string(id) }
        switch delivery.effect {
        case .dropDevice: body["dropped"] = true
        case .updateEnvironment(let env): body["environment_corrected"] = .string(env.rawValue)
        default: break
        }
        return APIResponse(status: 200, json: .object(body))
    }
}
