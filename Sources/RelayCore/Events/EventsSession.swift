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
/// reconnect (`Backoff.eventsSocket`), what a refusal or a stalled stage means, and which lines to log; with it, the
/// socket's other decisions (`EventsSession+Decisions.swift`). Events go in with the time (monotonic seconds) and the
/// random draw; actions come out for `EventsSocket`, which only makes the lws calls. Tested transition by transition
/// without a socket or a clock (`EventsSessionTests`).
///
/// The whole state is `state`, one value, so a connection can't be both open and stopped. An event the state rules
/// out (`isPossible`) is a bug in the edge: it traps in debug builds, and release builds ignore it, since a relay
/// that keeps its socket beats one that stops over a misreported callback.
public struct EventsSession: Sendable {
    /// A connection's stage before it subscribes; each has `stageTimeout` to finish.
    public enum Stage: Sendable, Equatable {
        case connecting, upgrading, authenticating

        /// What did not finish when a connection ended in this stage after its deadline.
        var stalledStage: String {
            switch self {
            case .connecting: "the TCP connect or TLS handshake"
            case .upgrading: "the WebSocket upgrade (no HTTP answer)"
            case .authenticating: "the auth message (no auth_success)"
            }
        }
    }

    /// What the backoff and the log cadence carry from one connection to the next.
    public struct Streak: Sendable, Equatable {
        /// Connections ended so far: the number of the newest reconnect timer.
        var generation = 0
        /// Disconnects since the last subscribe: the backoff's n.
        var disconnectsInARow = 0
        /// Failed connects since the last subscription, and when one was last logged at warn level.
        var failedConnects = 0
        var lastFailureLogged = -Double.infinity
        /// A refusal was logged since the last subscription: the next goes at debug level.
        var refusalLogged = false
    }

    /// The open connection: how it will be reported as ended, once a close frame or a connect error said, and the
    /// close frame's words.
    public struct Link: Sendable, Equatable {
        var ending = SocketEnd.lost
        var closeNote: String?
        var streak: Streak
    }

    public enum State: Sendable, Equatable {
        /// Not started yet.
        case idle
        /// A connection is open and in `stage`, which runs out at `deadline`.
        case connecting(Stage, deadline: Double, Link)
        /// Authenticated and filtered: events flow.
        case subscribed(Link)
        /// The last connection ended; reconnect timer number `streak.generation` brings the next.
        case waitingToReconnect(Streak)
        /// Stopped while a connection was open: it is being killed, and nothing it still reports matters.
        case stopping
        /// Stopped, with no connection: nothing more happens.
        case stopped
    }

    /// What the edge reports, for `isPossible`.
    public enum Event: Sendable, Equatable, CaseIterable {
        case start, reconnectDue, connectReturned, upgrading, established, authSucceeded, closeFrame, connectError
        case ended, stop
    }

    public enum Action: Sendable, Equatable {
        /// Open a connection (`lws_client_connect_via_info`), then report `connectReturned`.
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
    /// The proxy the socket tunnels through, for its refusals' words; nil: direct.
    public let tunnel: Tunnel?
    public private(set) var state = State.idle

    public init(backoff: Backoff = .eventsSocket, tunnel: Tunnel? = nil) {
        self.backoff = backoff
        self.tunnel = tunnel
    }

    /// Whether `event` can happen in the current state. Only what lws reports on an open connection is ruled out
    /// elsewhere: the relay and the timers may ask at any time, and what a connection reports after its end or
    /// after a stop is ignored.
    public func isPossible(_ event: Event) -> Bool {
        switch (event, state) {
        case (.start, _), (.reconnectDue, _), (.stop, _), (_, .stopping):
            true
        case (.connectReturned, .connecting(.connecting, _, _)), (.connectReturned, .waitingToReconnect):
            true  // waiting: lws reported the failure before it returned
        case (.upgrading, .connecting(let stage, _, _)), (.established, .connecting(let stage, _, _)):
            stage != .authenticating
        case (.authSucceeded, .connecting(.authenticating, _, _)), (.authSucceeded, .subscribed),
             (.closeFrame, .connecting(.authenticating, _, _)), (.closeFrame, .subscribed):
            true  // the server speaks once upgraded; a second auth_success is its quirk, not ours
        case (.connectError, .connecting), (.connectError, .waitingToReconnect), (.connectError, .stopped):
            true  // lws may report a connection's failure after its close
        case (.ended, .connecting), (.ended, .subscribed), (.ended, .waitingToReconnect), (.ended, .stopped):
            true  // lws can report an end twice (CLIENT_CLOSED, then WSI_DESTROY)
        default:
            false
        }
    }

    // MARK: - Events

    /// The relay asks for the socket (also how a reconnect timer lands). Open or stopped: nothing to do.
    public mutating func start(now: Double) -> [Action] {
        switch state {
        case .idle: return open(Streak(), now: now)
        case .waitingToReconnect(let streak): return open(streak, now: now)
        case .connecting, .subscribed, .stopping, .stopped: return []
        }
    }

    /// A reconnect timer fired; an older timer (its connection was replaced since) does nothing.
    public mutating func reconnectDue(generation: Int, now: Double) -> [Action] {
        guard case .waitingToReconnect(let streak) = state, streak.generation == generation else { return [] }
        return start(now: now)
    }

    /// `lws_client_connect_via_info` returned: `opened` if it gave a connection, `wsiMade` if it had made one.
    /// When it made none and reported nothing, no callback will end this connection: the session makes up the end.
    public mutating func connectReturned(opened: Bool, wsiMade: Bool, now: Double, random: Double) -> [Action] {
        guard admits(.connectReturned), !opened, !wsiMade, case .connecting(.connecting, _, _) = state else { return [] }
        return ended("could not start the connection", now: now, random: random)
    }

