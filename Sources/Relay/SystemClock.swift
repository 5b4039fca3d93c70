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
