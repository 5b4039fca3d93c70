/// The APNs connection loop's timing and admission policy as a pure value: when deadlines are checked, when a link
/// is opened (and how long after a failure), when a quiet link is PINGed and when an unacknowledged PING condemns
/// it, how many streams a link may carry, and how long the loop may sleep. The loop (`APNsHostLoop`) passes the
/// facts of its link and the time (monotonic ms) in and does what comes out; nghttp2 and the socket stay there.
/// Tested without a socket or a clock (`APNsLinkPolicyTests`).
public struct APNsLinkPolicy: Sendable {
    public struct Options: Sendable, Equatable {
        /// PING after this long without reading anything, and drop the link if the ack takes `pingTimeoutMs`.
        public var pingIntervalMs = 45_000
        /// The same while requests are waiting for an answer: a link that went silent under load (or accepted TLS
        /// and never spoke HTTP/2) is replaced within `busyPingMs + pingTimeoutMs`, well inside 10 s.
        public var busyPingMs = 3_000
        public var pingTimeoutMs = 5_000
        /// Minimum gap before reconnecting after a failure: APNs treats connection churn as an attack.
        public var reconnectDelayMs = 1_000
        /// Upper bound on concurrent streams whatever the peer allows.
        public var maxConcurrentStreams = 1_000
        /// How often request deadlines are checked: 10 s timeouts don't need a check per frame.
        public var expiryCheckMs = 50

        public init() {}
    }

    /// What the loop knows of its open link this turn.
    public struct Link: Sendable, Equatable {
        public var lastReadAt: Int64
        public var pingSentAt: Int64?
        public var openStreams: Int
        /// A 200 arrived on it, so APNs accepts the provider token.
        public var confirmed: Bool
        /// The peer's SETTINGS_MAX_CONCURRENT_STREAMS.
        public var peerStreamLimit: Int

        public init(lastReadAt: Int64, pingSentAt: Int64? = nil, openStreams: Int = 0, confirmed: Bool = false,
                    peerStreamLimit: Int = 100) {
            self.lastReadAt = lastReadAt
            self.pingSentAt = pingSentAt
            self.openStreams = openStreams
            self.confirmed = confirmed
            self.peerStreamLimit = peerStreamLimit
        }
    }

    /// What the loop does before it sends this turn.
    public struct Turn: Sendable, Equatable {
        /// Finish pushes whose deadline passed.
        public var expireDeadlines = false
        /// Open a link: pushes wait and none is open.
        public var connect = false
    }

    /// What a link's health asks for this turn.
    public enum Health: Sendable, Equatable {
        case fine
        case ping
        /// Retire the link with this reason.
        case failed(String)
    }

    public let options: Options
    public private(set) var nextConnectAt: Int64 = 0
    public private(set) var nextExpiryCheck: Int64 = 0

    public init(options: Options = Options()) { self.options = options }

    public mutating func turn(now: Int64, waiting: Bool, linkOpen: Bool) -> Turn {
        var turn = Turn()
        if now >= nextExpiryCheck {
            turn.expireDeadlines = true
            nextExpiryCheck = now + Int64(options.expiryCheckMs)
        }
        turn.connect = !linkOpen && waiting && now >= nextConnectAt
        return turn
    }

    /// A connect failed: the next waits `delayMs` (by default `reconnectDelayMs`; `APNsConnectionMachine` passes
    /// its backoff's).
    public mutating func connectFailed(now: Int64, delayMs: Int64? = nil) {
        nextConnectAt = now + (delayMs ?? Int64(options.reconnectDelayMs))
    }

    /// A link was retired: one that failed waits before the next attempt; a GOAWAY'd one is replaced at once.
    public mutating func retired(failed: Bool, now: Int64) {
        if failed { nextConnectAt = now + Int64(options.reconnectDelayMs) }
    }

    public func health(of link: Link, now: Int64) -> Health {
        if let sent = link.pingSentAt {
            return now - sent >= Int64(options.pingTimeoutMs) ? .failed("no PING ack in \(options.pingTimeoutMs) ms") : .fine
        }
        return now >= nextPing(of: link) ? .ping : .fine
    }

    /// When a quiet link is PINGed: soon while answers are owed, after a long idle otherwise.
    public func nextPing(of link: Link) -> Int64 {
        link.lastReadAt + Int64(link.openStreams == 0 ? options.pingIntervalMs : min(options.busyPingMs, options.pingIntervalMs))
    }

    /// How many streams may be open at once: one until a 200 proves the provider token (a refused token then fails
    /// one push, not a thousand), then the peer's limit up to `maxConcurrentStreams`.
    public func streamLimit(of link: Link) -> Int {
        guard link.confirmed else { return 1 }
        return max(1, min(link.peerStreamLimit, options.maxConcurrentStreams))
    }

    /// How long the loop may sleep in poll() (ms; -1: until woken): the next deadline check while pushes wait or
    /// streams are open, the next connect while pushes wait without a link, the link's PING or PING deadline.
    public func pollTimeout(now: Int64, waiting: Bool, link: Link?) -> Int64 {
        var timeout: Int64 = -1
        func soonest(_ at: Int64) { timeout = timeout < 0 ? max(0, at - now) : min(timeout, max(0, at - now)) }
        if waiting || (link?.openStreams ?? 0) > 0 { soonest(nextExpiryCheck) }
        if link == nil, waiting { soonest(nextConnectAt) }
        if let link { soonest(link.pingSentAt.map { $0 + Int64(options.pingTimeoutMs) } ?? nextPing(of: link)) }
        return timeout
    }
}
