import RelayCore

/// Turns the watcher's announce / remind / end decisions into APNs pushes (DESIGN.md §5): gathers the context,
/// builds one `WaitingProps` per pause, and fans out to every device at once over the shared connections.
/// Runs off the relay actor; store effects of APNs' answers (dead tokens, wrong host) go back through it.
struct Notifier: Sendable {
    let relay: Relay
    let gatherer: ContextGatherer
    let apns: APNsClient?
    let uiRoot: String
    let topic: String
    let now: @Sendable () -> Double

    /// How long APNs may hold an undelivered push when the pause has no timeout (Suspended runs).
    static let defaultExpiry: Int64 = 24 * 3600

    func announce(_ pause: PauseRecord, _ origin: Watcher.Origin, receivedAt: Double) async {
        let (flowID, flowName, pausedAt): (String?, String?, Double) = switch origin {
        case .event(let event): (event.flowID, event.flowName, event.stateTimestamp)
        case .run(let run): (run.flowID, nil, run.stateTimestamp)
        }
        // The registry is read while Prefect is (it doesn't depend on the context), off the path to the first push.
        async let registered = relay.devices()
        guard let props = await buildProps(pause, flowID: flowID, flowName: flowName, pausedAt: pausedAt,
                                           announcing: true, receivedAt: receivedAt) else { return }
        guard let apns else {
            Log.info("apns.disabled", ["run": pause.runID, "note": "no APNs key; nothing sent"])
            return
        }
        let devices = await registered
        await relay.countAnnounced()
        let stamp = Int64(now())
        let expiry = props.timeoutAt ?? stamp + Notifier.defaultExpiry
        var items: [(push: Push, device: Device)] = []
        for (serverID, group) in Dictionary(grouping: devices, by: \.serverID) {
            let deviceProps = props.forDevice(serverId: serverID)
            let alert = Payloads.alert(deviceProps, stateID: pause.stateID)
            // Built only when some phone here can start a Live Activity.
            let start = group.contains { $0.startToken != nil } ? Payloads.liveActivityStart(deviceProps, now: stamp) : nil
            for device in group {
                items.append((push(alert, to: device.token, device, expiry: expiry), device))
                if let startToken = device.startToken, let start {
                    items.append((push(start, to: startToken, device, expiry: expiry), device))
                }
            }
        }
        await deliver(items, via: apns, receivedAt: receivedAt, runID: pause.runID, purpose: "announce")
    }

    func remind(_ pause: PauseRecord, minutesLeft: Int, receivedAt: Double) async {
        guard let props = await storedProps(pause) else { return }
        guard let apns else { return }
        let devices = await relay.devices()
        let expiry = props.timeoutAt ?? Int64(now()) + 300
        var items: [(push: Push, device: Device)] = []
        for (serverID, group) in Dictionary(grouping: devices, by: \.serverID) {
            let reminder = Payloads.reminder(props.forDevice(serverId: serverID), stateID: pause.stateID,
                                             minutesLeft: minutesLeft)
            for device in group { items.append((push(reminder, to: device.token, device, expiry: expiry), device)) }
        }
        await deliver(items, via: apns, receivedAt: receivedAt, runID: pause.runID, purpose: "remind")
    }

    /// Ends the run's Live Activity on every phone that registered one, then forgets those tokens.
    func end(_ pause: PauseRecord, receivedAt: Double) async {
        let activities = await relay.activities(runID: pause.runID)
        guard !activities.isEmpty else { return }
        guard let apns else {
            await relay.forgetActivities(runID: pause.runID)
            return
        }
        guard let props = await storedProps(pause) else { return }
        let stamp = Int64(now())
        let ended = pause.endedState ?? "Deleted"  // nil: the run is gone from the server
        var items: [(push: Push, device: Device)] = []
        for (device, token) in activities {
            let message = Payloads.liveActivityEnd(props.forDevice(serverId: device.serverID), endedState: ended, now: stamp)
            items.append((push(message, to: token, device, expiry: stamp + 3600), device))
        }
        await deliver(items, via: apns, receivedAt: receivedAt, runID: pause.runID, purpose: "end")
        await relay.forgetActivities(runID: pause.runID)
    }

    // MARK: - Props