    /// The upgrade request is being written.
    public mutating func upgrading(now: Double) {
        guard admits(.upgrading), case .connecting(_, _, let link) = state else { return }
        state = .connecting(.upgrading, deadline: now + Double(Self.stageTimeout), link)
    }

    /// The upgrade was answered 101.
    public mutating func established(now: Double) -> [Action] {
        guard admits(.established), case .connecting(_, _, let link) = state else { return [] }
        state = .connecting(.authenticating, deadline: now + Double(Self.stageTimeout), link)
        return [.authenticate(seconds: Self.stageTimeout)]
    }

    /// Prefect answered the auth message with `auth_success`: the counts start over.
    public mutating func authSucceeded(now: Double) -> [Action] {
        guard admits(.authSucceeded) else { return [] }
        switch state {
        case .connecting(_, _, var link), .subscribed(var link):
            link.streak = Streak(generation: link.streak.generation)
            state = .subscribed(link)
            return [.subscribed]
        default:
            return []
        }
    }

    /// The server's close frame; 1008 is a refused credential.
    public mutating func closeFrame(code: Int, text: String) -> [Action] {
        guard admits(.closeFrame) else { return [] }
        return updateLink { link in
            link.closeNote = "\(code) \(text)"
            guard code == 1008 else { return [] }
            link.ending = .credentialRefused
            return [Self.refusal(text, &link.streak)]
        }
    }

    /// lws could not connect or upgrade, in its words: which failure that is (`connectFailure`) decides the log
    /// lines and the end.
    public mutating func connectError(_ message: String, now: Double, random: Double) -> [Action] {
        guard admits(.connectError) else { return [] }
        let failure = Self.connectFailure(message, tunnel: tunnel)
        let actions = updateLink { link in
            link.ending = failure.end
            return failure.refusal.map { [Self.refusal($0, &link.streak)] } ?? []
        }
        return actions + ended(failure.reason, now: now, random: random)
    }

    /// The connection is over (closed, destroyed, failed): report it and schedule the next.
    public mutating func ended(_ reason: String, now: Double, random: Double) -> [Action] {
        guard admits(.ended) else { return [] }
        switch state {
        case .connecting(let stage, let deadline, let link):
            // Half a second early still counts: lws's timer ticks once a second.
            return end(link, stalled: now >= deadline - 0.5 ? stage : nil, subscribed: false, reason, now, random)
        case .subscribed(let link):
            return end(link, stalled: nil, subscribed: true, reason, now, random)
        case .stopping:
            state = .stopped
            return []
        case .idle, .waitingToReconnect, .stopped:
            return []
        }
    }

    /// No more connections; the open one is closed.
    public mutating func stop() -> [Action] {
        switch state {
        case .connecting, .subscribed:
            state = .stopping
            return [.close]
        case .idle, .waitingToReconnect:
            state = .stopped
            return []
        case .stopping, .stopped:
            return []
        }
    }

    // MARK: - Transitions

    private mutating func open(_ streak: Streak, now: Double) -> [Action] {
        state = .connecting(.connecting, deadline: now + Double(Self.stageTimeout), Link(streak: streak))
        return [.connect]
    }

    /// Reports the end of `link` and waits for the next connection. `stalled`: the stage that ran out, if one did.
    private mutating func end(_ link: Link, stalled: Stage?, subscribed: Bool, _ reason: String, _ now: Double,
                              _ random: Double) -> [Action] {
        var streak = link.streak
        streak.disconnectsInARow += 1
        var delay = backoff.delay(failures: streak.disconnectsInARow, random: random)
        if link.ending.isRefusal {
            delay = max(delay, backoff.maximum)  // a refused credential won't fix itself: don't hammer the server
        }
        let ending = link.ending == .lost && link.closeNote == nil && stalled != nil ? .timedOut : link.ending
        let note = link.closeNote ?? stalled.map { "timeout: \($0.stalledStage) did not finish within "
                                                    + "\(Self.stageTimeout) s" } ?? reason
        var actions: [Action] = []
        if !subscribed {
            streak.failedConnects += 1
            if !ending.isRefusal {
                let warn = now - streak.lastFailureLogged >= 60
                if warn { streak.lastFailureLogged = now }
                actions.append(.logConnectFailed(reason: note, attempts: streak.failedConnects, retryIn: delay, warn: warn))
            }
        }
        streak.generation += 1
        state = .waitingToReconnect(streak)
        return actions + [.disconnected(ending, reason: note, retryIn: delay),
                          .reconnect(after: delay, generation: streak.generation)]
    }

    /// Changes the open connection's link, wherever it is; without one, nothing.
    private mutating func updateLink(_ change: (inout Link) -> [Action]) -> [Action] {
        switch state {
        case .connecting(let stage, let deadline, var link):
            let actions = change(&link)
            state = .connecting(stage, deadline: deadline, link)
            return actions
        case .subscribed(var link):
            let actions = change(&link)
            state = .subscribed(link)
            return actions
        case .idle, .waitingToReconnect, .stopping, .stopped:
            return []
        }
    }

    private static func refusal(_ reason: String, _ streak: inout Streak) -> Action {
        defer { streak.refusalLogged = true }
        return .logRefusal(reason: reason, first: !streak.refusalLogged)
    }

    /// Lets a possible event through; an impossible one traps in debug builds and is dropped in release builds.
    private func admits(_ event: Event) -> Bool {
        if isPossible(event) { return true }
        assertionFailure("EventsSession: \(event) is impossible while \(state)")
        return false
    }
}
