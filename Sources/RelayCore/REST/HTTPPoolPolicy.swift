/// The Prefect REST pool's numbers as pure functions: when an idle connection goes, when a request nobody waits for
/// gives its connection up, how many connections an origin may have (slow requests make room for more), how many
/// connections make way for waiting calls and how many to open, when a request counts as stalled and a warning is
/// due, and how long the loop may sleep. `HTTPPoolStateMachine` owns one and asks it; the machine holds the state
/// these are asked about. Tested without a socket or a clock (`HTTPPoolPolicyTests`).
public struct HTTPPoolPolicy: Sendable {
    public struct Options: Sendable, Equatable {
        public var maxConnectionsPerHost = 6
        /// Connections opened on top of `maxConnectionsPerHost` in place of slow requests.
        public var extraConnectionsPerHost = 6
        /// A request with no answer this long is slow: it stops counting against `maxConnectionsPerHost`. Prefect
        /// answers a read in a few ms to a few tens of ms.
        public var slowMs = 200
        /// A request with no answer this long is stalled (logged, counted).
        public var stallMs = 1_000
        /// How long a request whose caller gave up keeps its connection, waiting for the answer.
        public var abandonedHoldMs = 60_000
        /// Requests of one group (`HTTPCall.group`) open at once; a pause reads its run, artifacts and events together.
        public var maxInFlightPerGroup = 3
        public var idleTimeoutMs = 30_000
        /// Idle time after which a connection beyond `maxConnectionsPerHost` is closed.
        public var extraIdleMs = 5_000
        public var stallWarningEveryMs = 10_000

        public init() {}
    }

    /// A request open on a connection.
    public struct OpenRequest: Sendable, Equatable {
        public var sentAt: Int64
        /// When its caller gets a timeout.
        public var deadline: Int64
        /// Its caller was answered already (a timeout); the request stays open at the server.
        public var abandoned: Bool
        /// Already counted as stalled.
        public var stalled: Bool
        /// The soonest deadline of the calls waiting on its answer (the same request asked again), if any.
        public var joinedDeadline: Int64?

        public init(sentAt: Int64, deadline: Int64, abandoned: Bool = false, stalled: Bool = false,
                    joinedDeadline: Int64? = nil) {
            self.sentAt = sentAt
            self.deadline = deadline
            self.abandoned = abandoned
            self.stalled = stalled
            self.joinedDeadline = joinedDeadline
        }
    }

    /// A connection of one origin: carrying a request, or idle since a time.
    public enum Connection: Sendable, Equatable {
        case idle(since: Int64)
        case busy(OpenRequest)
    }

    /// What waiting calls need of one origin's connections this turn.
    public struct Plan: Sendable, Equatable {
        /// Idle connections to close (the first ones found) to make room for fresh ones.
        public var closeIdle = 0
        /// Connections whose abandoned request nobody waits for, oldest request first, to close at the hard cap.
        public var closeAbandoned = 0
        /// Connections to open.
        public var open = 0

        public init(closeIdle: Int = 0, closeAbandoned: Int = 0, open: Int = 0) {
            self.closeIdle = closeIdle
            self.closeAbandoned = closeAbandoned
            self.open = open
        }
    }

    public let options: Options

    public init(options: Options = Options()) { self.options = options }

    /// Why an idle connection is closed now, or nil to keep it: unused for `idleTimeoutMs`, or for `extraIdleMs`
    /// while its origin has more than its normal size open (`openToOrigin` counts those being opened too).
    public func idleClose(since: Int64, openToOrigin: Int, now: Int64) -> String? {
        let idle = now - since
        if idle >= Int64(options.idleTimeoutMs) { return "idle" }
        if idle >= Int64(options.extraIdleMs), openToOrigin > options.maxConnectionsPerHost {
            return "idle beyond the pool's normal size"
        }
        return nil
    }

    /// An abandoned request has held its connection long enough: the connection is closed.
    public func holdIsOver(_ request: OpenRequest, now: Int64) -> Bool {
        request.abandoned && now - request.sentAt >= Int64(options.abandonedHoldMs)
    }

