import RelayCore

/// A finished HTTP exchange with a peer: status, body (bounded) and `Retry-After` in seconds, if sent.
struct HTTPReply: Sendable {
    let status: Int
    let body: [UInt8]
    var retryAfter: Int? = nil
}

/// Why an HTTP call got no answer: the peer was unreachable, too slow, or answered too much.
struct HTTPFailure: Error, Sendable, CustomStringConvertible {
    /// What went wrong, as callers may decide on it (the words are for the log).
    enum Kind: Sendable, Equatable {
        /// No connection to the server could be opened (DNS, TCP, TLS, the proxy).
        case connectFailed
        /// Every connection stayed busy until the call's deadline.
        case noConnectionFree
        /// Sent, and not answered within the call's deadline.
        case timedOut
        /// No whole answer came on the connection (it ended, or the answer broke a bound), after the one resend
        /// the pool allows.
        case connectionLost
        /// The pool is stopping, or could not start its thread.
        case notAccepted
        /// The request itself could not be written (a line break or NUL in it).
        case invalidRequest
        /// Answered, but not with what the caller needed (a status, a body that isn't the expected JSON).
        case unexpectedAnswer
        /// Not asked at all: the caller chose not to (the socket already followed the run).
        case skipped
    }

    let kind: Kind
    let reason: String
    init(_ kind: Kind, _ reason: String) {
        self.kind = kind
        self.reason = reason
    }
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
