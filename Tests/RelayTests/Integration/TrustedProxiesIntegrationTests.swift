import Glibc
import Testing
@testable import Relay
@testable import RelayCore

/// `TRUSTED_PROXIES` in the running relay: request logs name the client a trusted proxy forwarded, and a bad entry
/// stops start-up naming it.
@Suite struct TrustedProxiesIntegrationTests {
    @Test func requestLogsNameTheForwardedClient() throws {
        let (relay, directory) = try IPv6ListenerTests.start(["API_BIND": "127.0.0.1", "TRUSTED_PROXIES": "127.0.0.1/32"])
        defer { relay.stop(signal: SIGKILL); TestFiles.removeTree(directory) }
        let port = try #require(IPv6ListenerTests.field(IPv6ListenerTests.startedLine(relay), "port").flatMap(Int.init))
        let http = TestHTTP(port: port)
        #expect(try http.request("GET", "/health/live", headers: ["X-Forwarded-For": "192.0.2.66, 203.0.113.7"])
            .status == 200)
        try waitUntil("the request is logged", timeout: 5) { relay.log.contains("client=203.0.113.7") }
        #expect(relay.log.contains("client=203.0.113.7 via=127.0.0.1"), "\(relay.log.suffix(1500))")
        #expect(!relay.log.contains("192.0.2.66"))
        #expect(try http.request("GET", "/health/live", headers: ["X-Forwarded-For": "unknown"]).status == 200)
        try waitUntil("the request is logged", timeout: 5) { relay.log.contains("client=127.0.0.1\n") }
        #expect(relay.stop(signal: SIGTERM) == 0, "\(relay.log.suffix(1500))")
    }

    @Test func aBadEntryExits2NamingIt() throws {
        let directory = TestFiles.temporaryDirectory()
        defer { TestFiles.removeTree(directory) }
        let relay = try ChildProcess(RelayProcess.binary, [], environment: [
            "PREFECT_API_URL": "http://127.0.0.1:\(TestSocket.freePort())/api", "DB_PATH": directory + "/relay.db",
            "PORT": "0", "TRUSTED_PROXIES": "10.0.0.0/8,10.0.0.0/33",
        ], logPath: directory + "/relay.log")
        let code = relay.waitForExit(timeout: 20)
        if code == nil { relay.stop(signal: SIGKILL) }
        #expect(code == 2, "\(describeExit(code)): \(relay.log.suffix(1500))")
        #expect(relay.log.contains("TRUSTED_PROXIES has \\\"10.0.0.0/33\\\""), "\(relay.log.suffix(1500))")
    }
}
