/// The Prefect REST pool's decisions as a value, in the shape of AsyncHTTPClient's `HTTPConnectionPool.StateMachine`:
/// every happening the pool's loop sees is a `mutating func` (a call arrives, a connection opened or failed to, an
/// answer was read, a request failed, a turn of the loop at a time), and every effect comes back as an `Action` for
/// the loop to carry out (open, send, close, answer or fail a caller, count, log). It owns each origin's connections
/// (connecting, idle, leased) and the waiting calls by id; the loop keeps the sockets and the callers in
/// dictionaries keyed by those ids. Time comes in as monotonic ms. The numbers it asks are `HTTPPoolPolicy`'s.
///
/// What it decides: which call goes on which idle connection (the most recently used, so spare ones age out; a
/// retried call only on one that has answered nothing yet), when a call repeats a request whose caller gave up and
/// waits for that copy's answer instead, when to open and close connections, when a caller's deadline has passed
/// (a waiting call fails; a sent request stays open, abandoned, until answered or held `abandonedHoldMs`), when a
/// request that failed on a reused connection is sent once more, stalled requests and their warning, and how long
/// the loop may sleep.
///
/// There is no closing state: a close is carried out by the loop before it feeds the next event, so a connection
/// the machine closed is gone at once. An event for a connection in a state that cannot have it (an answer on an
/// idle one) is a bug in the loop and stops the process, as AsyncHTTPClient's machine does.
public struct HTTPPoolStateMachine: Sendable {
    /// A caller's call, numbered by the loop.
    public struct CallID: Hashable, Sendable, CustomStringConvertible {
        public let value: Int
        public init(_ value: Int) { self.value = value }
        public var description: String { "call \(value)" }
    }

    /// A connection, numbered by the machine when it asks for one to be opened.
    public struct ConnectionID: Hashable, Sendable, CustomStringConvertible {
        public let value: Int
        public init(_ value: Int) { self.value = value }
        public var description: String { String(value) }
    }

    /// Where connections go (scheme, host, port), numbered by the loop: each origin is a pool of its own.
    public struct OriginID: Hashable, Sendable {
        public let value: Int
        public init(_ value: Int) { self.value = value }
    }

    /// A call as the machine knows it: where it goes, its group (`HTTPCall.group`), its request bytes (a repeat of
    /// an abandoned request is found by them) and its caller's deadline.
    public struct Call: Sendable {
        public let id: CallID
        public let origin: OriginID
        public let group: String?
        public let request: [UInt8]
        public let deadline: Int64
        /// Sent once already on a reused connection that failed before answering: it goes on a fresh one now.
        var retried = false

        public init(id: CallID, origin: OriginID, group: String?, request: [UInt8], deadline: Int64) {
            self.id = id
            self.origin = origin
            self.group = group
            self.request = request
            self.deadline = deadline
        }
    }

    /// Why a caller is failed; the loop words it.
    public enum Failure: Equatable, Sendable {
        /// Waited past its deadline with no connection free.
        case noConnectionFree
        /// Sent, and unanswered at its deadline (its request may stay open).
        case timedOut
        /// The connection opened for it failed to open (the loop's error text).
        case connectFailed(String)
        /// The connection opened for it took longer than `connectTimeoutMs`.
        case connectTimedOut
        /// No whole answer came on its connection, after the one resend allowed.
        case connectionLost(String)
        case shuttingDown
    }

    /// Why a connection is closed, for the log.
    public enum CloseReason: Equatable, Sendable {
        /// Idle too long (the policy's words).
        case idle(String)
        /// Its abandoned request went unanswered `abandonedHoldMs`.
        case holdOver
        /// An idle, reused connection makes room for a fresh one that a retried call needs.
        case makingRoom
        /// At the hard cap, an abandoned request nobody waits for gives its connection to waiting calls.
        case makingRoomForWaiting
        /// The answer said the connection is not kept alive.
        case notKeptAlive
        /// The connection failed or the server closed it (the loop's words).
        case failed(String)
        case shuttingDown
    }

    /// The `prefect.reads_stalled` line: the oldest stalled request's connection and age, and the counts.
    public struct StallReport: Equatable, Sendable {
        public var oldest: ConnectionID
        public var origin: OriginID
        public var oldestMs: Int64
        public var stalled: Int
        /// Requests that stalled since the last line.
        public var newlyStalled: Int
        public var inFlight: Int
        public var waiting: Int
    }

    public enum Action: Equatable, Sendable {
        /// Open a connection to the origin; its outcome comes back as `connected` or `connectFailed`.
        case connect(ConnectionID, OriginID)
        /// Stop opening it: past `connectTimeoutMs` (a late result for it is dropped).
        case abortConnect(ConnectionID)
        /// Write the call's request on the idle connection; a write that fails comes back as `requestFailed`.
        case send(CallID, on: ConnectionID)
        case close(ConnectionID, CloseReason)
        /// Hand the call the answer `answered` reported.
        case succeed(CallID)
        case fail(CallID, Failure)
        /// Fail the caller with a timeout (`Failure.timedOut`), count it: its request stays open on the connection.
        case abandon(CallID, on: ConnectionID)
        /// For the log: the call repeats the abandoned request open on the connection and waits for its answer.
        case join(CallID, on: ConnectionID)
        /// For the log: the call failed before any byte on a reused connection and goes again on a fresh one.
        case retry(CallID, reason: String)
        /// Count requests that just went `stallMs` unanswered.
        case countStalled(Int)
        case warnStalled(StallReport)
    }

    /// A request open on a connection: its call (whose caller may have given up), when it was sent, and the
    /// repeats waiting for its answer.
    struct OpenRequest: Sendable {
        var call: Call
        var sentAt: Int64
        /// Its caller was answered already (a timeout); the request stays open at the server.
        var abandoned = false
        /// Counted as stalled (once per request sent).
        var stalled = false
        var joined: [Call] = []
    }

    enum State: Sendable {
        case connecting(deadline: Int64)
        case idle(since: Int64)
        case leased(OpenRequest)
    }

    struct Connection: Sendable {
        let id: ConnectionID
        let origin: OriginID
        /// Answers read on it; a request on one with `served > 0` is on a reused connection.
        var served = 0
        var state: State
    }

    public let policy: HTTPPoolPolicy
    public let connectTimeoutMs: Int
    /// Calls with no connection yet, oldest first (a retried call and the repeats of a closed copy go first).
    var waiting: [Call] = []
    /// Every origin's connections, in the order they were asked for.
    var connections: [Connection] = []
    var lastConnectionID = 0
    var lastStallWarning: Int64?
    var stalledSinceWarning = 0
    /// An event since the last turn may have made work for one (a call to place, a connection freed or gone): the
    /// loop must not sleep before it takes that turn.
    var turnDue = false
    /// Requests open at the server (abandoned ones included), as of the last turn.
    public internal(set) var inFlight = 0

    public init(policy: HTTPPoolPolicy = HTTPPoolPolicy(), connectTimeoutMs: Int = 5_000) {
        self.policy = policy
        self.connectTimeoutMs = connectTimeoutMs
    }

    /// Calls the machine holds that have no connection yet.
    public var waitingCount: Int { waiting.count }

    /// Connections open or being opened, to every origin.
    public var connectionCount: Int { connections.count }
}
