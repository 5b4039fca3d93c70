import Testing
@testable import RelayCore

/// The connection's window: twice the answers' rate times the fastest round trip, between 128 and the ceiling.
@Suite struct StreamWindowTests {
    /// Answers `count` streams, each `roundTrip` µs long, arriving `every` µs apart from `start`; returns the clock.
    @discardableResult
    private func answer(_ window: inout StreamWindow, count: Int, roundTrip: Int64, every: Int64, from start: Int64) -> Int64 {
        var now = start
        for _ in 0..<count {
            now += every
            window.answered(roundTrip: roundTrip, now: now)
        }
        return now
    }

    /// A short path (the fake APNs on this host): 100 answers a millisecond, each back in 200 µs. The window needed
    /// is 40 streams, so it stays at the floor, well below the peer's 1,000.
    @Test func aShortPathKeepsTheFloor() {
        var window = StreamWindow(ceiling: 1_000)
        answer(&window, count: 5_000, roundTrip: 200, every: 10, from: 0)
        #expect(window.target == StreamWindow.floor)
        #expect(window.limit(peer: 1_000) == 128)
        #expect(window.limit(peer: 50) == 50)  // never above the peer's limit
    }

    /// A long path: each answer 30 ms after its request, and the rate is what the window allows (the window over the
    /// round trip). The target doubles each period until it reaches the ceiling.
    @Test func aLongPathGrowsToTheCeiling() {
        var window = StreamWindow(ceiling: 1_000)
        var now: Int64 = 0
        var targets: [Int] = []
        for _ in 0..<6 {
            // One period of 2 round trips: the window's worth of answers twice.
            let open = window.target
            now = answer(&window, count: 2 * open, roundTrip: 30_000, every: 60_000 / Int64(2 * open), from: now)
            targets.append(window.target)
        }
        // About a doubling per period (never more than that, plus a stream of rounding), up to the ceiling.
        #expect(targets.last == 1_000, "\(targets)")
        #expect(targets.contains { $0 > 250 && $0 < 270 }, "\(targets)")
        #expect(zip([128] + targets, targets).allSatisfy { $0 <= $1 && Double($1) <= 2.05 * Double($0) }, "\(targets)")
    }

    /// The fastest round trip counts: one slow answer (a queue at the peer) doesn't make the window bigger.
    @Test func theFastestRoundTripSizesIt() {
        var window = StreamWindow(ceiling: 1_000)
        answer(&window, count: 10, roundTrip: 100, every: 10, from: 0)
        answer(&window, count: 5_000, roundTrip: 50_000, every: 10, from: 100)
        #expect(window.fastestRoundTrip == 100)
        #expect(window.target == StreamWindow.floor)
    }

    /// A ceiling below the floor (a policy that allows few streams) is the window.
    @Test func aLowCeilingIsTheWindow() {
        var window = StreamWindow(ceiling: 10)
        answer(&window, count: 100, roundTrip: 30_000, every: 1_000, from: 0)
        #expect(window.target == 10)
        #expect(window.limit(peer: 1_000) == 10)
    }
}
