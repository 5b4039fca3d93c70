import Glibc
import Testing
@testable import FakeAPNs
@testable import Relay
@testable import RelayCore

/// `HEALTH_STARTUP_SECONDS` against the relay binary: a relay that never reaches Prefect's events socket answers
/// /health 503 once the bound has passed, saying what to check; one that subscribed and then lost the socket is
/// judged by the grace, as before.
@Suite struct HealthStartupIntegrationTests {
    func problems(_ reply: TestHTTP.Reply) -> [String] {
        reply.json?["problems"]?.array?.compactMap(\.string) ?? []
    }

    @Test func neverSubscribedIs503AfterTheStartupBound() throws {
        // Nothing listens on Prefect's port: the socket never comes up. The grace is the default 300 s.
        let relay = try RelayProcess(environment: [
            "PREFECT_API_URL": "http://127.0.0.1:\(TestSocket.freePort())/api", "HEALTH_STARTUP_SECONDS": "5",
        ])
        let early = try relay.http.request("GET", "/health")
        #expect(early.status == 200 && early.json?["ok"] == true, "\(early.body)")
        try waitUntil("/health answers 503", timeout: 15) { try relay.http.request("GET", "/health").status == 503 }
        let reply = try relay.http.request("GET", "/health")
        #expect(reply.json?["ok"] == false && reply.json?["subscribed"] == false)
        #expect(problems(reply).count == 1, "\(reply.body)")
        #expect(problems(reply).first?.hasPrefix("events: never subscribed to Prefect's events socket in the ") == true,
                "\(reply.body)")
        #expect(problems(reply).first?.contains("PREFECT_API_URL") == true)
        #expect(try relay.http.request("GET", "/health/live").status == 200)
    }

    @Test func subscribedOnceThenDownKeepsTheGrace() throws {
        let directory = TestFiles.temporaryDirectory()
        defer { TestFiles.removeTree(directory) }
        let (peerProcess, peer) = try ScriptedPrefect.start(directory: directory, lifetime: 60)
        defer { peerProcess.stop(signal: SIGKILL) }
        let apns = try FakeAPNs()
        defer { apns.stop() }
        let relay = try RelayProcess(environment: ScriptedPrefect.relayEnvironment(peer: peer, apns: apns)
            .merging(["HEALTH_STARTUP_SECONDS": "5"]) { $1 }, directory: directory)
        try waitUntil("the relay subscribes", timeout: 20) {
            (try? relay.http.request("GET", "/health").json?["subscribed"]) == .bool(true)
        }
        peerProcess.stop(signal: SIGKILL)
        try waitUntil("the socket is down", timeout: 10) {
            (try? relay.http.request("GET", "/health").json?["subscribed"]) == .bool(false)
        }
        // Past the start-up bound from start, well inside the grace from the drop: still ready.
        var reply = try relay.http.request("GET", "/health")
        try holds("ready for 6 s, past the start-up bound", for: 6) {
            reply = try relay.http.request("GET", "/health")
            return reply.status == 200 && reply.json?["ok"] == true && problems(reply).isEmpty
        }
        #expect(reply.status == 200, "\(reply.body)")
    }
}
