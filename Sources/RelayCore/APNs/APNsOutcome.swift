/// What one push to one host came to. Domain outcomes are values; only setup failures throw.
public enum APNsOutcome: Sendable, Equatable {
    /// 200: APNs accepted it.
    case delivered(apnsID: String?)
    /// APNs answered with an error status.
    case rejected(APNsRejection)
    /// Sent, and no answer within the deadline: it may have been delivered (`DeliveryTable` says who may go again).
    case timedOut
    /// APNs was never reached (DNS, connect, TLS): nothing was sent, so a retry is safe.
    case unreachable(String)
    /// The connection died after the request went out: delivery unknown (`DeliveryTable` says who may go again).
    case connectionLost(String)

    public var isDelivered: Bool {
        if case .delivered = self { return true }
        return false
    }

    /// The HTTP status for logs: the real one, or 0 when there was none.
    public var status: Int {
        switch self {
        case .delivered: return 200
        case .rejected(let rejection): return rejection.status
        case .timedOut, .unreachable, .connectionLost: return 0
        }
    }

    /// A short, bounded label for logs and metrics: the reason, or what went wrong on the wire.
    public var label: String {
        switch self {
        case .delivered: return "delivered"
        case .rejected(let rejection): return rejection.reason?.rawValue ?? "status\(rejection.status)"
        case .timedOut: return "timeout"
        case .unreachable: return "unreachable"
        case .connectionLost: return "connection_lost"
        }
    }

    /// Which of the delivery table's fates this is (Apple's table of reasons; `DeliveryTable` says what follows).
    public var fate: DeliveryFate {
        switch self {
        case .delivered:
            return .delivered
        case .rejected(let r):
            if r.status == 410 || r.reason?.meansTokenGone == true { return .tokenGone }
            if r.reason == .badDeviceToken { return .wrongHost }
            if r.status == 403, r.reason?.isProviderTokenError == true { return .providerTokenRefused }
            if r.status == 429 || r.status >= 500 || r.reason == .idleTimeout { return .throttled }
            return .refused
        case .unreachable: return .unreachable
        case .timedOut: return .deadlinePassedAfterSending
        case .connectionLost: return .connectionLostAfterSending
        }
    }
}

/// An APNs error answer: status, the body's `reason`, and for 410 the `timestamp` (ms since epoch).
public struct APNsRejection: Sendable, Equatable {
    public var status: Int
    public var reason: APNsReason?
    public var timestamp: Int64?
    public var apnsID: String?
    /// `Retry-After` in seconds, when a 429 or 503 said how long to wait.
    public var retryAfter: Int?

    public init(status: Int, reason: APNsReason?, timestamp: Int64? = nil, apnsID: String? = nil, retryAfter: Int? = nil) {
        self.status = status
        self.reason = reason
        self.timestamp = timestamp
        self.apnsID = apnsID
        self.retryAfter = retryAfter
    }
}

extension APNsOutcome {
    /// What a push retried within one send does after this answer.
    public enum NextStep: Sendable, Equatable {
        /// Sign a new provider token (APNs gave this reason) and send again.
        case renewToken(APNsReason)
        /// Send again after this many milliseconds.
        case retry(afterMs: Int)
        /// This answer is final.
        case finish
    }

    /// The retry rules of one send, read from `DeliveryTable` for `purpose`: a provider-token error re-signs and
    /// tries once more; a `retryLater` step waits per `backoff` (at least its `Retry-After`, within reason) and tries
    /// again. `retries` and `renewed` are the push's own counts, updated here. Pure; shared by single sends and
    /// fan-outs.
    public func nextStep(_ purpose: PushPurpose, retries: inout Int, renewed: inout Bool, backoff: Backoff,
                         random: Double) -> NextStep {
        switch DeliveryTable.step(purpose, fate) {
        case .renewProviderToken where !renewed:
            renewed = true
            guard case .rejected(let rejection) = self, let reason = rejection.reason else { return .finish }
            return .renewToken(reason)
        case .retryLater:
            retries += 1
            guard var delay = backoff.delay(retry: retries, random: random) else { return .finish }
            if case .rejected(let rejection) = self, let asked = rejection.retryAfter {
                // APNs said how long: waiting less only earns another 429; much longer is the outbox's business.
                guard Double(asked) <= backoff.maximum * 4 else { return .finish }
                delay = max(delay, Double(asked))
            }
            return .retry(afterMs: Int(delay * 1000))
        default:
            return .finish
        }
    }

    /// The attempt number (1 for the first try) after `retries` retries and a renewal or none.
    public static func attempt(retries: Int, renewed: Bool) -> Int { retries + (renewed ? 2 : 1) }
}
