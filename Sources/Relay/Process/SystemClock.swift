import Glibc

/// The relay's two clocks, read in one place: wall time for what is stored and sent, CLOCK_MONOTONIC for
/// durations, deadlines and timers (it never jumps with the wall clock).
package enum SystemClock {
    /// Wall-clock time as unix seconds.
    @Sendable static func unixNow() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    /// Unix seconds that never step: the wall clock as read once, at the first call, advanced by CLOCK_MONOTONIC
    /// since. Every retry, backoff and interval the relay schedules in unix time (the outbox's `due_ms`, pause jobs'
    /// retries, cache ages) is on this clock, so an NTP step or a restored VM moves none of them; only what Prefect
    /// and APNs see (event filters, payload timestamps, `apns-expiration`, the provider token's `iat`) reads the
    /// wall clock itself.
    @Sendable static func steadyNow() -> Double { steadyOrigin + monotonic() }

    /// Wall time minus monotonic time at the first `steadyNow()` (a global's lazy, thread-safe initialisation).
    private static let steadyOrigin: Double = unixNow() - monotonic()

    /// Monotonic seconds, for measuring durations.
    package static func monotonic() -> Double { Double(monotonicNanoseconds()) / 1e9 }
}

/// CLOCK_MONOTONIC in nanoseconds (the clock Python's `time.monotonic_ns()` reads on Linux, which the benchmark
/// relies on to compare stamps across processes).
package func monotonicNanoseconds() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
}

/// Monotonic milliseconds, for deadlines and timers.
package func monotonicMs() -> Int64 { monotonicNanoseconds() / 1_000_000 }

/// Monotonic microseconds, for round trips shorter than a millisecond (`StreamWindow`).
package func monotonicMicros() -> Int64 { monotonicNanoseconds() / 1_000 }