    /// Reads the run's context and builds the pause's props once; stores them for the reminder and the end.
    /// When `announcing`, a run that has already moved past the pause gets nothing: it is history replayed by a
    /// reconnect, and the run read ends the pause in the watcher instead.
    private func buildProps(_ pause: PauseRecord, flowID: String?, flowName: String? = nil, pausedAt: Double? = nil,
                            announcing: Bool = false, receivedAt: Double = Clock.monotonic()) async -> WaitingProps? {
        guard var gathered = await gatherer.gather(runID: pause.runID, stateID: pause.stateID,
                                                   pausedAt: pausedAt ?? Double(pause.pausedAt), flowID: flowID,
                                                   flowName: flowName) else {
            Log.warn("pause.context_unavailable", ["run": pause.runID, "state": pause.stateID])
            return nil
        }
        if let run = FlowRun(details: gathered.context.run) { await relay.learned(run) }
        if announcing && gathered.movedOn {
            Log.info("pause.already_over", ["run": pause.runID, "state": pause.stateID,
                                            "now": gathered.context.run.state?.name ?? "?"])
            return nil
        }
        var text = await withLiveEvents(&gathered.context, runID: pause.runID)
        if announcing && text.contextSource == .none {
            // A custom event emitted just before the pause can reach the socket just after it (reference/prefect.md
            // §7.6; ~90 ms seen here). With nothing better to say, give it until `eventGrace` after the Paused event
            // arrived (the context reads usually use up most of that) before settling for the generic text.
            let deadline = receivedAt + Notifier.eventGrace
            while text.contextSource == .none && Clock.monotonic() < deadline {
                try? await Task.sleep(for: .milliseconds(25))
                text = await withLiveEvents(&gathered.context, runID: pause.runID)
            }
        }
        var run = gathered.context.run
        if run.state?.id != pause.stateID || run.state?.isPaused != true {
            // The run moved on (or lags) before we read it: describe the pause we were told about.
            run.state = RunState(id: pause.stateID, type: "PAUSED", name: pause.stateName,
                                 timestamp: Timestamp.format(Double(pause.pausedAt)),
                                 pauseTimeout: pause.timeoutAt.map { Timestamp.format(Double($0)) })
        }
        guard let props = WaitingProps(run: run, flowName: gathered.context.flowName, text: text, serverId: "",
                                       uiRoot: uiRoot) else { return nil }
        await relay.saveProps(stateID: pause.stateID, props: props.encoded())
        Log.info("pause.text", ["run": pause.runID, "title": String(props.title.prefix(60)), "category": props.category,
                                "context": text.contextSource.rawValue])
        return props
    }

    /// How long after its Paused event an announce with no context may wait for a late custom event.
    static let eventGrace = 0.15

    /// Adds the run's custom events seen live on the socket (not yet in `/events/filter`) and reads the text.
    private func withLiveEvents(_ context: inout PauseContext, runID: String) async -> AlertText {
        let stored = Set(context.events.compactMap(\.id))
        for event in await relay.liveEvents(runID: runID) where event.id == nil || !stored.contains(event.id!) {
            context.events.append(event)
        }
        return AlertText(context: context, readers: .live)
    }

    private func storedProps(_ pause: PauseRecord) async -> WaitingProps? {
        if let text = await relay.props(stateID: pause.stateID), let json = try? JSONParser.parse(text),
           let props = WaitingProps(json: json) {
            return props
        }
        return await buildProps(pause, flowID: nil)
    }

    // MARK: - Sending

    private func push(_ message: PushMessage, to token: String, _ device: Device, expiry: Int64) -> Push {
        let meta = message.metadata
        return Push(kind: meta.pushType == .alert ? .alert : .liveactivity, deviceToken: token,
                    environment: device.environment, topic: meta.topic(topic), priority: meta.priority,
                    collapseID: meta.collapseID, expiration: expiry, payload: message.json)
    }

    /// Sends every item over the shared connections (`APNsClient.fanOut`); one `apns.fanout` line sums it up
    /// (each push that fails is logged on its own as `apns.not_sent`).
    private func deliver(_ items: [(push: Push, device: Device)], via apns: APNsClient, receivedAt: Double,
                         runID: String?, purpose: String) async {
        guard !items.isEmpty else { return }
        let started = Clock.monotonic()
        let relay = self.relay
        let delivered = await apns.fanOut(items) { index, delivery in
            let (push, device) = items[index]
            await relay.delivered(delivery, push: push, device: device, runID: runID,
                                  seconds: Clock.monotonic() - receivedAt)
        }
        Log.info("apns.fanout", ["run": runID ?? "", "for": purpose, "pushes": String(items.count),
                                 "delivered": String(delivered), "ms": String(Int((Clock.monotonic() - started) * 1000))])
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
        let started = Clock.monotonic()
        let delivery = await apns.deliver(push, to: device)
        await relay.delivered(delivery, push: push, device: device, runID: nil, seconds: Clock.monotonic() - started)
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
