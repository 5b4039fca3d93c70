/// How the events socket ended, as far as anything decides on it: the backoff, `/health`, `check`'s advice.
public enum SocketEnd: Sendable, Equatable {
    /// Prefect refused the credential: a close 1008 after the auth message, or the upgrade answered 401.
    case credentialRefused
    /// The upgrade was answered 403: Prefect, or a proxy in front of it, refused it.
    case upgradeForbidden
    /// A stage (connect, TLS, upgrade, auth) did not finish within its deadline.
    case timedOut
    /// Anything else: the link dropped, a refused connect, a close with another code.
    case lost

    /// A refusal won't fix itself: no fast retries, and `/health` says so.
    public var isRefusal: Bool { self == .credentialRefused || self == .upgradeForbidden }

    /// What a failed connect was, from lws's words: lws 4.1.6 reports a failed client connect only as text
    /// (`client-handshake.c`), so its words are read here, once. A 403 counts only as a status, never as digits
    /// anywhere: a reason naming port 40351 is no refusal.
    public static func ofConnectError(_ message: String) -> SocketEnd {
        if message.includes("upgrade unauthorized") { return .credentialRefused }
        if message.hasPrefix("403 ") || message.includes("HTTP/1.1 403") { return .upgradeForbidden }
        return .lost
    }
}

/// The events socket's policy as a pure state machine: which stage a connection is in and its deadline, when to
/// reconnect (`Backoff.eventsSocket`), what a refusal or a stalled stage means, and which lines to log. Events go in
/// with the time (monotonic seconds) and the random draw; actions come out for `EventsSocket`, which only makes the
/// lws calls. Tested transition by transition without a socket or a clock (`EventsSessionTests`).
public struct EventsSession: Sendable {
    /// Where a connection is; each stage before `subscribed` has `stageTimeout` to finish.
    public enum Phase: Sendable, Equatable {
        case idle, connecting, upgrading, authenticating, subscribed

        /// What did not finish when a connection ended in this phase after its deadline.
        var stalledStage: String {
            switch self {
            case .idle, .connecting: "the TCP connect or TLS handshake"
            case .upgrading: "the WebSocket upgrade (no HTTP answer)"
            case .authenticating, .subscribed: "the auth message (no auth_success)"
            }
        }
    }

    public enum Action: Sendable, Equatable {
        /// Open a connection (`lws_client_connect_via_info`).
        case connect
        /// Send the auth message and give its answer `seconds` (lws's user timeout).
        case authenticate(seconds: Int32)
        /// Clear the auth deadline, send the filter, and tell the relay events flow.
        case subscribed
        /// Prefect refused the credential: log it at error level the first time, at debug while it keeps refusing.
        case logRefusal(reason: String, first: Bool)
        /// A connection ended before it subscribed: the `attempts`-th since the last subscription; `warn` at most once
        /// a minute, else debug.
        case logConnectFailed(reason: String, attempts: Int, retryIn: Double, warn: Bool)
        /// Tell the relay the socket ended.
        case disconnected(SocketEnd, reason: String, retryIn: Double)
        /// Arm a timer for `after` seconds that brings `reconnectDue(generation:)`.
        case reconnect(after: Double, generation: Int)
        /// Kill the open connection (stop).
        case close
    }

    /// Seconds each stage may take: lws's `timeout_secs` on the loop's context, and the auth reply's own timer.
    public static let stageTimeout: Int32 = 10

    public let backoff: Backoff
    public private(set) var phase = Phase.idle
    public private(set) var stopped = false
    /// Whether a connection is open (from `connect` until it ended).
    public private(set) var connected = false
    private var stageStarted = 0.0
    /// Disconnects since the last subscribe: the backoff's n.
    private var disconnectsInARow = 0
    /// Failed connects since the last subscription, and when one was last logged at warn level.
    private var failedConnects = 0
    private var lastFailureLogged = -Double.infinity
    private var refusalLogged = false
    /// How the open connection ended, once a close frame or a connect error said; and the close frame's words.
    private var ending = SocketEnd.lost
    private var closeNote: String?
    private var generation = 0

