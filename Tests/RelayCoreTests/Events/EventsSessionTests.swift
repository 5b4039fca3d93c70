import Testing
@testable import RelayCore

/// The events socket's policy (`EventsSession`), transition by transition: no socket, no clock, no sleep. Times are
/// monotonic seconds passed in; the random draw is 0 (the longest delay) unless a test says otherwise.
@Suite struct EventsSessionTests {
    typealias Action = EventsSession.Action

    /// Connects, upgrades, authenticates: the actions the socket carries out at each step.
    private func subscribed(_ session: inout EventsSession, at now: Double) {
        #expect(session.start(now: now) == [.connect])
        session.upgrading(now: now + 0.01)
        #expect(session.established(now: now + 0.02) == [.authenticate(seconds: EventsSession.stageTimeout)])
        #expect(session.authSucceeded(now: now + 0.03) == [.subscribed])
        #expect(session.state.name == "subscribed")
    }

    @Test func connectsOnceUntilTheConnectionEnds() {
        var session = EventsSession()
        #expect(session.start(now: 0) == [.connect])
        #expect(session.start(now: 1).isEmpty)  // already connecting
        #expect(session.state == .connecting(.connecting, deadline: 10, EventsSession.Link(streak: .init())))
    }

    @Test func aDropAfterSubscribingReportsAndReconnectsAfterASecond() {
        var session = EventsSession()
        subscribed(&session, at: 0)
        let actions = session.ended("closed", now: 100, random: 0)
        // Not a failed connect: no connect_failed line.
        #expect(actions == [.disconnected(.lost, reason: "closed", retryIn: 1), .reconnect(after: 1, generation: 1)])
        #expect(session.state == .waitingToReconnect(.init(generation: 1, disconnectsInARow: 1)))
        #expect(session.reconnectDue(generation: 1, now: 101) == [.connect])
    }

