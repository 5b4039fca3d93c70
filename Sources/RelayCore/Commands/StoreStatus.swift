/// What `prefect-push status` shows: the waiting pauses and, per device, what became of their pushes; the devices;
/// the outbox. Read from the store in one read transaction (`StatusCommand`); rendered here, as text or JSON.
///
/// A push is in the outbox until APNs has answered it for good; its last answer is kept (`PushAnswer`) while its
/// pause waits and a day after it ends (`AnswerRetention`), so the status says delivered when, dropped why, or pending
/// after what. Filtered (`StatusQuery`), it shows the ended pauses of that run or device too.
public struct StoreStatus: Sendable, Equatable {
    public struct Pause: Sendable, Equatable {
        public var record: PauseRecord
        /// From the props the announce stored (empty when it has none yet).
        public var flowName: String
        public var runName: String

        public init(record: PauseRecord, flowName: String = "", runName: String = "") {
            self.record = record
            self.flowName = flowName
            self.runName = runName
        }
    }

    /// A push still in the outbox: not yet answered by APNs.
    public struct Pending: Sendable, Equatable {
        public var stateID: String
        public var deviceID: String
        /// `alert`, `start`, `reminder`, `update`, `end`.
        public var purpose: String
        public var attempts: Int
        /// When it is (next) tried, unix ms.
        public var dueMs: Int64

        public init(stateID: String, deviceID: String, purpose: String, attempts: Int, dueMs: Int64) {
            self.stateID = stateID
            self.deviceID = deviceID
            self.purpose = purpose
            self.attempts = attempts
            self.dueMs = dueMs
        }
    }

    public var schemaVersion: Int
    /// What was asked for: unfiltered, the waiting pauses and every device; filtered, the run's or the device's
    /// pauses, waiting and ended, and that device only.
    public var query: StatusQuery
    public var pauses: [Pause]
    public var devices: [Device]
    public var pending: [Pending]
    /// APNs' last answers kept for the pushes of `pauses`.
    public var answers: [PushAnswer]
    /// Per device id, from every answer the store keeps (waiting pauses', and ended ones' for a day).
    public var history: [String: DeviceHistory]
    /// When the oldest push still in the outbox was stored, unix ms; nil when it is empty.
    public var oldestPendingMs: Int64?

    public init(schemaVersion: Int, query: StatusQuery = StatusQuery(), pauses: [Pause], devices: [Device],
                pending: [Pending], answers: [PushAnswer] = [], history: [String: DeviceHistory] = [:],
                oldestPendingMs: Int64?) {
        self.schemaVersion = schemaVersion
        self.query = query
        self.pauses = pauses
        self.devices = devices
        self.pending = pending
        self.answers = answers
        self.history = history
        self.oldestPendingMs = oldestPendingMs
    }

    /// What APNs last said about one device, across the pushes the store keeps answers for.
    public struct DeviceHistory: Sendable, Equatable {
        /// When APNs last accepted a push to it, unix ms.
        public var lastDeliveryMs: Int64?
        /// APNs' latest answer that was not a delivery.
        public var lastRefusal: PushAnswer?

        public init(lastDeliveryMs: Int64? = nil, lastRefusal: PushAnswer? = nil) {
            self.lastDeliveryMs = lastDeliveryMs
            self.lastRefusal = lastRefusal
        }
    }

    // MARK: - Per device

    /// What became of one push of a pause to a device.
    public enum Fate: Sendable, Equatable {
        /// Still in the outbox; `last` is APNs' answer to the previous attempt, if there was one.
        case pending(Pending, last: PushAnswer?)
        /// APNs accepted it.
        case delivered(PushAnswer)
        /// Given up on: APNs refused it, its answer never came, or it expired unsent.
        case dropped(PushAnswer)

        public var purpose: String {
            switch self {
            case .pending(let push, _): return push.purpose
            case .delivered(let answer), .dropped(let answer): return answer.purpose
            }
        }

        public var label: String {
            switch self {
            case .pending: return "pending"
            case .delivered: return "delivered"
            case .dropped: return "dropped"
            }
        }
    }

    /// What became of `pause`'s pushes to `device`.
    public enum Outcome: Sendable, Equatable {
        /// Never announced (recorded quietly: too old when first seen), so nothing was sent.
        case notAnnounced
        /// The device registered after the announce: nothing was sent to it.
        case registeredLater
        /// Each push: pending, delivered or dropped, in purpose order (alert, start, reminder, update, end).
        case pushes([Fate])
        /// Announced, nothing pending and no answer kept: answered by a version that kept no answers.
        case answered
        /// An ended pause with no answer kept for the device: the row cap took them, or the pause ended before this
        /// version kept answers past the end.
        case noneKept

        /// The worst of it: pending, else dropped, else delivered.
        public var label: String {
            switch self {
            case .notAnnounced: return "not_announced"
            case .registeredLater: return "registered_later"
            case .answered: return "answered"
            case .noneKept: return "none_kept"
            case .pushes(let fates):
                for label in ["pending", "dropped"] where fates.contains(where: { $0.label == label }) { return label }
                return "delivered"
            }
        }
    }

    public func outcome(of pause: PauseRecord, for device: Device) -> Outcome {
        let kept = answers.filter { $0.stateID == pause.stateID && $0.deviceID == device.id }
        var fates: [Fate] = pending.filter { $0.stateID == pause.stateID && $0.deviceID == device.id }.map { push in
            .pending(push, last: kept.first { $0.purpose == push.purpose })
        }
        for answer in kept where !fates.contains(where: { $0.purpose == answer.purpose }) {
            fates.append(answer.isDelivered ? .delivered(answer) : .dropped(answer))
        }
        if !fates.isEmpty { return .pushes(fates.sorted { Self.rank($0.purpose) < Self.rank($1.purpose) }) }
        guard let announced = pause.announcedAt else { return .notAnnounced }
        if device.createdAt > announced { return .registeredLater }
        return pause.endedAt == nil ? .answered : .noneKept
    }

    private static func rank(_ purpose: String) -> Int {
        PushPurpose.allCases.firstIndex { $0.rawValue == purpose } ?? PushPurpose.allCases.count
    }

    /// When APNs last accepted a push to `device`, unix ms; nil when no kept answer says so.
    public func lastDelivery(to device: Device) -> Int64? { history[device.id]?.lastDeliveryMs }

    /// APNs' latest answer to `device` that was not a delivery, if one is kept.
    public func lastRefusal(of device: Device) -> PushAnswer? { history[device.id]?.lastRefusal }

    /// A device or activity token as logs show it: first 6 and last 3 characters.
    public static func short(_ token: String) -> String {
        token.count <= 10 ? token : String(token.prefix(6)) + "…" + String(token.suffix(3))
    }
}
