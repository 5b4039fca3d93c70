import Testing
@testable import RelayCore

/// The REST pool's machine driven event by event, as AsyncHTTPClient tests its pool's: each test feeds what the
/// loop would see and checks the exact actions that come back. Default numbers (6 connections, 6 extra, slow at
/// 200 ms, stalled at 1 s, held 60 s, 3 per group, idle 30 s, extra idle 5 s, a stall line per 10 s, connect 5 s).
/// No socket, no clock, no sleep.
@Suite struct HTTPPoolStateMachineTests {
    typealias Machine = HTTPPoolStateMachine
    typealias Action = HTTPPoolStateMachine.Action
    static let origin = Machine.OriginID(0)

    func call(_ number: Int, deadline: Int64 = 10_000, path: String = "/a", group: String? = nil,
              origin: Machine.OriginID = origin) -> Machine.Call {
        Machine.Call(id: id(number), origin: origin, group: group, request: Array("GET \(path)".utf8), deadline: deadline)
    }

    func id(_ number: Int) -> Machine.CallID { Machine.CallID(number) }
    func conn(_ number: Int) -> Machine.ConnectionID { Machine.ConnectionID(number) }

    /// A machine whose connection 1 has answered call 1 and is idle since `idleSince`: a reused connection.
    func withOneReusedConnection(idleSince: Int64 = 100, options: HTTPPoolPolicy.Options = .init()) -> Machine {
        var machine = Machine(policy: HTTPPoolPolicy(options: options))
        machine.callArrived(call(1))
        #expect(machine.turn(0) == [.connect(conn(1), Self.origin)])
        machine.connected(conn(1), now: 10)
        #expect(machine.turn(10) == [.send(id(1), on: conn(1))])
        #expect(machine.answered(conn(1), now: idleSince) == [.succeed(id(1))])
        #expect(machine.turn(idleSince) == [])
        return machine
    }

    // MARK: - Calls, connections and answers

    @Test func aCallOpensAConnectionAndGoesOnItOnceConnected() {
        var machine = Machine()
        #expect(machine.pollTimeout(now: 0) == -1)  // nothing at all: until woken
        machine.callArrived(call(1))
        #expect(machine.pollTimeout(now: 0) == 0)  // a call came: the loop takes a turn before it sleeps
        #expect(machine.turn(0) == [.connect(conn(1), Self.origin)])
        #expect(machine.pollTimeout(now: 0) == 5_000)  // the connect deadline, before the call's 10 s
        machine.connected(conn(1), now: 20)
        #expect(machine.turn(20) == [.send(id(1), on: conn(1))])
        #expect(machine.inFlight == 1)
        #expect(machine.answered(conn(1), now: 30) == [.succeed(id(1))])
        #expect(machine.turn(30) == [])
        #expect(machine.inFlight == 0)
        #expect(machine.pollTimeout(now: 30) == 5_000)  // idle: the extra-idle moment
    }

    @Test func theNextCallReusesTheIdleConnection() {
        var machine = withOneReusedConnection()
        machine.callArrived(call(2))
        #expect(machine.turn(200) == [.send(id(2), on: conn(1))])
    }

    @Test func anAnswerThatDoesNotKeepTheConnectionAliveClosesIt() {
        var machine = Machine()
        machine.callArrived(call(1))
        _ = machine.turn(0)
        machine.connected(conn(1), now: 0)
        _ = machine.turn(0)
        #expect(machine.answered(conn(1), reusable: false, now: 5) == [.succeed(id(1)), .close(conn(1), .notKeptAlive)])
        #expect(machine.connectionCount == 0)
    }

    @Test func theMostRecentlyUsedIdleConnectionIsTaken() {
        var machine = Machine()
        machine.callArrived(call(1))
        machine.callArrived(call(2, path: "/b"))
        #expect(machine.turn(0) == [.connect(conn(1), Self.origin), .connect(conn(2), Self.origin)])
        machine.connected(conn(1), now: 1)
        machine.connected(conn(2), now: 1)
        #expect(machine.turn(1) == [.send(id(1), on: conn(1)), .send(id(2), on: conn(2))])
        _ = machine.answered(conn(2), now: 10)
        _ = machine.answered(conn(1), now: 20)
        machine.callArrived(call(3))
        #expect(machine.turn(30) == [.send(id(3), on: conn(1))])  // idle since 20, not 10: the spare one ages out
    }

    @Test func callsBeyondTheLimitWaitAndGoInOrder() {
        var options = HTTPPoolPolicy.Options()
        options.maxConnectionsPerHost = 1
        options.extraConnectionsPerHost = 0
        var machine = withOneReusedConnection(options: options)
        machine.callArrived(call(2))
        machine.callArrived(call(3))
        #expect(machine.turn(200) == [.send(id(2), on: conn(1))])
        #expect(machine.waitingCount == 1)
        _ = machine.answered(conn(1), now: 210)
        #expect(machine.turn(210) == [.send(id(3), on: conn(1))])
    }

