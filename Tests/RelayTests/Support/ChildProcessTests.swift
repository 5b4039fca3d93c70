import Glibc
import Testing
@testable import Relay

/// The helpers every integration test reads a child's ending through: a death by a signal must never read as a
/// clean exit (a relay that died of SIGSEGV would otherwise pass), and a reaped child is never signalled again.
@Suite struct ChildProcessTests {
    private func start(_ script: String) throws -> ChildProcess {
        try ChildProcess("/bin/sh", ["-c", script], environment: [:], logPath: TestFiles.temporaryDirectory() + "/sh.log")
    }

    @Test func aDeathBySignalIs128PlusTheSignal() throws {
        #expect(try start("kill -SEGV $$").waitForExit(timeout: 10) == 128 + SIGSEGV)
        #expect(try start("kill -ABRT $$").exitCodeWithin(10) == 128 + SIGABRT)
    }

    @Test func anExitCodeIsItself() throws {
        #expect(try start("exit 0").waitForExit(timeout: 10) == 0)
        #expect(try start("exit 3").waitForExit(timeout: 10) == 3)
    }

    @Test func stopReportsTheSignalThatEndedIt() throws {
        // `exec` so that the signal reaches sleep itself, not a shell waiting on it.
        #expect(try start("exec sleep 30").stop(signal: SIGTERM) == 128 + SIGTERM)
        let crashed = try start("kill -SEGV $$")
        _ = crashed.waitForExitUnread(timeout: 10)
        #expect(crashed.stop() == 128 + SIGSEGV)  // ended before the stop: its own ending, not the stop's signal
    }

    @Test func theEndingIsKeptOnceReaped() throws {
        let child = try start("exit 7")
        #expect(child.waitForExit(timeout: 10) == 7)
        #expect(child.exitCode() == 7)
        #expect(child.stop() == 7)
    }

    @Test func describedByTheSignalsName() {
        #expect(describeExit(139).contains("signal 11"))
        #expect(describeExit(0) == "exit 0")
        #expect(describeExit(nil).contains("killed"))
    }
}

extension ChildProcess {
    /// Polls `exitCode()` (the non-blocking read) until it has one, bounded.
    fileprivate func exitCodeWithin(_ seconds: Double) -> Int32? {
        var code: Int32?
        poll(timeout: seconds) {
            code = exitCode()
            return code != nil
        }
        return code
    }

    /// Waits until it has ended without taking its ending (a later `stop()` still reports it).
    fileprivate func waitForExitUnread(timeout: Double) -> Bool {
        poll(timeout: timeout) {
            kill(pid, 0) == 0 && (try? TestFiles.read("/proc/\(pid)/stat"))?.contains(") Z ") == true
        }
    }
}
