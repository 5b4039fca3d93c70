/// What one request to one host came to at the HTTP/2 level, before classification.
public enum APNsExchange: Sendable, Equatable {
    /// `retryAfter`: the `Retry-After` header in seconds (429 and 503 may carry it).
    case response(status: Int, apnsID: String?, body: [UInt8], retryAfter: Int? = nil)
    /// Never left this process (no connection, or closed first): a retry cannot double-send.
    case notSent(NotSent)
    /// Went out, but the connection died before an answer: it may have been delivered.
    case lost(String)
    /// No answer before the deadline.
    case timedOut
}

extension APNsOutcome {
    /// Classifies an exchange: a 200 is delivered; any other status is a rejection with the body's `reason` and
    /// `timestamp` (a body that isn't JSON leaves both out); no answer is unreachable, lost or timed out. Pure, so
    /// the fuzz harness runs this very function on arbitrary statuses and bodies.
    public init(_ exchange: APNsExchange) {
        switch exchange {
        case .response(200, let apnsID, _, _):
            self = .delivered(apnsID: apnsID)
        case .response(let status, let apnsID, let body, let retryAfter):
            let json = try? JSONParser.parse(body)
            let reason = json?["reason"]?.string.map(APNsReason.init(rawValue:))
            self = .rejected(APNsRejection(status: status, reason: reason, timestamp: json?["timestamp"]?.int,
                                           apnsID: apnsID, retryAfter: retryAfter))
        case .notSent(let why): self = .unreachable(why.description)
        case .lost(let why): self = .connectionLost(why)
        case .timedOut: self = .timedOut
        }
    }
}

/// Why a push never left this process.
public enum NotSent: Sendable, Equatable, CustomStringConvertible {
    /// No connection to the host could be opened; the words are the connect error's.
    case connectFailed(String)
    /// The client, or the connection it was queued on, closed first.
    case closed
    /// Its deadline passed while it waited for a stream (a silent or slow connection): it never went out.
    case expiredWaiting

    public var description: String {
        switch self {
        case .connectFailed(let error): error
        case .closed: "APNs connection closed"
        case .expiredWaiting: "no answer expected: the deadline passed before the request went out"
        }
    }
}
