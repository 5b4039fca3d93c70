/// The durable outbox (`docs/architecture.md`): every push the relay decides to send is written to SQLite before it
/// is sent and stays there until APNs has answered for it, so a restart, a lost connection or a 429/5xx never
/// forgets it. These are its values; the store keeps them, the relay sends and settles them.

/// Why a push is sent; one of each per pause and token at most.
public enum PushPurpose: String, Sendable, Equatable, CaseIterable {
    /// The pause's alert, to the device token.
    case alert
    /// The Live Activity start, to the push-to-start token.
    case start
    /// The one reminder before the pause times out.
    case reminder
    /// The Live Activity end, to the activity's update token.
    case end
    /// The Live Activity's new content when a late context event changed the pause's text, to the activity's
    /// update token; silent.
    case update
    /// `POST /devices/{id}/test` and `check`'s probe: sent outside the outbox, its answer reported to the caller.
    case test
}

/// One body for many tokens: what a fan-out writes once, whatever the number of devices.
public struct OutboxMessage: Sendable, Equatable {
    public var stateID: String
    public var runID: String
    public var purpose: PushPurpose
    public var kind: Push.Kind
    public var topic: String
    public var priority: Int
    public var collapseID: String?
    /// Unix seconds (`apns-expiration`): after this the push is dropped unsent.
    public var expiresAt: Int64
    public var payload: String

    public init(stateID: String, runID: String, purpose: PushPurpose, kind: Push.Kind, topic: String, priority: Int,
                collapseID: String?, expiresAt: Int64, payload: String) {
        self.stateID = stateID
        self.runID = runID
        self.purpose = purpose
        self.kind = kind
        self.topic = topic
        self.priority = priority
        self.collapseID = collapseID
        self.expiresAt = expiresAt
        self.payload = payload
    }

    /// The push to `token` of `device`, on the device's stored host.
    public func push(to token: String, of device: Device) -> Push {
        Push(kind: kind, deviceToken: token, environment: device.environment, topic: topic, priority: priority,
             collapseID: collapseID, expiration: expiresAt, payload: payload, purpose: purpose)
    }
}

/// A message and who gets it: the unit the store writes in one transaction.
public struct OutboxBatch: Sendable {
    public var message: OutboxMessage
    public var recipients: [(device: Device, token: String)]

    public init(message: OutboxMessage, recipients: [(device: Device, token: String)]) {
        self.message = message
        self.recipients = recipients
    }
}

/// One stored push, ready to send: its row id, the push itself, the device it is for and how often it was tried.
public struct OutboxItem: Sendable, Equatable {
    public var id: Int64
    public var purpose: PushPurpose
    public var stateID: String
    public var runID: String
    public var push: Push
    public var device: Device
    public var attempts: Int

    public init(id: Int64, purpose: PushPurpose, stateID: String, runID: String, push: Push, device: Device,
                attempts: Int) {
        self.id = id
        self.purpose = purpose
        self.stateID = stateID
        self.runID = runID
        self.push = push
        self.device = device
        self.attempts = attempts
    }
}

/// What becomes of a stored push once APNs (or the lack of it) has answered.
public enum OutboxVerdict: Sendable, Equatable {
    /// Done with it: delivered, refused for good (the device rules apply), or no longer worth sending.
    case settled
    /// Keep it and try again at this unix time.
    case retry(at: Double)
}

extension OutboxVerdict {
    /// When a stored push is tried again: its purpose's row of `DeliveryTable`. Pure; the caller supplies the clock
    /// and the random draw.
    ///
    /// A `retryLater` step (429, 5xx, APNs unreachable; and for purposes that may repeat, an answer that never came
    /// after the request went out) is tried again after `max(Retry-After, backoff.delay(failures: n))` for the n-th
    /// attempt that failed, until the push's expiry: at-least-once, with `apns-collapse-id` folding the rare
    /// duplicate alert on the phone. Every other step settles the row here (delivered, a dead token or a host
    /// change the caller applies, a bad request, a Live Activity start whose fate is unknown).
    public static func after(_ outcome: APNsOutcome, purpose: PushPurpose, attempts: Int, expiresAt: Int64, now: Double,
                             random: Double, backoff: Backoff = .outbox) -> OutboxVerdict {
        guard DeliveryTable.step(purpose, outcome.fate) == .retryLater else { return .settled }
        let asked: Double = if case .rejected(let rejection) = outcome { Double(rejection.retryAfter ?? 0) } else { 0 }
        let at = now + max(asked, backoff.delay(failures: attempts, random: random))
        return at < Double(expiresAt) ? .retry(at: at) : .settled
    }
}