    /// How many connections an origin may have now, with `slow` of its requests open `slowMs` or longer (`isSlow`):
    /// the normal size, plus one for each (up to `extraConnectionsPerHost`). Reads Prefect answers in time keep the
    /// pool at its normal size.
    public func limit(slow: Int) -> Int { options.maxConnectionsPerHost + min(slow, options.extraConnectionsPerHost) }

    /// The most an origin may ever have open or opening.
    public var hardCap: Int { options.maxConnectionsPerHost + options.extraConnectionsPerHost }

    /// A request sent at `sentAt` has gone `slowMs` without an answer.
    public func isSlow(sentAt: Int64, now: Int64) -> Bool { now - sentAt >= Int64(options.slowMs) }

    /// A group with this many requests open takes no more.
    public func groupIsFull(open: Int) -> Bool { open >= options.maxInFlightPerGroup }

    /// `needed` calls want a connection of an origin with `open` open or opening, `limit` allowed, `idle` of them idle
    /// (only a call that must go on a fresh one, a retried call, can be waiting beside an idle connection) and
    /// `abandoned` busy with a request nobody waits for.
    public func plan(needed: Int, open: Int, limit: Int, idle: Int, abandoned: Int) -> Plan {
        var plan = Plan()
        guard needed > 0 else { return plan }
        var open = open
        // A retried call waits for a fresh connection: idle reused ones make room for it at the limit.
        while open >= limit, plan.closeIdle < idle {
            plan.closeIdle += 1
            open -= 1
        }
        // At the hard cap with calls waiting: an abandoned request nobody waits for gives up its connection.
        if limit >= options.maxConnectionsPerHost + options.extraConnectionsPerHost {
            while open >= limit, plan.closeAbandoned < abandoned {
                plan.closeAbandoned += 1
                open -= 1
            }
        }
        plan.open = min(needed, max(0, limit - open))
        return plan
    }

    /// A request sent at `sentAt` has gone `stallMs` without an answer.
    public func isStalled(sentAt: Int64, now: Int64) -> Bool { now - sentAt >= Int64(options.stallMs) }

    /// A `prefect.reads_stalled` line may be written (at most one per `stallWarningEveryMs`).
    public func stallWarningDue(now: Int64, lastWarning: Int64?) -> Bool {
        lastWarning.map { now - $0 >= Int64(options.stallWarningEveryMs) } ?? true
    }

    /// The moments one connection needs the loop awake for, added to `wake` (`HTTPPoolStateMachine.pollTimeout`
    /// adds the callers' and the connects' deadlines): its caller's deadline or its abandoned hold, the moments its
    /// request turns slow (only while calls wait), turns stalled or is due another stall warning, and an idle one's
    /// expiry. A moment already past is not waited for again.
    public func wake(_ wake: inout Wake, for connection: Connection, callsWait: Bool, lastStallWarning: Int64?) {
        switch connection {
        case .busy(let request):
            wake.at(request.abandoned ? request.sentAt + Int64(options.abandonedHoldMs) : request.deadline)
            if let joined = request.joinedDeadline { wake.at(joined) }
            if callsWait { wake.upcoming(request.sentAt + Int64(options.slowMs)) }
            wake.upcoming(request.sentAt + Int64(options.stallMs))
            if request.stalled, let last = lastStallWarning { wake.upcoming(last + Int64(options.stallWarningEveryMs)) }
        case .idle(let since):
            wake.at(since + Int64(options.idleTimeoutMs))
            wake.upcoming(since + Int64(options.extraIdleMs))
        }
    }

    /// The soonest of a set of moments, as a poll() timeout from `now` (-1 while there is none).
    public struct Wake: Sendable {
        public let now: Int64
        public private(set) var timeout: Int64 = -1

        public init(now: Int64) { self.now = now }

        /// A moment to wake at; one already past means at once.
        public mutating func at(_ moment: Int64) {
            let wait = max(0, moment - now)
            timeout = timeout < 0 ? wait : min(timeout, wait)
        }

        /// A moment to wake at only while it is still ahead (a threshold crossed already needs no second look).
        public mutating func upcoming(_ moment: Int64) { if moment > now { at(moment) } }
    }
}