    @Test func anIdleConnectionTheServerClosedIsDropped() {
        var machine = withOneReusedConnection()
        #expect(machine.idleClosed(conn(1), "peer closed the socket") == [.close(conn(1), .failed("peer closed the socket"))])
        machine.callArrived(call(2))
        #expect(machine.turn(200) == [.connect(conn(2), Self.origin)])
    }

    // MARK: - The one resend on a reused connection

    @Test func aReusedConnectionThatFailsBeforeAnyByteIsRetriedOnceOnAFreshOne() {
        var machine = withOneReusedConnection()
        machine.callArrived(call(2))
        _ = machine.turn(200)
        #expect(machine.requestFailed(conn(1), "peer closed the socket", beforeAnyByte: true)
            == [.close(conn(1), .failed("peer closed the socket")), .retry(id(2), reason: "peer closed the socket")])
        #expect(machine.pollTimeout(now: 200) == 0)
        #expect(machine.turn(200) == [.connect(conn(2), Self.origin)])
        machine.connected(conn(2), now: 210)
        #expect(machine.turn(210) == [.send(id(2), on: conn(2))])
        // A second failure, even before any byte, is the caller's: one resend only.
        #expect(machine.requestFailed(conn(2), "reset", beforeAnyByte: true)
            == [.close(conn(2), .failed("reset")), .fail(id(2), .connectionLost("reset"))])
    }

    @Test func aRetriedCallSkipsReusedIdleConnectionsAndClosesOneAtTheLimit() {
        var options = HTTPPoolPolicy.Options()
        options.maxConnectionsPerHost = 1
        options.extraConnectionsPerHost = 1
        var machine = withOneReusedConnection(idleSince: 10, options: options)
        machine.callArrived(call(2))
        #expect(machine.turn(20) == [.send(id(2), on: conn(1))])
        machine.callArrived(call(3, path: "/b"))
        #expect(machine.turn(300) == [.connect(conn(2), Self.origin)])  // call 2 is slow: one extra
        machine.connected(conn(2), now: 300)
        #expect(machine.turn(300) == [.send(id(3), on: conn(2))])
        _ = machine.answered(conn(2), now: 310)
        _ = machine.requestFailed(conn(1), "reset", beforeAnyByte: true)
        // Back at the normal size (nothing slow), connection 2 is idle but has answered before: it makes room for a
        // fresh one.
        #expect(machine.turn(310) == [.close(conn(2), .makingRoom), .connect(conn(3), Self.origin)])
        machine.connected(conn(3), now: 320)
        #expect(machine.turn(320) == [.send(id(2), on: conn(3))])
    }

    @Test func aFreshConnectionOrAPartAnswerFailsTheCall() {
        var machine = Machine()
        machine.callArrived(call(1))
        _ = machine.turn(0)
        machine.connected(conn(1), now: 0)
        _ = machine.turn(0)
        #expect(machine.requestFailed(conn(1), "reset", beforeAnyByte: true)
            == [.close(conn(1), .failed("reset")), .fail(id(1), .connectionLost("reset"))])
        var reused = withOneReusedConnection()
        reused.callArrived(call(2))
        _ = reused.turn(200)
        #expect(reused.requestFailed(conn(1), "protocol error", beforeAnyByte: false)
            == [.close(conn(1), .failed("protocol error")), .fail(id(2), .connectionLost("protocol error"))])
    }

    // MARK: - Connects

    @Test func aFailedConnectFailsTheOldestWaitingCall() {
        var machine = Machine()
        machine.callArrived(call(1))
        machine.callArrived(call(2, path: "/b"))
        _ = machine.turn(0)
        #expect(machine.connectFailed(conn(1), "connection refused") == [.fail(id(1), .connectFailed("connection refused"))])
        #expect(machine.connectFailed(conn(2), "connection refused") == [.fail(id(2), .connectFailed("connection refused"))])
        #expect(machine.connectionCount == 0)
    }

    @Test func aConnectPastItsDeadlineIsAbortedAndFailsACall() {
        var machine = Machine(connectTimeoutMs: 500)
        machine.callArrived(call(1, deadline: 60_000))
        _ = machine.turn(0)
        #expect(machine.turn(499) == [])
        #expect(machine.turn(500) == [.abortConnect(conn(1)), .fail(id(1), .connectTimedOut)])
    }

    // MARK: - Deadlines and abandoned requests

    @Test func aCallWithNoConnectionFreeFailsAtItsDeadline() {
        var options = HTTPPoolPolicy.Options()
        options.maxConnectionsPerHost = 1
        options.extraConnectionsPerHost = 0
        var machine = withOneReusedConnection(options: options)
        machine.callArrived(call(2, deadline: 60_000))
        machine.callArrived(call(3, deadline: 1_000, path: "/b"))
        _ = machine.turn(200)
        #expect(machine.pollTimeout(now: 200) == 200)  // the moment call 2 turns slow, before call 3's deadline
        #expect(machine.turn(1_000) == [.fail(id(3), .noConnectionFree)])
    }

    @Test func aSentCallPastItsDeadlineIsAbandonedAndARepeatJoinsIt() {
        var machine = withOneReusedConnection()
        machine.callArrived(call(2, deadline: 1_000))
        _ = machine.turn(200)
        #expect(machine.turn(1_000) == [.abandon(id(2), on: conn(1))])
        // The same request again waits for the open copy; another request opens a connection of its own.
        machine.callArrived(call(3, deadline: 20_000))
        machine.callArrived(call(4, deadline: 20_000, path: "/b"))
        #expect(machine.turn(1_100) == [.join(id(3), on: conn(1)), .connect(conn(2), Self.origin)])
        #expect(machine.answered(conn(1), now: 2_000) == [.succeed(id(3))])  // call 2's caller has had its answer
    }

    @Test func aRepeatPastItsDeadlineFails() {
        var machine = withOneReusedConnection()
        machine.callArrived(call(2, deadline: 1_000))
        _ = machine.turn(200)
        _ = machine.turn(1_000)
        machine.callArrived(call(3, deadline: 3_000))
        _ = machine.turn(1_000)
        _ = machine.turn(1_200)  // call 2's request stalls
        #expect(machine.pollTimeout(now: 1_200) == 1_800)  // call 3's deadline
        #expect(machine.turn(3_000) == [.fail(id(3), .timedOut)])
    }

    @Test func anAbandonedRequestIsHeldAMinuteThenItsRepeatsGoOnTheirOwn() {
        var machine = withOneReusedConnection()
        machine.callArrived(call(2, deadline: 1_000))
        _ = machine.turn(200)
        _ = machine.turn(1_000)
        machine.callArrived(call(3, deadline: 120_000))
        _ = machine.turn(1_000)
        #expect(machine.pollTimeout(now: 1_000) == 200)  // its stall moment comes first; its hold ends at 60_200
        #expect(machine.turn(60_200) == [.close(conn(1), .holdOver), .connect(conn(2), Self.origin)])
    }

    @Test func atTheHardCapAnAbandonedRequestNobodyWaitsOnGivesWay() {
        var options = HTTPPoolPolicy.Options()
        options.maxConnectionsPerHost = 1
        options.extraConnectionsPerHost = 1
        var machine = Machine(policy: HTTPPoolPolicy(options: options))
        machine.callArrived(call(1, deadline: 1_000))
        _ = machine.turn(0)
        machine.connected(conn(1), now: 0)
        _ = machine.turn(0)
        machine.callArrived(call(2, deadline: 1_000, path: "/b"))
        #expect(machine.turn(200) == [.connect(conn(2), Self.origin)])  // call 1 is slow: one extra
        machine.connected(conn(2), now: 200)
        #expect(machine.turn(200) == [.send(id(2), on: conn(2))])
        #expect(machine.turn(1_000) == [.abandon(id(1), on: conn(1)), .abandon(id(2), on: conn(2)), .countStalled(1),
                                        .warnStalled(.init(oldest: conn(1), origin: Self.origin, oldestMs: 1_000,
                                                           stalled: 1, newlyStalled: 1, inFlight: 2, waiting: 0))])
        machine.callArrived(call(3, deadline: 5_000, path: "/c"))
        #expect(machine.turn(1_100) == [.close(conn(1), .makingRoomForWaiting), .connect(conn(3), Self.origin)])
    }

    /// Found by the Pool fuzz harness: the first plan opens up to the limit, and only a second one (the limit now
    /// reached) gives the abandoned request's connection to the other call. Both happen in one turn, so the loop
    /// never sleeps with a plan pending.
    @Test func oneTurnCarriesOutEveryPlanItsWaitingCallsNeed() {
        var options = HTTPPoolPolicy.Options()
        options.maxConnectionsPerHost = 2
        options.extraConnectionsPerHost = 0
        var machine = Machine(policy: HTTPPoolPolicy(options: options))
        machine.callArrived(call(1, deadline: 1_000))
        _ = machine.turn(0)
        machine.connected(conn(1), now: 0)
        #expect(machine.turn(0) == [.send(id(1), on: conn(1))])
        machine.callArrived(call(2, path: "/b"))
        machine.callArrived(call(3, path: "/c"))
        #expect(machine.turn(1_000) == [.abandon(id(1), on: conn(1)), .connect(conn(2), Self.origin),
                                        .close(conn(1), .makingRoomForWaiting), .connect(conn(3), Self.origin)])
        #expect(machine.turn(1_000) == [])
    }

    // MARK: - Limits

    @Test func slowRequestsMakeRoomForExtraConnections() {
        var options = HTTPPoolPolicy.Options()
        options.maxConnectionsPerHost = 1
        var machine = withOneReusedConnection(options: options)
        machine.callArrived(call(2))
        machine.callArrived(call(3, path: "/b"))
        #expect(machine.turn(1_000) == [.send(id(2), on: conn(1))])
        #expect(machine.pollTimeout(now: 1_000) == 200)  // the moment call 2 turns slow
        #expect(machine.turn(1_200) == [.connect(conn(2), Self.origin)])
    }

    @Test func aGroupTakesThreeConnectionsAtMost() {
        var machine = Machine()
        for number in 1...4 { machine.callArrived(call(number, path: "/\(number)", group: "run")) }
        machine.callArrived(call(5, path: "/other"))
        // Nothing of the group is open yet, so each call asks for a connection.
        #expect(machine.turn(0) == (1...5).map { .connect(conn($0), Self.origin) })
        for number in 1...5 { machine.connected(conn(number), now: 1) }
        #expect(machine.turn(1) == [.send(id(1), on: conn(1)), .send(id(2), on: conn(2)), .send(id(3), on: conn(3)),
                                    .send(id(5), on: conn(4))])
        _ = machine.answered(conn(1), now: 5)
        #expect(machine.turn(5) == [.send(id(4), on: conn(1))])
    }

    @Test func idleConnectionsCloseAfter30sOrAfter5sBeyondTheNormalSize() {
        var machine = withOneReusedConnection(idleSince: 0)
        #expect(machine.turn(29_999) == [])
        #expect(machine.turn(30_000) == [.close(conn(1), .idle("idle"))])
        #expect(machine.pollTimeout(now: 30_000) == -1)
    }

    // MARK: - Stalls

    @Test func stalledRequestsAreCountedOnceAndWarnedOfEvery10s() {
        var machine = withOneReusedConnection()
        machine.callArrived(call(2, deadline: 100_000))
        _ = machine.turn(1_000)
        #expect(machine.pollTimeout(now: 1_000) == 1_000)  // the stall moment
        let report = HTTPPoolStateMachine.StallReport(oldest: conn(1), origin: Self.origin, oldestMs: 1_000, stalled: 1,
                                                      newlyStalled: 1, inFlight: 1, waiting: 0)
        #expect(machine.turn(2_000) == [.countStalled(1), .warnStalled(report)])
        #expect(machine.pollTimeout(now: 2_000) == 10_000)  // the next warning
        #expect(machine.turn(11_999) == [])
        var later = report
        later.oldestMs = 11_000
        later.newlyStalled = 0
        #expect(machine.turn(12_000) == [.warnStalled(later)])
    }

    // MARK: - Shutdown

    @Test func shuttingDownFailsEveryCallerAndClosesEverything() {
        var machine = withOneReusedConnection()
        machine.callArrived(call(2, deadline: 1_000))
        _ = machine.turn(200)
        _ = machine.turn(1_000)  // call 2 abandoned
        machine.callArrived(call(3))
        machine.callArrived(call(4, path: "/b"))
        _ = machine.turn(1_000)  // 3 joins, 4 opens connection 2
        machine.callArrived(call(5, path: "/c"))
        var actions: [Action] = []
        machine.shutDown(into: &actions)
        #expect(actions == [.fail(id(3), .shuttingDown), .close(conn(1), .shuttingDown), .abortConnect(conn(2)),
                            .fail(id(4), .shuttingDown), .fail(id(5), .shuttingDown)])
        #expect(machine.connectionCount == 0 && machine.waitingCount == 0)
    }
}

/// The events as functions that return their actions, for tests that read better that way.
extension HTTPPoolStateMachine {
    mutating func turn(_ now: Int64) -> [Action] {
        var actions: [Action] = []
        turn(now: now, into: &actions)
        return actions
    }

    mutating func answered(_ id: ConnectionID, reusable: Bool = true, now: Int64) -> [Action] {
        var actions: [Action] = []
        answered(id, reusable: reusable, now: now, into: &actions)
        return actions
    }

    mutating func requestFailed(_ id: ConnectionID, _ reason: String, beforeAnyByte: Bool) -> [Action] {
        var actions: [Action] = []
        requestFailed(id, reason, beforeAnyByte: beforeAnyByte, into: &actions)
        return actions
    }

    mutating func connectFailed(_ id: ConnectionID, _ reason: String) -> [Action] {
        var actions: [Action] = []
        connectFailed(id, reason, into: &actions)
        return actions
    }

    mutating func idleClosed(_ id: ConnectionID, _ reason: String) -> [Action] {
        var actions: [Action] = []
        idleClosed(id, reason, into: &actions)
        return actions
    }
}
