import Testing
@testable import RelayCore

/// The APNs connection's decisions, driven event by event without a socket or a clock.
@Suite struct APNsConnectionMachineTests {
    private let session = APNsConnectionMachine.Session(peerStreamLimit: 100)

    private func open(_ options: APNsLinkPolicy.Options = .init()) -> APNsConnectionMachine {
        var machine = APNsConnectionMachine(options: options)
        machine.connected(now: 0)
        return machine
    }

    @Test func anAnsweredStreamIsAnsweredAndA200LiftsTheStreamLimit() {
        var machine = open()
        #expect(machine.room(session) == 1)  // one stream until the provider token is proven
        machine.submitted(1, deadline: 10_000)
        #expect(machine.room(session) == 0)
        machine.headersSent(1)
        #expect(machine.streamClosed(1, status: 200, refused: false, error: "") == .answered)
        #expect(machine.room(session) == 100)
        #expect(machine.streamClosed(1, status: 200, refused: false, error: "") == nil)  // ended once
    }

    /// The machine knows no purposes: a stream APNs never saw goes again whatever it carries (`DeliveryTable`'s
    /// `neverProcessed` row).
    @Test func aStreamAPNsNeverSawIsResent() {
        var machine = open()
        machine.submitted(1, deadline: 10_000)
        #expect(machine.streamClosed(1, status: nil, refused: false, error: "x") == .resend)  // HEADERS never out
        machine.submitted(3, deadline: 10_000)
        machine.headersSent(3)
        #expect(machine.streamClosed(3, status: nil, refused: true, error: "REFUSED_STREAM") == .resend)
        machine.submitted(5, deadline: 10_000)
        #expect(machine.headersNotSent(5) == .resend)
    }

    @Test func aSentStreamResetOrCutOffIsLostNotResent() {
        var machine = open()
        machine.submitted(1, deadline: 10_000)
        machine.headersSent(1)
        #expect(machine.streamClosed(1, status: nil, refused: false, error: "CANCEL") == .lost("stream reset: CANCEL"))
        machine.submitted(3, deadline: 10_000)
        machine.headersSent(3)
        machine.submitted(5, deadline: 10_000)
        let ends = machine.linkClosed(reason: "reset by peer", now: 100)
        #expect(ends.map(\.0) == [3, 5])
        #expect(ends[0].1 == .lost("reset by peer"))
        #expect(ends[1].1 == .resend)  // never went out
        #expect(!machine.hasLink)
    }

    @Test func aboveAGoawaysLastStreamIdNothingIsDeliveredOrLost() {
        var machine = open()
        for id: Int32 in [1, 3, 5, 7] {
            machine.submitted(id, deadline: 10_000)
            machine.headersSent(id)
        }
        machine.goaway(lastStreamID: 3)
        #expect(machine.room(session) == 0)  // no new streams on a link going away
        #expect(machine.streamClosed(5, status: nil, refused: false, error: "CANCEL") == .resend)
        #expect(machine.streamClosed(3, status: nil, refused: false, error: "CANCEL") == .lost("stream reset: CANCEL"))
        let ends = machine.linkClosed(reason: "GOAWAY", now: 100)
        #expect(ends.map(\.0) == [1, 7])
        #expect(ends[0].1 == .lost("GOAWAY"))
        #expect(ends[1].1 == .resend)
    }

    @Test func deadlinesEndStreamsOnceAndOnlyThoseDue() {
        var machine = open()
        machine.submitted(1, deadline: 1_000)
        machine.submitted(3, deadline: 2_000)
        machine.headersSent(1)
        #expect(machine.expire(now: 999).isEmpty)
        let first = machine.expire(now: 1_000)
        #expect(first.map(\.0) == [1] && first.map(\.1) == [.timedOut])
        #expect(machine.expire(now: 1_500).isEmpty)
        #expect(machine.streamClosed(1, status: nil, refused: false, error: "CANCEL") == nil)  // already timed out
        #expect(machine.openStreams == 1)
    }

    /// A stream whose deadline passes before its HEADERS went out was never seen: its caller may send it again.
    @Test func aStreamThatExpiresUnsentIsNotAnUnknownFate() {
        var machine = open()
        machine.submitted(1, deadline: 1_000)
        let ends = machine.expire(now: 1_000)
        #expect(ends.map(\.0) == [1] && ends.map(\.1) == [.expiredUnsent])
    }

