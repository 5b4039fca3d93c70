import RelayCore

/// A finished HTTP exchange with a peer: status, body (bounded) and `Retry-After` in seconds, if sent.
struct HTTPReply: Sendable {
    let status: Int
    let body: [UInt8]
    var retryAfter: Int? = nil
}

/// Why an HTTP call got no answer: the peer was unreachable, too slow, or answered too much.
struct HTTPFailure: Error, Sendable, CustomStringConvertible {
    let reason: String
    var description: String { reason }
}

/// One outgoing HTTP/1.1 request, as the pool needs it.
struct HTTPCall: Sendable {
    var method: String
    var url: HTTPURL
    var path: String
    var headers: [(String, String)]
    var body: [UInt8]?
    /// The caller's deadline: past it the caller gets a failure (the request itself may stay open, `HTTPPool`).
    var timeoutSeconds: Int32 = 10
    /// What the read is about (a run id): the pool keeps at most `Options.maxInFlightPerGroup` of a group's
    /// requests open at once, so one run that Prefect is slow to answer can't take every connection.
    var group: String? = nil
}
