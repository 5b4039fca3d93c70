/// Reconnect delays for the events socket: exponential with jitter, reset by a subscribe.
///
/// After the n-th failure in a row (n ≥ 1) the delay is
///
///     delay(n) = min(maximum, initial · 2^(n−1)) · (1 − jitter · r),   r uniform in [0, 1)
///
/// so with the defaults (initial 1 s, maximum 60 s, jitter 0.25) the ceilings run 1, 2, 4, 8, 16, 32, 60,
/// 60, … s and each delay falls in (¾·ceiling, ceiling]. Jitter only shortens, so the cap holds, and
/// many relays restarted together spread out. A reconnect that got as far as subscribing resets the count:
/// the server and the network worked, so a flapping link retries after a second, not after a minute.
///
/// The random source is injected, so tests are exact; the relay passes its generator.
public struct Backoff: Sendable, Equatable {
    public var initial: Double
    public var maximum: Double
    public var jitter: Double
    /// Failures since the last healthy connection.
    public private(set) var failures = 0

    public init(initial: Double = 1, maximum: Double = 60, jitter: Double = 0.25) {
        precondition(initial > 0 && maximum >= initial && (0...1).contains(jitter), "Backoff: bad parameters")
        self.initial = initial
        self.maximum = maximum
        self.jitter = jitter
    }

    /// The formula above, for the `failures`-th failure in a row and `random` in [0, 1).
    public static func delay(failures: Int, random: Double, initial: Double = 1, maximum: Double = 60,
                             jitter: Double = 0.25) -> Double {
        let exponent = min(max(failures, 1) - 1, 62)
        var ceiling = initial
        for _ in 0..<exponent where ceiling < maximum { ceiling *= 2 }
        ceiling = min(maximum, ceiling)
        let unit = min(max(random, 0), 1)
        return ceiling * (1 - jitter * unit)
    }

    /// The socket subscribed: the next failure waits the first delay again.
    public mutating func connected() {
        failures = 0
    }

    /// The socket closed or could not connect: the delay before the next attempt.
    public mutating func failed(random: Double) -> Double {
        failures += 1
        return Self.delay(failures: failures, random: random, initial: initial, maximum: maximum, jitter: jitter)
    }

}
