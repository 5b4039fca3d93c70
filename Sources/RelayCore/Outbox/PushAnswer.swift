/// What APNs last answered for one stored push, kept after its outbox row is gone (`Store.settle`), so
/// `prefect-push status` can say what became of a pause's pushes to a device: delivered and when, dropped and why,
/// or still retried after what. One per pause, device and purpose; the newest answer wins. Kept while the pause
/// waits and for a while after it ends (`AnswerRetention`).
public struct PushAnswer: Sendable, Equatable {
    public var stateID: String
    public var deviceID: String
    /// `PushPurpose.rawValue`.
    public var purpose: String
    /// The HTTP status, or 0 when there was none (timed out, unreachable, connection lost, expired unsent).
    public var status: Int
    /// `delivered`, APNs' reason, or what went wrong on the wire (`APNsOutcome.label`); `expired` for a push
    /// dropped unsent at its expiry.
    public var reason: String
    /// When it was answered, unix ms on the wall clock (shown to people).
    public var answeredMs: Int64

    public init(stateID: String, deviceID: String, purpose: String, status: Int, reason: String, answeredMs: Int64) {
        self.stateID = stateID
        self.deviceID = deviceID
        self.purpose = purpose
        self.status = status
        self.reason = reason
        self.answeredMs = answeredMs
    }

    public var isDelivered: Bool { status == 200 }

    /// `answeredMs` in unix seconds.
    public var seconds: Double { Double(answeredMs) / 1000 }

    /// The reason given to a push dropped unsent at its expiry.
    public static let expired = "expired"
}
