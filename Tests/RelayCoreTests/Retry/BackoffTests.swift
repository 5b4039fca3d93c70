import Testing
@testable import RelayCore

@Suite struct BackoffTests {
    @Test func theEventsSocketDoublesFromOneSecondToTheCap() {
        let delays = (1...9).map { Backoff.eventsSocket.delay(failures: $0, random: 0) }
        #expect(delays == [1, 2, 4, 8, 16, 32, 60, 60, 60])
    }

    @Test func jitterOnlyShortensAndStaysWithinAQuarter() {
        let backoff = Backoff.eventsSocket
        #expect(backoff.delay(failures: 1, random: 0.5) == 0.875)
        #expect(backoff.delay(failures: 7, random: 0.999_999) > 45)
        #expect(backoff.delay(failures: 100, random: 0) == 60)
        #expect(backoff.delay(failures: 0, random: 0) == 1)
    }

    @Test func aLimitEndsTheRetries() {
        let backoff = Backoff(initial: 0.1, maximum: 0.5, jitter: 0.5, limit: 4)
        #expect(backoff.delay(retry: 1, random: 0) == 0.1)
        #expect(backoff.delay(retry: 2, random: 0) == 0.2)
        #expect(backoff.delay(retry: 3, random: 0.5) == 0.4 * 0.75)
        #expect(backoff.delay(retry: 4, random: 0) == 0.5)
        #expect(backoff.delay(retry: 5, random: 0) == nil)
        #expect(Backoff.never.delay(retry: 1, random: 0) == nil)
        #expect(Backoff.outbox.delay(retry: 1_000, random: 0) == 30)
    }

    @Test func retriesBackOffPerKeyUntilSucceeded() {
        var times = Retries<String>(Backoff(initial: 1, maximum: 30, jitter: 0))
        #expect(times.failed("a", now: 0, random: 0) == 1)
        #expect(times.failed("a", now: 1, random: 0) == 2)
        #expect(times.failures("a") == 2)
        times.now("b", at: 0)
        #expect(times.due(now: 0.5) == ["b"])
        #expect(times.due(now: 3) == ["b", "a"])
        times.succeeded("a")
        // A success resets the count: the next failure waits the first delay again.
        #expect(times.failed("a", now: 10, random: 0) == 1)
        times.succeeded("a")
        #expect(times.due(now: 100) == ["b"])
        #expect(!times.contains("a"))
    }
}

/// The rules of a push retried within one send (`APNsOutcome.nextStep`).
@Suite struct RetryWithinSendTests {
    let backoff = Backoff(initial: 0.1, maximum: 0.4, jitter: 0, limit: 3)

    private func rejected(_ status: Int, _ reason: String? = nil, retryAfter: Int? = nil) -> APNsOutcome {
        .rejected(APNsRejection(status: status, reason: reason.map(APNsReason.init(rawValue:)), retryAfter: retryAfter))
    }

    @Test func serverTroubleIsRetriedUntilTheLimit() {
        var (retries, renewed) = (0, false)
        let steps = (0..<4).map { _ in
            rejected(503).nextStep(.alert, retries: &retries, renewed: &renewed, backoff: backoff, random: 0)
        }
        #expect(steps == [.retry(afterMs: 100), .retry(afterMs: 200), .retry(afterMs: 400), .finish])
        #expect(APNsOutcome.attempt(retries: 3, renewed: false) == 4)
    }

    @Test func aProviderTokenErrorRenewsOnce() {
        var (retries, renewed) = (0, false)
        let expired = rejected(403, "ExpiredProviderToken")
        #expect(expired.nextStep(.alert, retries: &retries, renewed: &renewed, backoff: backoff, random: 0)
            == .renewToken(APNsReason(rawValue: "ExpiredProviderToken")))
        #expect(expired.nextStep(.alert, retries: &retries, renewed: &renewed, backoff: backoff, random: 0) == .finish)
        #expect(APNsOutcome.attempt(retries: retries, renewed: renewed) == 2)
    }

    @Test func retryAfterLeadsWithinReasonAndNeverIsFinal() {
        var (retries, renewed) = (0, false)
        #expect(rejected(429, "TooManyRequests", retryAfter: 1)
            .nextStep(.alert, retries: &retries, renewed: &renewed, backoff: backoff, random: 0) == .retry(afterMs: 1_000))
        // Far longer than this send's own schedule: left to the outbox.
        #expect(rejected(429, "TooManyRequests", retryAfter: 60)
            .nextStep(.alert, retries: &retries, renewed: &renewed, backoff: backoff, random: 0) == .finish)
        (retries, renewed) = (0, false)
        #expect(rejected(500).nextStep(.alert, retries: &retries, renewed: &renewed, backoff: .never, random: 0) == .finish)
        #expect(APNsOutcome.delivered(apnsID: nil).nextStep(.alert, retries: &retries, renewed: &renewed, backoff: backoff,
                                                           random: 0) == .finish)
    }
}
