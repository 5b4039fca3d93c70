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

    /// This message's push to `token` of `device` as outbox item `id` of message `messageID`, not yet tried.
    public func item(id: Int64, _ messageID: Int64, to token: String, of device: Device) -> OutboxItem {
        OutboxItem(id: id, messageID: messageID, purpose: purpose, stateID: stateID, runID: runID,
                   push: push(to: token, of: device), device: device, attempts: 0)
    }
}

/// A message and who gets it: the unit the store writes in one transaction.
public struct OutboxBatch: Sendable {
    public var message: OutboxMessage
    public var recipients: [(device: Device, token: String)]
    /// Set for a fan-out to the registry (an announce, a reminder): the rule that picks `recipients` out of it, which
    /// the store keeps instead of a row per recipient (`FanOutAudience`). nil: one row per recipient.
    public var audience: FanOutAudience?

    public init(message: OutboxMessage, recipients: [(device: Device, token: String)], audience: FanOutAudience? = nil) {
        self.message = message
        self.recipients = recipients
        self.audience = audience
    }
}

/// Who a fan-out to the registry is for, as a rule rather than a list: every device of one server id (with a
/// push-to-start token, for a start) first registered by a given second. The store writes this with the message, one
/// row whatever the number of devices, so the first push leaves as soon as it commits; answers are written as they
/// come, and after a kill the devices of the rule with no answer written are sent to (`Store.reopenFanOuts`). A
/// device deleted meanwhile is no longer in the registry, so it is not sent to.
public struct FanOutAudience: Sendable, Equatable {
    public enum Token: String, Sendable {
        /// The device token (alerts, reminders).
        case device = "token"
        /// The push-to-start token (Live Activity starts); devices without one are not in the audience.
        case pushToStart = "start_token"
    }

    public var token: Token
    public var serverID: String
    /// Devices whose `created_at` is at most this (unix seconds): the registry as it stood when the fan-out was
    /// decided (the newest recipient's registration).
    public var registeredBy: Int64

    public init(token: Token, serverID: String, registeredBy: Int64) {
        self.token = token
        self.serverID = serverID
        self.registeredBy = registeredBy
    }
}

/// What to write for one answered push: its row (`id`), or for a fan-out member with no row, its message, device
/// and token (`id` 0).
public struct OutboxSettlement: Sendable, Equatable {
    public var id: Int64
    public var messageID: Int64
    public var deviceID: String
    public var token: String
    public var verdict: OutboxVerdict

    public init(id: Int64, messageID: Int64 = 0, deviceID: String = "", token: String = "", verdict: OutboxVerdict) {
        self.id = id
        self.messageID = messageID
        self.deviceID = deviceID
        self.token = token
        self.verdict = verdict
    }

    /// A member of a fan-out written as its audience, not yet a row of its own.
    public var isFanOutMember: Bool { id == 0 }
}

/// One stored push, ready to send: its row id (0 for a member of a fan-out stored as its audience), its message,
/// the push itself, the device it is for and how often it was tried.
public struct OutboxItem: Sendable, Equatable {
    public var id: Int64
    public var messageID: Int64
    public var purpose: PushPurpose
    public var stateID: String
    public var runID: String
    public var push: Push
    public var device: Device
    public var attempts: Int

    public init(id: Int64, messageID: Int64 = 0, purpose: PushPurpose, stateID: String, runID: String, push: Push,
                device: Device, attempts: Int) {
        self.id = id
        self.messageID = messageID
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

extension OutboxItem {
    /// What to write once APNs has answered it.
    public func settlement(_ verdict: OutboxVerdict) -> OutboxSettlement {
        OutboxSettlement(id: id, messageID: messageID, deviceID: device.id, token: push.deviceToken, verdict: verdict)
    }
}
