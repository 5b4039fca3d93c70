import RelayCore

/// What to send for a pause, as values: given the pause, the props it is announced with and a snapshot of its
/// recipients, the outbox batches to write. It reads nothing, sends nothing and holds no reference to its caller
/// (`PauseJobs`, which reads the context and the registry, writes the batches and sends them).
struct PushPlanner: Sendable {
    let uiRoot: String
    let topic: String

    /// How long APNs may hold an undelivered push when the pause has no timeout (Suspended runs).
    static let defaultExpiry: Int64 = 24 * 3600

    /// Every device's alert, and a Live Activity start for those that registered a start token.
    func announce(_ pause: PauseRecord, _ props: WaitingProps, to devices: [Device], now: Int64) -> [OutboxBatch] {
        let expiry = props.timeoutAt ?? now + PushPlanner.defaultExpiry
        return perServer(devices, props) { deviceProps, group in
            let registeredBy = group.map(\.createdAt).max() ?? now
            var batches = [OutboxBatch(
                message: message(Payloads.alert(deviceProps, stateID: pause.stateID), .alert, pause, expiry: expiry),
                recipients: group.map { ($0, $0.token) },
                audience: FanOutAudience(token: .device, serverID: deviceProps.serverId, registeredBy: registeredBy))]
            let starters = group.compactMap { device in device.startToken.map { (device, $0) } }
            if !starters.isEmpty {
                let start = Payloads.liveActivityStart(deviceProps, stateID: pause.stateID, now: now)
                batches.append(OutboxBatch(
                    message: message(start, .start, pause, expiry: expiry), recipients: starters,
                    audience: FanOutAudience(token: .pushToStart, serverID: deviceProps.serverId,
                                             registeredBy: registeredBy)))
            }
            return batches
        }
    }

    /// Every device's reminder that the pause times out in `minutesLeft`.
    func remind(_ pause: PauseRecord, _ props: WaitingProps, minutesLeft: Int, to devices: [Device],
                now: Int64) -> [OutboxBatch] {
        let expiry = props.timeoutAt ?? now + 300
        return perServer(devices, props) { deviceProps, group in
            let reminder = Payloads.reminder(deviceProps, stateID: pause.stateID, minutesLeft: minutesLeft)
            return [OutboxBatch(message: message(reminder, .reminder, pause, expiry: expiry),
                                recipients: group.map { ($0, $0.token) },
                                audience: FanOutAudience(token: .device, serverID: deviceProps.serverId,
                                                         registeredBy: group.map(\.createdAt).max() ?? now))]
        }
    }

    /// The end of the run's Live Activity on each phone that registered one (`activities`).
    func end(_ pause: PauseRecord, _ props: WaitingProps, activities: [(Device, String)], now: Int64) -> [OutboxBatch] {
        let ended = pause.endedState ?? "Deleted"  // nil: the run is gone from the server
        return perActivity(activities, props, .end, pause, expiry: now + 3600) { deviceProps in
            Payloads.liveActivityEnd(deviceProps, endedState: ended, now: now)
        }
    }

    /// A silent update of the run's Live Activities with props built again (`PauseJob.Kind.refresh`).
    func update(_ pause: PauseRecord, _ props: WaitingProps, activities: [(Device, String)], now: Int64) -> [OutboxBatch] {
        let expiry = props.timeoutAt ?? now + PushPlanner.defaultExpiry
        return perActivity(activities, props, .update, pause, expiry: expiry) { deviceProps in
            Payloads.liveActivityUpdate(deviceProps, now: now)
        }
    }

    /// `POST /devices/{id}/test`: one plain alert to the device.
    func testPush(to device: Device) -> Push {
        let payload: JSONValue = ["aps": ["alert": ["title": "prefect-push", "body": "Test notification: this phone will hear about paused runs."],
                                          "sound": "default"]]
        return Push(kind: .alert, deviceToken: device.token, environment: device.environment, topic: topic,
                    priority: 10, collapseID: nil, expiration: 0, payload: payload.encoded())
    }

    // MARK: - Batches

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
}
