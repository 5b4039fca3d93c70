import Testing
@testable import RelayCore

@Suite struct WatcherBackoffTests {
    @Test func doublesFromOneSecondToTheCap() {
        var backoff = Backoff()
        let delays = (0..<9).map { i in backoff.failed(random: 0) }
        #expect(delays == [1, 2, 4, 8, 16, 32, 60, 60, 60])
    }

    @Test func jitterOnlyShortensAndStaysWithinAQuarter() {
        #expect(Backoff.delay(failures: 1, random: 0.5) == 0.875)
        #expect(Backoff.delay(failures: 7, random: 0.999_999) > 45)
        #expect(Backoff.delay(failures: 100, random: 0) == 60)
        #expect(Backoff.delay(failures: 0, random: 0) == 1)
    }

    @Test func aSubscribeResetsTheSequence() {
        var backoff = Backoff()
        _ = backoff.failed(random: 0)
        _ = backoff.failed(random: 0)
        #expect(backoff.failed(random: 0) == 4)
        backoff.connected()
        // A flapping link that subscribes every time never waits more than the first delay.
        #expect(backoff.failed(random: 0) == 1)
        #expect(backoff.failures == 1)
        #expect(backoff.failed(random: 0) == 2)
    }
}