    public init(backoff: Backoff = .eventsSocket) { self.backoff = backoff }

    /// The relay asks for the socket (also how a reconnect timer lands).
    public mutating func start(now: Double) -> [Action] {
        guard !stopped, !connected else { return [] }
        connected = true
        enter(.connecting, now)
        ending = .lost
        closeNote = nil
        return [.connect]
    }

    /// A reconnect timer fired; an older timer (its connection was replaced since) does nothing.
    public mutating func reconnectDue(generation: Int, now: Double) -> [Action] {
        guard generation == self.generation else { return [] }
        return start(now: now)
    }

    /// The upgrade request is being written.
    public mutating func upgrading(now: Double) { enter(.upgrading, now) }

    /// The upgrade was answered 101.
    public mutating func established(now: Double) -> [Action] {
        enter(.authenticating, now)
        return [.authenticate(seconds: Self.stageTimeout)]
    }

    /// Prefect answered the auth message with `auth_success`.
    public mutating func authSucceeded(now: Double) -> [Action] {
        enter(.subscribed, now)
        refusalLogged = false
        failedConnects = 0
        lastFailureLogged = -Double.infinity
        disconnectsInARow = 0
        return [.subscribed]
    }

    /// The server's close frame; 1008 is a refused credential.
    public mutating func closeFrame(code: Int, text: String) -> [Action] {
        closeNote = "\(code) \(text)"
        guard code == 1008 else { return [] }
        ending = .credentialRefused
        return [refusal(text)]
    }

    /// lws could not connect or upgrade, in its words (the edge has already reworded a proxy's refusal, which is
    /// never Prefect's).
    public mutating func connectError(_ message: String, viaProxyRefusal: Bool, now: Double, random: Double) -> [Action] {
        var actions: [Action] = []
        if !viaProxyRefusal {
            ending = SocketEnd.ofConnectError(message)
            if ending.isRefusal { actions.append(refusal(message + " (the server refused the upgrade; check PREFECT_API_URL too)")) }
        }
        return actions + ended(message, now: now, random: random)
    }

    /// The connection is over (closed, destroyed, failed): report it and schedule the next.
    public mutating func ended(_ reason: String, now: Double, random: Double) -> [Action] {
        guard connected else { return [] }
        let endedIn = phase
        let stalled = endedIn != .subscribed && now - stageStarted >= Double(Self.stageTimeout) - 0.5
        connected = false
        phase = .idle
        guard !stopped else { return [] }
        disconnectsInARow += 1
        var delay = backoff.delay(failures: disconnectsInARow, random: random)
        if ending.isRefusal {
            delay = max(delay, backoff.maximum)  // a refused credential won't fix itself: don't hammer the server
        }
        if ending == .lost && closeNote == nil && stalled { ending = .timedOut }
        let note = closeNote ?? (stalled ? "timeout: \(endedIn.stalledStage) did not finish within "
                                         + "\(Self.stageTimeout) s" : reason)
        var actions: [Action] = []
        if endedIn != .subscribed {
            failedConnects += 1
            if !ending.isRefusal {
                let warn = now - lastFailureLogged >= 60
                if warn { lastFailureLogged = now }
                actions.append(.logConnectFailed(reason: note, attempts: failedConnects, retryIn: delay, warn: warn))
            }
        }
        generation += 1
        actions += [.disconnected(ending, reason: note, retryIn: delay), .reconnect(after: delay, generation: generation)]
        return actions
    }

    /// No more connections; the open one is closed.
    public mutating func stop() -> [Action] {
        stopped = true
        return connected ? [.close] : []
    }

    private mutating func enter(_ next: Phase, _ now: Double) {
        phase = next
        stageStarted = now
    }

    private mutating func refusal(_ reason: String) -> Action {
        defer { refusalLogged = true }
        return .logRefusal(reason: reason, first: !refusalLogged)
    }
}
