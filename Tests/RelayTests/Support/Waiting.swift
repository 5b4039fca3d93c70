import Glibc
@testable import Relay

// How the tests wait: for the condition they mean, polled, within a bound; never for a fixed time that a busy machine
// can outrun. The only sleeps in the tests are the two polls below. A check that something does *not* happen
// (nothing doubled, nothing sent again) is a condition held for a span (`holds`), failing the moment it breaks.

/// Polls `condition` every `every` seconds until it holds (true) or `timeout` seconds pass (false). Blocks the thread.
@discardableResult
func poll(timeout: Double, every: Double = 0.02, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = SystemClock.monotonic() + timeout
    while true {
        if try condition() { return true }
        if SystemClock.monotonic() >= deadline { return false }
        usleep(UInt32(every * 1_000_000))
    }
}

/// As `poll(timeout:)`, from a task, without blocking a thread (the cooperative pool has two on this machine).
@discardableResult
func poll(within timeout: Double, every: Double = 0.01, _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = SystemClock.monotonic() + timeout
    while true {
        if try await condition() { return true }
        if SystemClock.monotonic() >= deadline { return false }
        try? await Task.sleep(for: .milliseconds(Int(every * 1000)))
    }
}

/// Polls `condition` every 0.1 s until it holds or `timeout` seconds pass (then throws naming `what`).
func waitUntil(_ what: String, timeout: Double, _ condition: () throws -> Bool) throws {
    guard try poll(timeout: timeout, every: 0.1, condition) else {
        throw TestFailure("timed out after \(Int(timeout)) s waiting until \(what)")
    }
}

/// As `waitUntil`, from a task.
func eventually(_ what: String, within timeout: Double, _ condition: () async throws -> Bool) async throws {
    guard try await poll(within: timeout, condition) else {
        throw TestFailure("timed out after \(timeout) s waiting until \(what)")
    }
}

/// Checks that `condition` stays true for `seconds` (what would break it, a push sent twice, has had the time to
/// arrive); throws naming `what` the moment it is false.
func holds(_ what: String, for seconds: Double, _ condition: () throws -> Bool) throws {
    var broke = false
    try poll(timeout: seconds, every: 0.05) {
        broke = try !condition()
        return broke
    }
    if broke { throw TestFailure("no longer true within \(seconds) s: \(what)") }
}

/// As `holds(_:for:)`, from a task, without blocking a thread.
func holds(_ what: String, during seconds: Double, _ condition: () async throws -> Bool) async throws {
    var broke = false
    try await poll(within: seconds, every: 0.02) {
        broke = try await !condition()
        return broke
    }
    if broke { throw TestFailure("no longer true within \(seconds) s: \(what)") }
}
