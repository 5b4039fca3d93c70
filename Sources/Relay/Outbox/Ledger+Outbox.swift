import RelayCore

/// The outbox's transactions: a job's pushes written with what they guard, and what APNs' answers mean for the
/// registry. `OutboxSender` keeps the bookkeeping around them (what is being sent, when the next push is due).
extension Ledger {
    /// What a job writes beside its pushes, in their transaction.
    struct Alongside: Sendable {
        /// The announce's props (or a refresh's, `replacing` the announced ones); when the pause is already
        /// announced (or a refresh's props are the same), nothing is queued.
        var props: (stateID: String, json: String, replacing: Bool)?
        /// The end's Live Activity tokens, forgotten with its pushes queued.
        var forgetActivitiesOf: String?
        /// The pause's one reminder, claimed; when it was already claimed or the pause ended, nothing is queued.
        var reminded: (stateID: String, at: Int64)?
    }

    enum Enqueued: Sendable, Equatable {
        /// Written: the pushes to send now.
        case queued([OutboxItem])
        /// The transaction found nothing owed (see `Alongside`) and was rolled back.
        case nothingOwed
        /// The store refused, or holds no record of the announce's pause: nothing was queued, try the job again.
        case refused
    }

    /// Writes `batches` and what goes `alongside` them in one transaction.
    func enqueue(_ batches: [OutboxBatch], alongside: Alongside, dueMs: Int64) -> Enqueued {
        do {
            let items = try store.enqueue(batches, dueMs: dueMs) {
                if let props = alongside.props, props.replacing {
                    if try !store.replaceProps(stateID: props.stateID, props: props.json) { throw NothingOwed() }
                } else if let props = alongside.props {
                    switch try store.setProps(stateID: props.stateID, props: props.json) {
                    case .written: break
                    case .alreadyAnnounced: throw NothingOwed()
                    case .unrecorded: throw PauseUnrecorded()
                    }
                }
                if let runID = alongside.forgetActivitiesOf { try store.deleteActivities(runID: runID) }
                if let reminded = alongside.reminded, try !store.markReminded(stateID: reminded.stateID, at: reminded.at) {
                    throw NothingOwed()
                }
            }
            // Rows written, not an empty commit.
            if !items.isEmpty || alongside.props != nil || alongside.reminded != nil { succeeded() }
            return .queued(items)
        } catch is NothingOwed {
            return .nothingOwed
        } catch is PauseUnrecorded {
            // The announce started before its pause's record was written, and that write failed: the watcher
            // forgot the pause and the run is read again, so the job's retry is dropped unless it is recorded by then.
            Log.warn("pause.unrecorded", ["state": alongside.props?.stateID ?? "", "note": "announce held until the pause is stored"])
            return .refused
        } catch {
            failed(["action": "enqueue", "error": "\(error)"])
            return .refused
        }
    }

    private struct NothingOwed: Error {}
    private struct PauseUnrecorded: Error {}

    /// Every registered device; nil when the store could not be read (the caller tries again later).
    func devices() -> [Device]? { attempt("devices") { try $0.allDevices() } }

    /// The run's activity tokens with their devices; nil when the store could not be read.
    func activities(runID: String) -> [(Device, String)]? {
        attempt("activities") { store in
            try store.activityTokens(runID: runID).compactMap { entry in
                try store.device(id: entry.deviceID).map { ($0, entry.token) }
            }
        }
    }

    /// The props a pause was announced with, as stored (`nil` inside: none stored); nil when the store could not be
    /// read (the caller tries again later).
    func props(stateID: String) -> String?? {
        attempt("props") { store -> String? in try store.props(stateID: stateID) }
    }

    /// Applies what APNs' answer means for the registry.
    func apply(_ effect: DeliveryEffect, device: Device, runID: String?) {
        _ = attempt("delivery_effect") { store in
            switch effect {
            case .none: break
            case .dropDevice:
                if try store.deleteDevice(id: device.id) { countDevices { $0.devicesDroppedByAPNs += 1 } }
            case .dropStartToken: try store.dropStartToken(deviceID: device.id)
            case .updateEnvironment(let environment): try store.updateEnvironment(deviceID: device.id, to: environment)
            case .dropActivityToken:
                if let runID { try store.deleteActivity(deviceID: device.id, runID: runID) }
            }
        }
    }
}