    @Test func aConnectFailureBacksOffAndASuccessResetsIt() {
        var options = APNsLinkPolicy.Options()
        options.reconnectDelayMs = 1_000
        var machine = APNsConnectionMachine(options: options)
        #expect(machine.turn(now: 0, waiting: true).connect)
        #expect(machine.connectFailed(now: 0, random: 0) == 1_000)
        #expect(!machine.turn(now: 999, waiting: true).connect)
        #expect(machine.turn(now: 1_000, waiting: true).connect)
        #expect(machine.connectFailed(now: 1_000, random: 0) == 2_000)
        #expect(machine.connectFailed(now: 3_000, random: 0) == 4_000)
        #expect(machine.connectFailed(now: 7_000, random: 0) == 4_000)  // capped at four times the gap
        #expect(machine.connectFailed(now: 11_000, random: 0.99) >= 1_000)  // jitter never below the gap
        #expect(!machine.turn(now: 11_500, waiting: true).connect)
        machine.connected(now: 20_000)
        #expect(machine.connectFailures == 0)
        #expect(!machine.turn(now: 20_000, waiting: true).connect)  // a link is open
    }

    @Test func aFailedLinkIsRetiredAndItsReplacementWaits() {
        var machine = open()
        machine.failed("broken pipe")
        machine.failed("second words are ignored")
        #expect(machine.room(session) == 0)
        #expect(machine.upkeep(now: 10, session: session) == .retire("broken pipe"))
        _ = machine.linkClosed(reason: "broken pipe", now: 10)
        #expect(!machine.turn(now: 500, waiting: true).connect)
        #expect(machine.turn(now: 1_010, waiting: true).connect)
    }

    @Test func aGoawayLinkIsRetiredOnceItsStreamsAreDoneAndReplacedAtOnce() {
        var machine = open()
        machine.submitted(1, deadline: 10_000)
        machine.goaway(lastStreamID: 1)
        #expect(machine.upkeep(now: 10, session: session) == .none)
        _ = machine.streamClosed(1, status: 200, refused: false, error: "")
        #expect(machine.upkeep(now: 10, session: session) == .retire("connection finished"))
        _ = machine.linkClosed(reason: "connection finished", now: 10)
        #expect(machine.turn(now: 10, waiting: true).connect)
    }

    @Test func aQuietLinkIsPingedAndAnUnansweredPingCondemnsIt() {
        var machine = open()
        #expect(machine.upkeep(now: 44_999, session: session) == .none)
        #expect(machine.upkeep(now: 45_000, session: session) == .ping)
        machine.pingSent(now: 45_000)
        #expect(machine.upkeep(now: 46_000, session: session) == .none)
        machine.pingAcknowledged()
        machine.read(now: 46_000)
        #expect(machine.upkeep(now: 47_000, session: session) == .none)
        #expect(machine.upkeep(now: 91_000, session: session) == .ping)
        machine.pingSent(now: 91_000)
        guard case .retire = machine.upkeep(now: 96_000, session: session) else {
            Issue.record("an unanswered PING must retire the link")
            return
        }
    }

    @Test func recyclingStopsNewStreamsButLetsTheOpenOnesFinish() {
        var machine = open()
        machine.submitted(1, deadline: 10_000)
        machine.stopNewStreams()
        #expect(machine.room(session) == 0)
        #expect(machine.streamClosed(1, status: 403, refused: false, error: "") == .answered)
        #expect(machine.upkeep(now: 5, session: session) == .retire("connection finished"))
    }

    @Test func directSendsOnlyOnAHealthyLinkWithNothingQueuedAndRoomForAll() {
        var machine = open()
        machine.submitted(1, deadline: 10_000)
        _ = machine.streamClosed(1, status: 200, refused: false, error: "")
        #expect(machine.maySendDirectly(8, queued: 0, session: session))
        #expect(!machine.maySendDirectly(8, queued: 1, session: session))
        #expect(!machine.maySendDirectly(8, queued: 0, session: .init(requestAllowed: false)))
        #expect(!machine.maySendDirectly(8, queued: 0, session: .init(peerStreamLimit: 4)))
        machine.failed("x")
        #expect(!machine.maySendDirectly(1, queued: 0, session: session))
        #expect(!APNsConnectionMachine().maySendDirectly(1, queued: 0, session: session))  // no link
    }

    @Test func theLoopSleepsUntilTheNextThingDue() {
        var machine = APNsConnectionMachine()
        #expect(machine.pollTimeout(now: 0, waiting: false, session: session) == -1)  // nothing to do: until woken
        _ = machine.turn(now: 0, waiting: true)
        _ = machine.connectFailed(now: 0, random: 0)
        #expect(machine.pollTimeout(now: 0, waiting: true, session: session) == 50)  // the deadline check comes first
        machine.connected(now: 2_000)
        #expect(machine.pollTimeout(now: 2_000, waiting: false, session: session) == 45_000)  // the idle PING
    }
}
