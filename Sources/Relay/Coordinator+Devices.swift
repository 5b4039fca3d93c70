import RelayCore

/// What the notifier needs from the store, and the store effects of APNs' answers. One actor hop each.
extension Coordinator {
    /// Every registered device; nil when the store could not be read (the caller tries again later).
    func devices() -> [Device]? {
        do { return try store.allDevices() } catch {
            storeFailed(["action": "devices", "error": "\(error)"])
            return nil
        }
    }

    /// The run's activity tokens with their devices; nil when the store could not be read.
    func activities(runID: String) -> [(Device, String)]? {
        do {
            return try store.activityTokens(runID: runID).compactMap { entry in
                try store.device(id: entry.deviceID).map { ($0, entry.token) }
            }
        } catch {
            storeFailed(["action": "activities", "error": "\(error)"])
            return nil
        }
    }

    /// The props a pause was announced with, as stored (`nil` inside: none stored); nil when the store could not be
    /// read (the caller tries again later).
    func props(stateID: String) -> String?? {
        do { return .some(try store.props(stateID: stateID)) } catch {
            storeFailed(["action": "props", "error": "\(error)"])
            return nil
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

    /// What an announce's hop to the coordinator comes back with.
    struct ContextRead: Sendable {
        /// The run's custom events and artifacts seen live on the socket so far.
        var live: LiveEvents
        /// Whether a pause of its flow may wait for a late one.
        var mayWait: Bool
        /// When `live` was looked at (monotonic seconds): the announce looks again if its input rows came much later.
        var at: Double
    }

    /// Counts the push and applies what APNs' answer means for the registry.
    func delivered(_ delivery: Delivery, push: Push, device: Device, runID: String?, seconds: Double) {
        let status = delivery.outcome.status
        let reason: String = if case .rejected(let r) = delivery.outcome { r.reason?.rawValue ?? "" } else { "" }
        metrics.recordPush(kind: push.kind.rawValue, status: status > 0 ? String(status) : delivery.outcome.label,
                           reason: reason, seconds: delivery.outcome.isDelivered ? seconds : nil)
        do {
            switch delivery.effect {
            case .none: break
            case .dropDevice: try store.deleteDevice(id: device.id)
            case .dropStartToken: try store.dropStartToken(deviceID: device.id)
            case .updateEnvironment(let environment): try store.updateEnvironment(deviceID: device.id, to: environment)
            case .dropActivityToken:
                if let runID { try store.deleteActivity(deviceID: device.id, runID: runID) }
            }
        } catch {
            storeFailed(["action": "delivery_effect", "error": "\(error)"])
        }
    }
}
