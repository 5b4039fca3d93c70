import Glibc
import Testing
@testable import Relay
@testable import RelayCore

/// A Prefect that accepts connections and never answers (a hung server, a load balancer holding the connection):
/// a listening socket nobody accepts from, so the kernel completes every TCP handshake and no byte ever comes back.
/// The relay names the stalled stage within 15 s, keeps retrying, and stops cleanly on SIGTERM at any moment;
/// `check` reports the timeout and exits 1.
@Suite struct SilentPrefectTests {
    /// A listening socket on 127.0.0.1 that never accepts; closed by `close()`.
    struct SilentServer {
        let fd: Int32
        let port: Int

        init() throws {
            fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let fd = fd
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                    bind(fd, pointer, length) == 0 && listen(fd, 512) == 0 && getsockname(fd, pointer, &length) == 0
                }
            }
            guard bound else { throw TestFailure("could not listen on 127.0.0.1") }
            port = Int(UInt16(bigEndian: address.sin_port))
        }

        func close() { _ = Glibc.close(fd) }
    }

    func environment(_ server: SilentServer, _ directory: String) -> [String: String] {
        ["PREFECT_API_URL": "http://127.0.0.1:\(server.port)/api", "PORT": "0", "DB_PATH": directory + "/relay.db",
         "LOG_LEVEL": "debug"]
    }

    /// Relays stopped at different moments: while connecting, while the first deadline runs, after it ran out (in
    /// the backoff or the second attempt). Each exits 0; the one that lived longest logged the stall and retried.
    @Test func stallIsLoggedRetriedAndStopsCleanlyAtAnyMoment() async throws {
        let server = try SilentServer()
        defer { server.close() }
        let stopAfter: [Double] = [1, 6, 12, 23]
        var relays: [(ChildProcess, String)] = []
        for index in stopAfter.indices {
            let directory = TestFiles.temporaryDirectory()
            relays.append((try ChildProcess(RelayProcess.binary, [], environment: environment(server, directory),
                                            logPath: directory + "/relay-\(index).log"), directory))
        }
        defer { relays.forEach { TestFiles.removeTree($0.1) } }
        let started = SystemClock.monotonic()
        for (index, seconds) in stopAfter.enumerated() {
            let wait = started + seconds - SystemClock.monotonic()
            if wait > 0 { try await Task.sleep(for: .milliseconds(Int(wait * 1000))) }
            let (relay, _) = relays[index]
            let code = relay.stop(signal: SIGTERM, timeout: 10)
            #expect(code == 0, "stopped after \(seconds) s: exit \(code.map(String.init) ?? "none (killed)")\n\(relay.log)")
        }
        let log = relays.last!.0.log
        let stalls = log.split(separator: "\n").filter {
            $0.contains("events.connect_failed") && $0.contains("timeout: the WebSocket upgrade")
        }
        // The first deadline (10 s) ran out once, then the second attempt's: both named, the first at warn level.
        #expect(stalls.count >= 2, "\(log)")
        #expect(stalls.first?.contains(" level=warn event=events.connect_failed ") == true, "\(log)")
        #expect(!log.contains("Program crashed"), "\(log)")
    }

    @Test func checkReportsTheTimeout() async throws {
        let server = try SilentServer()
        defer { server.close() }
        let directory = TestFiles.temporaryDirectory()
        defer { TestFiles.removeTree(directory) }
        var env = environment(server, directory)
        env["LOG_LEVEL"] = "info"
        let check = try ChildProcess(RelayProcess.binary, ["check"], environment: env, logPath: directory + "/check.log")
        // Polled from the task, not a blocking poll: `check` takes 20 s here, and a test thread held that long
        // starves the suites that share the 2-core machine's cooperative pool.
        var code: Int32?
        await poll(within: 60, every: 0.05) {
            code = check.exitCode()
            return code != nil
        }
        if code == nil { check.stop(signal: SIGKILL) }
        #expect(code == 1, "\(check.log)")
        let events = check.log.split(separator: "\n").first { $0.hasPrefix("failed  prefect events:") } ?? ""
        #expect(events.contains("timeout"), "\(check.log)")
        #expect(events.contains("fix:"), "\(check.log)")
    }
}
