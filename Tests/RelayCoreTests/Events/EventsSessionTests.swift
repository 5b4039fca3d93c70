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
        #expect(session.phase == .subscribed)
    }

    @Test func connectsOnceUntilTheConnectionEnds() {
        var session = EventsSession()
        #expect(session.start(now: 0) == [.connect])
        #expect(session.start(now: 1).isEmpty)  // already connecting
        #expect(session.phase == .connecting && session.connected)
    }

    @Test func aDropAfterSubscribingReportsAndReconnectsAfterASecond() {
        var session = EventsSession()
        subscribed(&session, at: 0)
        let actions = session.ended("closed", now: 100, random: 0)
        // Not a failed connect: no connect_failed line.
        #expect(actions == [.disconnected(.lost, reason: "closed", retryIn: 1), .reconnect(after: 1, generation: 1)])
        #expect(session.phase == .idle && !session.connected)
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
        let actions = session.connectError("HS: ws upgrade unauthorized", viaProxyRefusal: false, now: 0.1, random: 0)
        #expect(actions.first == .logRefusal(reason: "HS: ws upgrade unauthorized (the server refused the upgrade; "
                                             + "check PREFECT_API_URL too)", first: true))
        #expect(actions.contains(.disconnected(.credentialRefused, reason: "HS: ws upgrade unauthorized", retryIn: 60)))
        var other = EventsSession()
        subscribed(&other, at: 0)
        #expect(other.closeFrame(code: 1002, text: "Expected 'filter' message").isEmpty)
        #expect(other.ended("closed", now: 5, random: 0).first
            == .disconnected(.lost, reason: "1002 Expected 'filter' message", retryIn: 1))
        // A proxy's refusal is never Prefect refusing the credential, whatever its words.
        var proxied = EventsSession()
        _ = proxied.start(now: 0)
        #expect(proxied.connectError("proxy http://p:3128 refused CONNECT (HTTP/1.1 403 Forbidden)", viaProxyRefusal: true,
                                     now: 0.1, random: 0).contains { if case .disconnected(.lost, _, _) = $0 { true } else { false } })
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
}
