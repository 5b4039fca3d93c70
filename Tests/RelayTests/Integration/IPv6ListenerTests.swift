import Glibc
import Testing
@testable import Relay
@testable import RelayCore

/// `API_BIND` and `METRICS_BIND` on IPv6: the relay binds ::1 (or `::`, dual-stack), and a client on an IPv6 socket
/// is answered. Needs IPv6 loopback; a machine without one skips these with that reason, never passes them.
@Suite(.enabled(if: TestSocket.ipv6LoopbackMissing == nil,
                "no IPv6 loopback on this machine (::1 can't be bound; see `ip -6 addr show lo`): IPv6 listeners untested"))
struct IPv6ListenerTests {
    @Test func bothListenersServeOnIPv6Loopback() throws {
        let (relay, directory) = try Self.start(["API_BIND": "::1", "METRICS_PORT": "0", "METRICS_BIND": "::1"])
        defer { relay.stop(signal: SIGKILL); TestFiles.removeTree(directory) }
        let started = Self.startedLine(relay)
        let port = try #require(Self.field(started, "port").flatMap(Int.init), "\(started)")
        let metrics = try #require(Self.field(started, "metrics"), "\(started)")
        #expect(metrics.hasPrefix("[::1]:"), "\(started)")
        let metricsPort = try #require(Int(metrics.dropFirst(6)), "\(started)")
        let health = try TestHTTP(port: port, host: "::1").request("GET", "/health")
        #expect(health.status == 200 && health.json?["ok"] != nil, "\(health.status) \(health.body)")
        #expect(try TestHTTP(port: metricsPort, host: "::1").request("GET", "/metrics").status == 200)
        // Bound to ::1 alone: IPv4 loopback is not served.
        #expect(throws: TestFailure.self) { _ = try TestSocket.connect(port: port) }
        try waitUntil("the request is logged", timeout: 5) { relay.log.contains("event=api.request route=health") }
        #expect(relay.log.contains("status=200 ") && relay.log.contains("client=::1"), "\(relay.log.suffix(1500))")
        #expect(relay.stop(signal: SIGTERM) == 0, "\(relay.log.suffix(1500))")
    }

    /// `::` is dual-stack whatever net.ipv6.bindv6only says: IPv4 and IPv6 clients both get answers, and an IPv4
    /// client is logged as its IPv4 address, not ::ffff:127.0.0.1.
    @Test func everyInterfaceMeansBothFamilies() throws {
        let (relay, directory) = try Self.start(["API_BIND": "::"])
        defer { relay.stop(signal: SIGKILL); TestFiles.removeTree(directory) }
        let port = try #require(Self.field(Self.startedLine(relay), "port").flatMap(Int.init))
        #expect(try TestHTTP(port: port, host: "::1").request("GET", "/health/live").status == 200)
        #expect(try TestHTTP(port: port).request("GET", "/health/live").status == 200)
        try waitUntil("both requests are logged", timeout: 5) {
            relay.log.contains("client=::1") && relay.log.contains("client=127.0.0.1")
        }
        #expect(!relay.log.contains("ffff"), "\(relay.log.suffix(1500))")
        #expect(relay.stop(signal: SIGTERM) == 0, "\(relay.log.suffix(1500))")
    }

    // MARK: - Helpers

    /// The relay on port 0 with `extra`, logging at debug (2xx requests included), once it says it started.
    static func start(_ extra: [String: String]) throws -> (ChildProcess, String) {
        let directory = TestFiles.temporaryDirectory()
        let environment = [
            "PREFECT_API_URL": "http://127.0.0.1:\(TestSocket.freePort())/api", "DB_PATH": directory + "/relay.db",
            "PORT": "0", "LOG_LEVEL": "debug",
        ].merging(extra) { $1 }
        let relay = try ChildProcess(RelayProcess.binary, [], environment: environment, logPath: directory + "/relay.log")
        var ended: Int32?
        try waitUntil("the relay starts or exits", timeout: 20) {
            ended = relay.waitForExit(timeout: 0)
            return ended != nil || relay.log.contains("event=relay.started")
        }
        if let ended { throw TestFailure("\(describeExit(ended)): \(relay.log.suffix(1500))") }
        return (relay, directory)
    }

    static func startedLine(_ relay: ChildProcess) -> String {
        relay.log.split(separator: "\n").first { $0.contains("event=relay.started") }.map(String.init) ?? ""
    }

    /// A logfmt field's value (unquoted fields only).
    static func field(_ line: String, _ name: String) -> String? {
        line.split(separator: " ").first { $0.hasPrefix(name + "=") }.map { String($0.dropFirst(name.count + 1)) }
    }
}
