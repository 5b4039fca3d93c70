/// How many streams a connection keeps open at once, sized to what the path needs: enough to cover the answers'
/// round trip at the rate they come back (twice the rate times the fastest round trip seen, as BBR sizes what it keeps
/// in flight), never below `floor` and never above the peer's limit.
///
/// Why not always the peer's limit (APNs allows 1,000): on a short path more open streams buy no throughput, they
/// cost it. Against the fake APNs on this host, one connection carried 10,000 alerts at 69-92k/s (median 78k) with
/// 1,000 streams open and 82-124k/s (medians 114k and 120k) with 100 and 200 (`docs/benchmarks.md`), as h2load does
/// with `-m 100` against `-m 1000`: every
/// open stream is work for both ends' priority queues and maps, and none of it is waiting on the wire. On a long path
/// (APNs tens of ms away) the rate a window carries is the window over the round trip, so the target doubles each
/// measuring period until the round trip grows past the fastest seen or the peer's limit is reached: from 128 to 1,000
/// in three periods.
///
/// Times are microseconds of a monotonic clock. Pure; tested without a connection (`StreamWindowTests`).
public struct StreamWindow: Sendable, Equatable {
    /// The fewest streams it ever asks for.
    public static let floor = 128

    /// Streams to keep open now (before the peer's limit).
    public private(set) var target: Int
    /// The fastest answer seen on this connection, µs; nil before the first.
    public private(set) var fastestRoundTrip: Int64?
    private var periodStart: Int64?
    private var answeredInPeriod = 0
    private let ceiling: Int

    /// `ceiling`: the most it may ask for (`APNsLinkPolicy.Options.maxConcurrentStreams`).
    public init(ceiling: Int) {
        self.ceiling = max(1, ceiling)
        target = min(Self.floor, self.ceiling)
    }

    /// A stream was answered `roundTrip` µs after it was submitted, at `now`.
    public mutating func answered(roundTrip: Int64, now: Int64) {
        let fastest = min(fastestRoundTrip ?? .max, max(1, roundTrip))
        fastestRoundTrip = fastest
        guard let start = periodStart else {
            periodStart = now
            return
        }
        answeredInPeriod += 1
        // A period spans at least two of the fastest round trips (and 1 ms), so its rate is what the window carried.
        let elapsed = now - start
        guard elapsed >= max(2 * fastest, 1_000) else { return }
        let needed = 2 * Double(answeredInPeriod) * Double(fastest) / Double(elapsed)
        target = min(ceiling, max(min(Self.floor, ceiling), Int(needed.rounded(.up))))
        periodStart = now
        answeredInPeriod = 0
    }

    /// The streams to allow, given the peer's limit.
    public func limit(peer: Int) -> Int { max(1, min(peer, target)) }
}
