import Testing
@testable import RelayCore

/// The REST pool's policy (`HTTPPoolPolicy`) with its default numbers (6 connections, 6 extra, slow at 200 ms,
/// stalled at 1 s, an abandoned request held 60 s, 3 per group, idle 30 s, extra idle 5 s, a stall line per 10 s),
/// decided from values and a time in ms. No socket, no clock, no sleep.
@Suite struct HTTPPoolPolicyTests {
    let policy = HTTPPoolPolicy()

    private func busy(sentAt: Int64, abandoned: Bool = false) -> HTTPPoolPolicy.Connection {
        .busy(HTTPPoolPolicy.OpenRequest(sentAt: sentAt, deadline: sentAt + 10_000, abandoned: abandoned))
    }

    @Test func anIdleConnectionGoesAfter30sOrAfter5sBeyondTheNormalSize() {
        #expect(policy.idleClose(since: 0, openToOrigin: 6, now: 29_999) == nil)
        #expect(policy.idleClose(since: 0, openToOrigin: 6, now: 30_000) == "idle")
        #expect(policy.idleClose(since: 0, openToOrigin: 7, now: 4_999) == nil)
        #expect(policy.idleClose(since: 0, openToOrigin: 7, now: 5_000) == "idle beyond the pool's normal size")
    }

    @Test func anAbandonedRequestHoldsItsConnectionAMinute() {
        let open = HTTPPoolPolicy.OpenRequest(sentAt: 1_000, deadline: 11_000, abandoned: true)
        #expect(!policy.holdIsOver(open, now: 60_999))
        #expect(policy.holdIsOver(open, now: 61_000))
        // A request whose caller still waits is never closed for holding.
        #expect(!policy.holdIsOver(HTTPPoolPolicy.OpenRequest(sentAt: 1_000, deadline: 200_000), now: 100_000))
    }

    @Test func slowRequestsMakeRoomForExtraConnectionsUpToSix() {
        #expect(!policy.isSlow(sentAt: 1_000, now: 1_199))
        #expect(policy.isSlow(sentAt: 1_000, now: 1_200))
        #expect(policy.limit(slow: 0) == 6)
        #expect(policy.limit(slow: 2) == 8)
        #expect(policy.limit(slow: 6) == 12)  // all six slow: six more
        #expect(policy.limit(slow: 9) == 12)  // capped at 6 extra
    }

    @Test func aGroupTakesThreeRequestsAtOnce() {
        #expect(!policy.groupIsFull(open: 2))
        #expect(policy.groupIsFull(open: 3))
    }

    @Test func waitingCallsOpenConnectionsUpToTheLimit() {
        #expect(policy.plan(needed: 3, open: 2, limit: 6, idle: 0, abandoned: 0) == HTTPPoolPolicy.Plan(open: 3))
        #expect(policy.plan(needed: 9, open: 2, limit: 6, idle: 0, abandoned: 0) == HTTPPoolPolicy.Plan(open: 4))
        #expect(policy.plan(needed: 0, open: 0, limit: 6, idle: 0, abandoned: 0) == HTTPPoolPolicy.Plan())
        // Calls already served by connections being opened need none (needed counts those out, and may go below 0).
        #expect(policy.plan(needed: -1, open: 6, limit: 6, idle: 1, abandoned: 1) == HTTPPoolPolicy.Plan())
    }

    @Test func atTheLimitIdleConnectionsMakeRoomForAFreshOne() {
        // A retried call must go on a fresh connection: the idle, reused ones close for it.
        #expect(policy.plan(needed: 1, open: 6, limit: 6, idle: 2, abandoned: 0)
            == HTTPPoolPolicy.Plan(closeIdle: 1, open: 1))
        #expect(policy.plan(needed: 1, open: 7, limit: 6, idle: 3, abandoned: 0)
            == HTTPPoolPolicy.Plan(closeIdle: 2, open: 1))
    }

    @Test func onlyAtTheHardCapDoAbandonedRequestsGiveUpTheirConnections() {
        // Below the hard cap (12), slow requests still make room by themselves: abandoned ones keep their connection.
        #expect(policy.plan(needed: 2, open: 8, limit: 8, idle: 0, abandoned: 3) == HTTPPoolPolicy.Plan())
        #expect(policy.plan(needed: 2, open: 12, limit: 12, idle: 0, abandoned: 3)
            == HTTPPoolPolicy.Plan(closeAbandoned: 1, open: 1))
    }

    @Test func aRequestStallsAfterASecondAndTheWarningComesOncePer10s() {
        #expect(!policy.isStalled(sentAt: 0, now: 999))
        #expect(policy.isStalled(sentAt: 0, now: 1_000))
        #expect(policy.stallWarningDue(now: 5, lastWarning: nil))
        #expect(!policy.stallWarningDue(now: 9_999, lastWarning: 0))
        #expect(policy.stallWarningDue(now: 10_000, lastWarning: 0))
    }

    /// The poll() timeout at `now` for these callers' deadlines, connections and connects' deadlines, gathered as
    /// `HTTPPoolStateMachine.pollTimeout` gathers it from its own state.
    private func wakeAfter(now: Int64, calls: [Int64] = [], _ connections: [HTTPPoolPolicy.Connection] = [],
                       connects: [Int64] = []) -> Int64 {
        var wake = HTTPPoolPolicy.Wake(now: now)
        calls.forEach { wake.at($0) }
        for connection in connections {
            policy.wake(&wake, for: connection, callsWait: !calls.isEmpty, lastStallWarning: nil)
        }
        connects.forEach { wake.at($0) }
        return wake.timeout
    }

    @Test func theLoopSleepsUntilTheSoonestMoment() {
        #expect(wakeAfter(now: 0) == -1)  // nothing at all: until woken
        // An idle connection: its extra-idle moment, then its idle timeout.
        #expect(wakeAfter(now: 1_000, [.idle(since: 0)]) == 4_000)
        #expect(wakeAfter(now: 6_000, [.idle(since: 0)]) == 24_000)
        // A busy connection with a call waiting: the moment its request turns slow.
        #expect(wakeAfter(now: 100, calls: [50_000], [busy(sentAt: 0)]) == 100)
        // Without a waiting call, slowness doesn't matter: the stall moment.
        #expect(wakeAfter(now: 100, [busy(sentAt: 0)]) == 900)
        // An abandoned request: its hold, not its caller's deadline (long past).
        #expect(wakeAfter(now: 20_000, [busy(sentAt: 0, abandoned: true)]) == 40_000)
        // A connect's deadline, and a caller's deadline already past: at once.
        #expect(wakeAfter(now: 100, connects: [350]) == 250)
        #expect(wakeAfter(now: 100, calls: [50]) == 0)
    }
}
