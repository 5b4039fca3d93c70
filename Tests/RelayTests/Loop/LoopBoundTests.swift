import CWebSockets
import Glibc
import Testing
@testable import Relay

/// A loop-bound reference opened off its loop's thread stops the process: confinement checked, not assumed.
@Suite struct LoopBoundTests {
    /// In a child process (an exit test): bind a handler to a loop that is not this thread's and open it here. The child
    /// must die by the trap (SIGILL from `precondition` on x86-64, SIGTRAP where the trap instruction raises that), not
    /// exit, and not live on.
    @Test func openingALoopBoundValueOffItsLoopTraps() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.exitStatus]) {
            let loop = try WebSocketsLoop(settings: .init(port: -1), handlers: [QuietHandler()])
            let bound = loop.bind(QuietHandler())
            _ = bound.value  // this thread is not the loop's: it must trap here
        }
        guard let status = result?.exitStatus else { return }
        switch status {
        case .signal(let signal):
            #expect(signal == SIGILL || signal == SIGTRAP, "died by signal \(signal), not by the trap")
        case .exitCode(let code):
            Issue.record("exited with code \(code) instead of trapping")
        @unknown default:
            Issue.record("ended as \(status) instead of trapping")
        }
    }

    /// The same reference opened on its loop's thread is the object.
    @Test func openingItOnItsLoopIsTheObject() async throws {
        let loop = try WebSocketsLoop(settings: .init(port: -1), handlers: [QuietHandler()])
        try loop.start()
        defer { loop.stop() }
        let bound = loop.bind(QuietHandler())
        let opened = await withCheckedContinuation { continuation in
            loop.perform { continuation.resume(returning: bound.value.protocolName) }
        }
        #expect(opened == "quiet")
    }
}

/// A protocol that does nothing (lws needs at least one).
private final class QuietHandler: LWSHandler {
    let protocolName = "quiet"
    func handle(wsi: OpaquePointer?, reason: lws_callback_reasons, input: UnsafeMutableRawPointer?, length: Int) -> Int32 {
        0
    }
}
