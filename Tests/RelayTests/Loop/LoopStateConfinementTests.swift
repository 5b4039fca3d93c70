import Glibc
import Testing
@testable import Relay
import RelayCore

/// Whether this build keeps `assert`s (debug): in a release build the suite shows as skipped, not as passed.
private let loopAssertionsCompiled: Bool = {
    #if DEBUG
    true
    #else
    false
    #endif
}()

/// The loops' own state is checked at every entry in debug builds (the test build): reached from another thread, or
/// without the APNs loop's turn lock, the process stops. Each case runs in a child process that must die by the trap.
@Suite(.enabled(if: loopAssertionsCompiled, "the checks are assertions: debug builds only"))
struct LoopStateConfinementTests {
    /// The APNs host loop's machine, read from a thread that does not hold the loop's `turn` lock.
    @Test func apnsLoopStateWithoutItsTurnLockTraps() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.exitStatus]) {
            let loop = try APNsHostLoop(host: "127.0.0.1", port: 9, authority: "127.0.0.1:9",
                                        tls: try Wiring.apnsTLS(caFile: nil))
            _ = loop.machine.openStreams  // no turn held: must trap here
        }
        expectTrap(result?.exitStatus)
    }

    /// The same read with the turn held is allowed.
    @Test func apnsLoopStateWithItsTurnLockIsReadable() throws {
        let loop = try APNsHostLoop(host: "127.0.0.1", port: 9, authority: "127.0.0.1:9",
                                    tls: try Wiring.apnsTLS(caFile: nil))
        loop.turn.lock()
        defer { loop.turn.unlock() }
        #expect(loop.machine.openStreams == 0)
    }

    /// A REST pool handler (carrying out the machine's actions) called from a thread that is not the pool's loop.
    @Test func restPoolHandlerOffItsLoopTraps() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.exitStatus]) {
            let pool = try HTTPPool()
            // The pool's loop runs (a call starts it) before the handler is called here, on another thread.
            let call = HTTPCall(method: "GET", url: HTTPURL(tls: false, host: "127.0.0.1", port: 1, path: ""), path: "/",
                                headers: [], body: nil, timeoutSeconds: 1)
            pool.submit(call) { _ in }
            usleep(100_000)
            pool.perform()  // not the pool's thread: must trap here
        }
        expectTrap(result?.exitStatus)
    }
}
