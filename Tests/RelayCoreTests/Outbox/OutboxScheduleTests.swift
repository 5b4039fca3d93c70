import Testing
@testable import RelayCore

/// When a stored push is tried again, and when it is let go.
@Suite struct OutboxScheduleTests {
    let backoff = Backoff(initial: 1, maximum: 30, jitter: 0)

    private func verdict(_ outcome: APNsOutcome, _ purpose: PushPurpose = .alert, attempts: Int, expiresAt: Int64,
                         now: Double) -> OutboxVerdict {
        .after(outcome, purpose: purpose, attempts: attempts, expiresAt: expiresAt, now: now, random: 0, backoff: backoff)
    }

    private func rejected(_ status: Int, _ reason: String? = nil, retryAfter: Int? = nil) -> APNsOutcome {
        .rejected(APNsRejection(status: status, reason: reason.map(APNsReason.init(rawValue:)), retryAfter: retryAfter))
    }

    @Test func deliveredAndRefusedPushesAreSettled() {
        for outcome in [APNsOutcome.delivered(apnsID: nil), rejected(410, "Unregistered"), rejected(400, "BadDeviceToken"),
                        rejected(400, "PayloadTooLarge"), rejected(403, "InvalidProviderToken")] {
            #expect(verdict(outcome, attempts: 1, expiresAt: 10_000, now: 100) == .settled)
        }
    }

    @Test func serverTroubleAndLostAnswersAreRetriedWithDoublingWaits() {
        for outcome in [rejected(503), rejected(500), rejected(429), APNsOutcome.timedOut, .connectionLost("reset"),
                        .unreachable("refused")] {
            #expect(verdict(outcome, attempts: 1, expiresAt: 10_000, now: 100) == .retry(at: 101))
        }
        for purpose in [PushPurpose.reminder, .update, .end] {
            #expect(verdict(.timedOut, purpose, attempts: 1, expiresAt: 10_000, now: 100) == .retry(at: 101))
        }
        let waits = (1...7).map { verdict(rejected(503), attempts: $0, expiresAt: 10_000, now: 0) }
        #expect(waits == [1, 2, 4, 8, 16, 30, 30].map { OutboxVerdict.retry(at: $0) })
    }

    /// A start that may have arrived is not sent again (a second activity for the run); one APNs never saw, or
    /// that APNs asked us to send later, is.
    @Test func aStartWhoseFateIsUnknownIsSettledNotRepeated() {
        for outcome in [APNsOutcome.timedOut, .connectionLost("reset")] {
            #expect(verdict(outcome, .start, attempts: 1, expiresAt: 10_000, now: 100) == .settled)
            #expect(verdict(outcome, .test, attempts: 1, expiresAt: 10_000, now: 100) == .settled)
        }
        #expect(verdict(.unreachable("refused"), .start, attempts: 1, expiresAt: 10_000, now: 100) == .retry(at: 101))
        #expect(verdict(rejected(503), .start, attempts: 1, expiresAt: 10_000, now: 100) == .retry(at: 101))
    }

    @Test func retryAfterIsHonouredWhenLongerThanTheBackoff() {
        #expect(verdict(rejected(429, "TooManyRequests", retryAfter: 30), attempts: 1, expiresAt: 10_000, now: 100)
            == .retry(at: 130))
        #expect(verdict(rejected(503, retryAfter: 1), attempts: 4, expiresAt: 10_000, now: 100)
            == .retry(at: 108))
    }

    @Test func aPushIsLetGoAtItsExpiry() {
        #expect(verdict(rejected(503), attempts: 1, expiresAt: 100, now: 99.5) == .settled)
        #expect(verdict(.timedOut, attempts: 1, expiresAt: 101, now: 99.5) == .retry(at: 100.5))
    }

    @Test func retryAfterHeaderValues() {
        #expect(RetryAfter.seconds("30") == 30)
        #expect(RetryAfter.seconds(" 5 ") == 5)
        #expect(RetryAfter.seconds("0") == 0)
        #expect(RetryAfter.seconds("99999999") == RetryAfter.longest)
        #expect(RetryAfter.seconds("Wed, 21 Oct 2015 07:28:00 GMT") == nil)
        #expect(RetryAfter.seconds("-1") == nil)
        #expect(RetryAfter.seconds("") == nil)
        #expect(RetryAfter.seconds("12345678901234567890") == nil)
    }

    @Test func jobsMatterOnlyWhileTheyCan() {
        let waiting = PauseRecord(stateID: "s", runID: "r", stateName: "Paused", pausedAt: 0, announcedAt: 0)
        var ended = waiting
        ended.endedAt = 50
        #expect(PauseJob(.announce(nil), waiting).isWorthRetrying(current: waiting, now: 10))
        #expect(!PauseJob(.announce(nil), waiting).isWorthRetrying(current: ended, now: 60))
        #expect(!PauseJob(.remind(minutesLeft: 4), waiting).isWorthRetrying(current: nil, now: 60))
        #expect(PauseJob(.end, ended).isWorthRetrying(current: ended, now: 60))
        #expect(!PauseJob(.end, ended).isWorthRetrying(current: ended, now: 50 + 3600))
    }
}
