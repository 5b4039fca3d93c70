import Testing
@testable import RelayCore

@Suite struct WatcherBackoffTests {
    @Test func doublesFromOneSecondToTheCap() {
        var backoff = Backoff()
        let delays = (0..<9).map { i in backoff.failed(now: Double(i), random: 0) }
        #expect(delays == [1, 2, 4, 8, 16, 32, 60, 60, 60])
    }

    @Test func jitterOnlyShortensAndStaysWithinAQuarter() {
        #expect(Backoff.delay(failures: 1, random: 0.5) == 0.875)
        #expect(Backoff.delay(failures: 7, random: 0.999_999) > 45)
        #expect(Backoff.delay(failures: 100, random: 0) == 60)
        #expect(Backoff.delay(failures: 0, random: 0) == 1)
    }

    @Test func aHealthyMinuteResetsTheSequence() {
        var backoff = Backoff()
        _ = backoff.failed(now: 0, random: 0)
        _ = backoff.failed(now: 1, random: 0)
        #expect(backoff.failed(now: 3, random: 0) == 4)

        backoff.connected(now: 10)
        #expect(backoff.failed(now: 40, random: 0) == 8)  // up 30 s: not healthy, keep climbing

        backoff.connected(now: 50)
        #expect(backoff.failed(now: 110, random: 0) == 1)  // up 60 s: start over
        #expect(backoff.failures == 1)
    }

    @Test func drawsFromAnInjectedGenerator() {
        struct Fixed: RandomNumberGenerator {
            mutating func next() -> UInt64 { 0 }
        }
        var generator = Fixed()
        var backoff = Backoff()
        #expect(backoff.failed(now: 0, using: &generator) == 1)
        #expect(backoff.failed(now: 1, using: &generator) == 2)
    }
}
