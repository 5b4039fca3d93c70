import Testing
@testable import RelayCore

/// The APNs connection loop's policy (`APNsLinkPolicy`): deadlines, connects, PINGs, stream limits and the loop's
/// sleep, decided from facts and a time in ms. No socket, no clock, no sleep.
@Suite struct APNsLinkPolicyTests {
    typealias Link = APNsLinkPolicy.Link

    @Test func deadlinesAreCheckedEveryFiftyMilliseconds() {
        var policy = APNsLinkPolicy()
        #expect(policy.turn(now: 1_000, waiting: true, linkOpen: true).expireDeadlines)
        #expect(!policy.turn(now: 1_030, waiting: true, linkOpen: true).expireDeadlines)
        #expect(policy.turn(now: 1_050, waiting: true, linkOpen: true).expireDeadlines)
    }

    @Test func aLinkIsOpenedOnlyForWaitingPushesAndASecondAfterAFailure() {
        var policy = APNsLinkPolicy()
        #expect(!policy.turn(now: 0, waiting: false, linkOpen: false).connect)  // nothing to send: no link
        #expect(policy.turn(now: 0, waiting: true, linkOpen: false).connect)
        #expect(!policy.turn(now: 0, waiting: true, linkOpen: true).connect)
        policy.connectFailed(now: 100)
        #expect(!policy.turn(now: 1_099, waiting: true, linkOpen: false).connect)
        #expect(policy.turn(now: 1_100, waiting: true, linkOpen: false).connect)
        // A link that failed waits the same; one retired by a GOAWAY is replaced at once.
        policy.retired(failed: true, now: 5_000)
        #expect(!policy.turn(now: 5_500, waiting: true, linkOpen: false).connect)
        policy.retired(failed: false, now: 7_000)
        #expect(policy.turn(now: 7_000, waiting: true, linkOpen: false).connect)
    }

    @Test func aQuietLinkIsPingedAfter45sAndABusyOneAfter3s() {
        let policy = APNsLinkPolicy()
        let idle = Link(lastReadAt: 10_000)
        #expect(policy.health(of: idle, now: 54_999) == .fine)
        #expect(policy.health(of: idle, now: 55_000) == .ping)
        let busy = Link(lastReadAt: 10_000, openStreams: 3)
        #expect(policy.health(of: busy, now: 12_999) == .fine)
        #expect(policy.health(of: busy, now: 13_000) == .ping)
    }

    @Test func anUnansweredPingFailsTheLinkAfterItsTimeout() {
        let policy = APNsLinkPolicy()
        let pinged = Link(lastReadAt: 0, pingSentAt: 20_000, openStreams: 1)
        #expect(policy.health(of: pinged, now: 24_999) == .fine)  // no second PING while one is out
        #expect(policy.health(of: pinged, now: 25_000) == .failed("no PING ack in 5000 ms"))
    }

    @Test func oneStreamUntilTheTokenIsProvenThenThePeersLimitUpToTheCap() {
        var options = APNsLinkPolicy.Options()
        options.maxConcurrentStreams = 500
        let policy = APNsLinkPolicy(options: options)
        #expect(policy.streamLimit(of: Link(lastReadAt: 0, confirmed: false, peerStreamLimit: 1_000)) == 1)
        #expect(policy.streamLimit(of: Link(lastReadAt: 0, confirmed: true, peerStreamLimit: 100)) == 100)
        #expect(policy.streamLimit(of: Link(lastReadAt: 0, confirmed: true, peerStreamLimit: 1_000)) == 500)
        #expect(policy.streamLimit(of: Link(lastReadAt: 0, confirmed: true, peerStreamLimit: 0)) == 1)
    }

    @Test func theLoopSleepsUntilItsNextDecision() {
        var policy = APNsLinkPolicy()
        // Nothing waits and no link: until woken.
        #expect(policy.pollTimeout(now: 0, waiting: false, link: nil) == -1)
        _ = policy.turn(now: 1_000, waiting: true, linkOpen: false)  // next deadline check at 1,050
        policy.connectFailed(now: 1_000)  // next connect at 2,000
        #expect(policy.pollTimeout(now: 1_010, waiting: true, link: nil) == 40)
        #expect(policy.pollTimeout(now: 1_060, waiting: true, link: nil) == 0)  // the check is due
        // An idle link: its PING; a PING out: its deadline.
        #expect(policy.pollTimeout(now: 1_010, waiting: false, link: Link(lastReadAt: 1_000)) == 45_000 - 10)
        #expect(policy.pollTimeout(now: 1_010, waiting: false, link: Link(lastReadAt: 0, pingSentAt: 1_000)) == 4_990)
        // Open streams: the deadline check and the busy PING, the sooner.
        #expect(policy.pollTimeout(now: 1_010, waiting: false, link: Link(lastReadAt: 1_000, openStreams: 1)) == 40)
    }
}