    @Test func failuresInARowDoubleTheWaitUpToTheCapAndASubscribeResetsIt() {
        var session = EventsSession()
        var waits: [Double] = []
        for attempt in 0..<8 {
            let now = Double(attempt) * 100
            _ = session.start(now: now)
            let actions = session.ended("connect failed", now: now + 0.1, random: 0)
            guard case .reconnect(let after, _)? = actions.last else { Issue.record("no reconnect"); return }
            waits.append(after)
        }
        #expect(waits == [1, 2, 4, 8, 16, 32, 60, 60])
        subscribed(&session, at: 1000)
        #expect(session.ended("closed", now: 1001, random: 0).last == .reconnect(after: 1, generation: 9))
        // Jitter only shortens: with the largest draw the first wait is ¾ s.
        var jittered = EventsSession()
        _ = jittered.start(now: 0)
        #expect(jittered.ended("x", now: 0.1, random: 0.999_999).last.map { action -> Bool in
            if case .reconnect(let after, _) = action { return after > 0.75 && after < 0.7501 }
            return false
        } == true)
    }

    @Test func aStageThatRunsOutIsATimeoutNamedAfterTheStage() {
        var session = EventsSession()
        _ = session.start(now: 0)
        session.upgrading(now: 0.5)
        let actions = session.ended("closed before the upgrade was answered", now: 10.2, random: 0)
        let reason = "timeout: the WebSocket upgrade (no HTTP answer) did not finish within 10 s"
        #expect(actions == [.logConnectFailed(reason: reason, attempts: 1, retryIn: 1, warn: true),
                            .disconnected(.timedOut, reason: reason, retryIn: 1), .reconnect(after: 1, generation: 1)])
        // The auth reply's deadline, too.
        _ = session.reconnectDue(generation: 1, now: 20)
        _ = session.established(now: 20.1)
        #expect(session.ended("closed", now: 30.1, random: 0).contains(
            .disconnected(.timedOut, reason: "timeout: the auth message (no auth_success) did not finish within 10 s", retryIn: 2)))
    }

    @Test func aQuickFailureIsNotATimeout() {
        var session = EventsSession()
        _ = session.start(now: 0)
        #expect(session.ended("connect failed", now: 0.2, random: 0).contains(.disconnected(.lost, reason: "connect failed", retryIn: 1)))
    }

    @Test func aRefusedCredentialWaitsTheMaximumAndIsLoggedAsAnErrorOnce() {
        var session = EventsSession()
        _ = session.start(now: 0)
        _ = session.established(now: 0.1)
        #expect(session.closeFrame(code: 1008, text: "Invalid token") == [.logRefusal(reason: "Invalid token", first: true)])
        let actions = session.ended("closed", now: 0.2, random: 0)
        // The close frame's words; no connect_failed line (the refusal has its own); the backoff's maximum.
        #expect(actions == [.disconnected(.credentialRefused, reason: "1008 Invalid token", retryIn: 60),
                            .reconnect(after: 60, generation: 1)])
        _ = session.reconnectDue(generation: 1, now: 60.2)
        _ = session.established(now: 60.3)
        #expect(session.closeFrame(code: 1008, text: "Invalid token") == [.logRefusal(reason: "Invalid token", first: false)])
        _ = session.ended("closed", now: 60.4, random: 0)
        // Once the credential is taken again, the next refusal is an error line again.
        _ = session.reconnectDue(generation: 2, now: 200)
        _ = session.established(now: 200.1)
        #expect(session.authSucceeded(now: 200.2) == [.subscribed])
        #expect(session.closeFrame(code: 1008, text: "Invalid token") == [.logRefusal(reason: "Invalid token", first: true)])
    }

    @Test func anUpgradeAnswered401IsARefusalAndOtherCloseCodesAreNot() {
        var session = EventsSession()
        _ = session.start(now: 0)
        let actions = session.connectError("HS: ws upgrade unauthorized", now: 0.1, random: 0)
        #expect(actions.first == .logRefusal(reason: "HS: ws upgrade unauthorized (the server refused the upgrade; "
                                             + "check PREFECT_API_URL too)", first: true))
        #expect(actions.contains(.disconnected(.credentialRefused, reason: "HS: ws upgrade unauthorized", retryIn: 60)))
        var other = EventsSession()
        subscribed(&other, at: 0)
        #expect(other.closeFrame(code: 1002, text: "Expected 'filter' message").isEmpty)
        #expect(other.ended("closed", now: 5, random: 0).first
            == .disconnected(.lost, reason: "1002 Expected 'filter' message", retryIn: 1))
        // A proxy's refusal is never Prefect refusing the credential, whatever its words.
        var proxied = EventsSession(tunnel: .init(proxy: ProxyEndpoint(host: "p", port: 3128), target: "prefect.test:443"))
        _ = proxied.start(now: 0)
        #expect(proxied.connectError("proxy HTTP/1.1 403 Forbidden", now: 0.1, random: 0)
            .contains { if case .disconnected(.lost, _, _) = $0 { true } else { false } })
    }

    @Test func failedConnectsAreAWarningAMinuteAndDebugBetween() {
        var session = EventsSession()
        var warned: [Bool] = []
        var attempts: [Int] = []
        for now in [0.0, 10, 20, 61, 70] {
            _ = session.start(now: now)
            for action in session.ended("connect failed", now: now + 0.1, random: 0) {
                if case .logConnectFailed(_, let count, _, let warn) = action {
                    warned.append(warn)
                    attempts.append(count)
                }
            }
        }
        #expect(warned == [true, false, false, true, false])
        #expect(attempts == [1, 2, 3, 4, 5])
    }

    @Test func anOldReconnectTimerDoesNothing() {
        var session = EventsSession()
        _ = session.start(now: 0)
        _ = session.ended("x", now: 0.1, random: 0)  // timer 1
        #expect(session.start(now: 0.5) == [.connect])  // started again before it fired
        _ = session.ended("x", now: 0.6, random: 0)  // timer 2
        #expect(session.reconnectDue(generation: 1, now: 1.1).isEmpty)
        #expect(session.reconnectDue(generation: 2, now: 2.6) == [.connect])
    }

    @Test func stopClosesTheOpenConnectionAndNothingFollows() {
        var session = EventsSession()
        subscribed(&session, at: 0)
        #expect(session.stop() == [.close])
        #expect(session.ended("closed", now: 1, random: 0).isEmpty)
        #expect(session.start(now: 2).isEmpty)
        #expect(session.reconnectDue(generation: 0, now: 3).isEmpty)
        var idle = EventsSession()
        #expect(idle.stop().isEmpty)
    }

    @Test func anEndWithoutAConnectionIsIgnored() {
        // lws can report an end twice (CLIENT_CLOSED, then WSI_DESTROY): the second changes nothing.
        var session = EventsSession()
        _ = session.start(now: 0)
        #expect(!session.ended("closed", now: 0.1, random: 0).isEmpty)
        #expect(session.ended("connection ended", now: 0.2, random: 0).isEmpty)
    }

    @Test func connectErrorWordsAreReadOnce() {
        #expect(SocketEnd.ofConnectError("HS: ws upgrade unauthorized") == .credentialRefused)
        #expect(SocketEnd.ofConnectError("403 Forbidden") == .upgradeForbidden)
        #expect(SocketEnd.ofConnectError("HS: ws upgrade response not 101") == .lost)
    }

    // MARK: - The decisions the socket carries out

    @Test func aConnectThatNeverStartedIsEndedByTheSession() {
        // lws made no connection and reported nothing: no callback will end it, so the session does.
        var session = EventsSession()
        _ = session.start(now: 0)
        let reason = "could not start the connection"
        #expect(session.connectReturned(opened: false, wsiMade: false, now: 0.1, random: 0)
            == [.logConnectFailed(reason: reason, attempts: 1, retryIn: 1, warn: true),
                .disconnected(.lost, reason: reason, retryIn: 1), .reconnect(after: 1, generation: 1)])
        // lws made one (it reports the failure itself), or gave one: nothing made up.
        _ = session.reconnectDue(generation: 1, now: 2)
        #expect(session.connectReturned(opened: false, wsiMade: true, now: 2.1, random: 0).isEmpty)
        #expect(session.connectReturned(opened: true, wsiMade: true, now: 2.1, random: 0).isEmpty)
        #expect(session.state.name == "connecting")
        // lws reported the failure before it returned: already ended, not twice.
        _ = session.connectError("connect failed", now: 2.2, random: 0)
        #expect(session.connectReturned(opened: false, wsiMade: false, now: 2.2, random: 0).isEmpty)
        #expect(session.state == .waitingToReconnect(.init(generation: 2, disconnectsInARow: 2, failedConnects: 2,
                                                           lastFailureLogged: 0.1)))
    }

    @Test func aProxysRefusalNamesTheProxyAndIsNeverPrefectsRefusal() {
        let tunnel = EventsSession.Tunnel(proxy: ProxyEndpoint(host: "127.0.0.1", port: 40351, username: "u",
                                                               password: "secret"), target: "prefect.test:4200")
        let worded = "proxy http://127.0.0.1:40351 refused CONNECT to prefect.test:4200 (proxy HTTP/1.1 403 Forbidden): "
            + "check the user:pass@ in the proxy URL (407) and that the proxy allows this target, or list the host in NO_PROXY"
        #expect(EventsSession.connectFailure("proxy HTTP/1.1 403 Forbidden", tunnel: tunnel)
            == .init(reason: worded, end: .lost, refusal: nil))
        // Direct, lws's words are Prefect's; through a proxy, only "proxy …" is the proxy's.
        #expect(EventsSession.connectFailure("proxy HTTP/1.1 403 Forbidden", tunnel: nil)
            == .init(reason: "proxy HTTP/1.1 403 Forbidden", end: .upgradeForbidden,
                     refusal: "proxy HTTP/1.1 403 Forbidden (the server refused the upgrade; check PREFECT_API_URL too)"))
        #expect(EventsSession.connectFailure("HS: ws upgrade unauthorized", tunnel: tunnel).end == .credentialRefused)
        // Through the session: a connect_failed line with the proxy's words, no auth_rejected, the usual backoff.
        var session = EventsSession(tunnel: tunnel)
        _ = session.start(now: 0)
        #expect(session.connectError("proxy HTTP/1.1 403 Forbidden", now: 0.1, random: 0)
            == [.logConnectFailed(reason: worded, attempts: 1, retryIn: 1, warn: true),
                .disconnected(.lost, reason: worded, retryIn: 1), .reconnect(after: 1, generation: 1)])
    }

    @Test func aMessageOverOneMiBClosesTheConnectionWith1009() {
        #expect(EventsSession.maxMessage == 1024 * 1024)
        #expect(EventsSession.fragment(buffered: 0, adding: EventsSession.maxMessage) == .collect)
        #expect(EventsSession.fragment(buffered: EventsSession.maxMessage - 10, adding: 10) == .collect)
        #expect(EventsSession.fragment(buffered: EventsSession.maxMessage - 10, adding: 11)
            == .close(code: 1009, reason: "message too big", bytes: EventsSession.maxMessage + 1))
    }

    @Test func theBackfillStartsAMinuteBeforeTheLastEventSeen() throws {
        let now = try #require(Timestamp.parse("2026-11-29T23:00:00Z"))
        let last = "2026-11-29T22:05:57.142583Z"
        let window = EventsSession.backfillWindow(lastOccurred: last, now: now)
        #expect(window.since == (try #require(Timestamp.parse(last))) - 60)
        #expect(Timestamp.format(window.since) == "2026-11-29T22:04:57.142Z")  // sent to the millisecond
        #expect(window.until == now + 365 * 86400)
    }

    @Test func withoutAnEventSeenTheBackfillStartsFifteenMinutesBack() {
        let now = 1_795_000_000.5
        #expect(EventsSession.backfillWindow(lastOccurred: nil, now: now)
            == .init(since: now - 15 * 60, until: now + 365 * 86400))
        // A last `occurred` that is no timestamp counts as none.
        #expect(EventsSession.backfillWindow(lastOccurred: "yesterday", now: now).since == now - 15 * 60)
    }

    @Test func whatIsPossibleFollowsTheState() {
        var session = EventsSession()
        // Idle: the relay and timers may ask, lws has nothing to report.
        #expect(session.isPossible(.start) && session.isPossible(.reconnectDue) && session.isPossible(.stop))
        #expect(!session.isPossible(.ended) && !session.isPossible(.established) && !session.isPossible(.closeFrame))
        _ = session.start(now: 0)
        // Before the upgrade, no message and no close frame.
        #expect(session.isPossible(.upgrading) && session.isPossible(.established) && session.isPossible(.connectError))
        #expect(!session.isPossible(.authSucceeded) && !session.isPossible(.closeFrame))
        _ = session.established(now: 0.1)
        #expect(!session.isPossible(.established) && session.isPossible(.closeFrame) && session.isPossible(.authSucceeded))
        // Stopped with the connection open: whatever it still reports is ignored, then its end leaves it stopped.
        #expect(session.stop() == [.close])
        #expect(session.state == .stopping)
        #expect(EventsSession.Event.allCases.allSatisfy(session.isPossible))
        #expect(session.authSucceeded(now: 0.2).isEmpty && session.closeFrame(code: 1008, text: "x").isEmpty)
        #expect(session.ended("closed", now: 0.3, random: 0).isEmpty)
        #expect(session.state == .stopped)
        #expect(!session.isPossible(.established) && session.isPossible(.ended))
    }
}

extension EventsSession.State {
    /// The case alone, for tests that don't care what it carries.
    var name: String {
        switch self {
        case .idle: "idle"
        case .connecting: "connecting"
        case .subscribed: "subscribed"
        case .waitingToReconnect: "waitingToReconnect"
        case .stopping: "stopping"
        case .stopped: "stopped"
        }
    }
}
