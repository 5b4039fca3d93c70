import CWebSockets
import Glibc
import Testing
@testable import Relay

/// A loop-bound reference made or opened off its loop's thread stops the process: confinement checked, not assumed.
@Suite struct LoopBoundTests {
    /// In a child process (an exit test): bind a handler to a loop from a thread that is not the loop's. It must die
    /// by the trap, not exit, and not live on.
    @Test func makingALoopBoundValueOffItsLoopTraps() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.exitStatus]) {
            let loop = try WebSocketsLoop(settings: .init(port: -1), handlers: [QuietHandler()])
            try loop.start()  // the loop's thread runs: the trap is for this one being another
            usleep(100_000)
            _ = loop.bind(QuietHandler())  // this thread is not the loop's: it must trap here
        }
        expectTrap(result?.exitStatus)
    }

    /// In a child process: a reference bound on its loop's thread, opened on this one. It must die by the trap.
    @Test func openingALoopBoundValueOffItsLoopTraps() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.exitStatus]) {
            let loop = try WebSocketsLoop(settings: .init(port: -1), handlers: [QuietHandler()])
            try loop.start()
            let bound = await withCheckedContinuation { continuation in
                loop.perform(onHandler: QuietHandler.self) { continuation.resume(returning: loop.bind($0)) }
            }
            _ = bound.value  // this thread is not the loop's: it must trap here
        }
        expectTrap(result?.exitStatus)
    }

    /// Bound and opened on its loop's thread, it is the handler the loop was handed.
    @Test func bindingAndOpeningItOnItsLoopIsTheHandler() async throws {
        let loop = try WebSocketsLoop(settings: .init(port: -1), handlers: [QuietHandler(name: "handed over")])
        try loop.start()
        defer { loop.stop() }
        let bound = await withCheckedContinuation { continuation in
            loop.perform(onHandler: QuietHandler.self) { continuation.resume(returning: loop.bind($0)) }
        }
        let opened = await withCheckedContinuation { continuation in
            loop.perform(on: bound) { continuation.resume(returning: $0.protocolName) }
        }
        #expect(opened == "handed over")
    }
}

/// A protocol that does nothing (lws needs at least one).
private final class QuietHandler: LWSHandler {
    let protocolName: String
    init(name: String = "quiet") { protocolName = name }
    func handle(wsi: OpaquePointer?, reason: lws_callback_reasons, input: UnsafeMutableRawPointer?, length: Int) -> Int32 {
        0
    }
}
