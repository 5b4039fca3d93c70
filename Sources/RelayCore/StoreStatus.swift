/// What `prefect-push status` shows: the waiting pauses and, per device, what became of their pushes; the devices;
/// the outbox. Read from the store in one read transaction (`StatusCommand`); rendered here, as text or JSON.
///
/// The store keeps a push only until APNs answers it, so for a push no longer stored the status can say it was
/// answered (delivered, or dropped with APNs' reason in the `apns.not_sent` log line), not which.
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
    public var pauses: [Pause]
    public var devices: [Device]
    public var pending: [Pending]
    /// When the oldest push still in the outbox was stored, unix ms; nil when it is empty.
    public var oldestPendingMs: Int64?

    public init(schemaVersion: Int, pauses: [Pause], devices: [Device], pending: [Pending], oldestPendingMs: Int64?) {
        self.schemaVersion = schemaVersion
        self.pauses = pauses
        self.devices = devices
        self.pending = pending
        self.oldestPendingMs = oldestPendingMs
    }

    // MARK: - Per device

    /// What became of `pause`'s pushes to `device`.
    public enum Outcome: Sendable, Equatable {
        /// Never announced (recorded quietly: too old when first seen), so nothing was sent.
        case notAnnounced
        /// The device registered after the announce: nothing was sent to it.
        case registeredLater
        /// Pushes still waiting for APNs' answer.
        case pending([Pending])
        /// Nothing left in the outbox: APNs answered each push (delivered, or dropped with its reason).
        case answered

        public var label: String {
            switch self {
            case .notAnnounced: return "not_announced"
            case .registeredLater: return "registered_later"
            case .pending: return "pending"
            case .answered: return "answered"
            }
        }
    }

    public func outcome(of pause: PauseRecord, for device: Device) -> Outcome {
        let waiting = pending.filter { $0.stateID == pause.stateID && $0.deviceID == device.id }
        if !waiting.isEmpty { return .pending(waiting) }
        guard let announced = pause.announcedAt else { return .notAnnounced }
        return device.createdAt > announced ? .registeredLater : .answered
    }

    /// A device or activity token as logs show it: first 6 and last 3 characters.
    public static func short(_ token: String) -> String {
        token.count <= 10 ? token : String(token.prefix(6)) + "…" + String(token.suffix(3))
    }
}
