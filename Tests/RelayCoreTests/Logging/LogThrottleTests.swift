import Testing
@testable import RelayCore

/// A warning that repeats writes its first lines, then only counts; the count comes out with the next line let
/// through or once the window has passed.
@Suite struct LogThrottleTests {
    @Test func aFloodWritesItsBurstThenCounts() {
        var throttle = LogThrottle(burst: 3, window: 10)
        let verdicts = (0..<1000).map { throttle.admit("lws.error", now: 100 + Double($0) * 0.001) }
        #expect(verdicts.filter(\.write).count == 3)
        #expect(verdicts.allSatisfy { $0.suppressed == 0 })
        // Nothing is due inside the window; after it, one summary of the 997 held back.
        #expect(throttle.due(now: 105).isEmpty)
        let due = throttle.due(now: 110.5)
        #expect(due.count == 1)
        #expect(due.first?.event == "lws.error")
        #expect(due.first?.suppressed == 997)
        #expect(throttle.due(now: 130).isEmpty)
    }

    @Test func theNextLineAfterTheWindowCarriesTheCount() {
        var throttle = LogThrottle(burst: 1, window: 5)
        #expect(throttle.admit("a", now: 0) == (true, 0))
        #expect(throttle.admit("a", now: 1) == (false, 0))
        #expect(throttle.admit("a", now: 2) == (false, 0))
        #expect(throttle.admit("a", now: 6) == (true, 2))
        #expect(throttle.admit("a", now: 6.5) == (false, 0))
    }

    @Test func eventsAreThrottledApart() {
        var throttle = LogThrottle(burst: 2, window: 10)
        for _ in 0..<5 { _ = throttle.admit("noisy", now: 1) }
        #expect(throttle.admit("quiet", now: 1).write)
        #expect(throttle.admit("quiet", now: 1).write)
        #expect(!throttle.admit("quiet", now: 1).write)
    }
}
