import Glibc
import Testing
@testable import Relay
@testable import RelayCore

extension SharedPrefect {
    /// /health against the relay binary: 503 with `ok: false` and the reason when the events socket stays down past
    /// HEALTH_GRACE_SECONDS, when Prefect refuses the credential, when store writes keep failing and when the file is
    /// deleted; /health/live stays 200 through all of it (a restart would fix none of them).
    @Suite(.serialized) struct HealthIntegrationTests {
        static let auth = ["Authorization": PrefectServer.authorization]

        func problems(_ reply: TestHTTP.Reply) -> [String] {
            reply.json?["problems"]?.array?.compactMap(\.string) ?? []
        }

        @Test func socketHeldDownPastTheGrace() throws {
            // Nothing listens on Prefect's port: the socket never comes up.
            let relay = try RelayProcess(environment: [
                "PREFECT_API_URL": "http://127.0.0.1:\(TestSocket.freePort())/api", "HEALTH_GRACE_SECONDS": "3",
            ])
            let early = try relay.http.request("GET", "/health")
            #expect(early.status == 200 && early.json?["ok"] == true, "\(early.body)")
            try waitUntil("/health answers 503", timeout: 10) { try relay.http.request("GET", "/health").status == 503 }
            let reply = try relay.http.request("GET", "/health")
            #expect(reply.json?["ok"] == false && reply.json?["subscribed"] == false)
            #expect(problems(reply).count == 1 && problems(reply)[0].hasPrefix("events: events socket down for "),
                    "\(reply.body)")
            // The seed's fields are all still there.
            for field in ["subscribed", "apns", "devices", "waiting", "auth_rejected"] { #expect(reply.json?[field] != nil) }
            #expect(try relay.http.request("GET", "/health/live").status == 200)
            try waitUntil("health.failing is logged", timeout: 5) { relay.process.log.contains("level=warn event=health.failing checks=events") }
            #expect(relay.process.log.components(separatedBy: "health.failing").count == 2)  // once, not per probe
        }

        @Test func refusedCredential() async throws {
            let api = try await PrefectServer.shared.apiURL()
            let relay = try RelayProcess(environment: ["PREFECT_API_URL": api, "PREFECT_API_AUTH_STRING": "admin:wrong"])
            try waitUntil("/health answers 503", timeout: 20) { try relay.http.request("GET", "/health").status == 503 }
            let reply = try relay.http.request("GET", "/health")
            #expect(reply.json?["ok"] == false && reply.json?["auth_rejected"] == true)
            #expect(problems(reply).map { $0.prefix(12) } == ["credential: "], "\(reply.body)")
            #expect(!reply.body.contains("wrong"))  // never the credential itself
            #expect(try relay.http.request("GET", "/health/live").status == 200)
        }

        /// Another process holds the write lock: after the store's bound (the grace, 2 s here) /health is 503; once
        /// the lock goes, the relay's own probe write ends it without any other write.
        @Test func storeFailingThenRecovered() async throws {
            let api = try await PrefectServer.shared.apiURL()
            let relay = try RelayProcess(environment: ["PREFECT_API_URL": api, "PREFECT_API_AUTH_STRING": PrefectServer.authString,
                                                       "HEALTH_GRACE_SECONDS": "2"])
            try waitUntil("the relay subscribes", timeout: 30) {
                (try? relay.http.request("GET", "/health").json?["subscribed"]) == .bool(true)
            }
            let blocker = try Database(path: relay.directory + "/relay.db")
            try waitUntil("the write lock is taken", timeout: 10) { (try? blocker.execute("BEGIN IMMEDIATE")) != nil }
            let body: JSONValue = ["id": "health-phone", "token": .string("ab" + String(repeating: "12", count: 31)),
                                   "environment": "production", "server_id": "health"]
            #expect(try relay.http.request("POST", "/devices", headers: Self.auth, body: body.encoded()).status == 503)
            try waitUntil("/health answers 503", timeout: 10) { try relay.http.request("GET", "/health").status == 503 }
            let reply = try relay.http.request("GET", "/health")
            #expect(problems(reply).count == 1 && problems(reply)[0].hasPrefix("store: store writes failing for "),
                    "\(reply.body)")
            // The ticker logs the change within a second of it.
            try waitUntil("health.failing is logged", timeout: 5) { relay.process.log.contains("level=warn event=health.failing checks=store") }
            try blocker.execute("COMMIT")
            try waitUntil("/health answers 200 again", timeout: 15) { try relay.http.request("GET", "/health").status == 200 }
            #expect(relay.process.log.contains("level=info event=store.recovered"))
            try waitUntil("health.recovered is logged", timeout: 5) { relay.process.log.contains("level=info event=health.recovered") }
        }

        /// The file deleted under the relay: every /health answer from then on is 503, and the relay exits 1 at its
        /// next tick so its supervisor starts it on a new file.
        @Test func storeDeleted() async throws {
            let api = try await PrefectServer.shared.apiURL()
            let relay = try RelayProcess(environment: ["PREFECT_API_URL": api, "PREFECT_API_AUTH_STRING": PrefectServer.authString])
            for suffix in ["", "-wal", "-shm"] { unlink(relay.directory + "/relay.db" + suffix) }
            var answers: [Int] = []
            var exit: Int32?
            let deadline = SystemClock.monotonic() + 10
            while exit == nil && SystemClock.monotonic() < deadline {
                if let reply = try? relay.http.request("GET", "/health", timeout: 1) {
                    answers.append(reply.status)
                    if reply.status == 503 { #expect(problems(reply).first?.hasPrefix("store: the database file") == true) }
                }
                exit = relay.process.waitForExit(timeout: 0.02)
            }
            #expect(exit == 1)
            #expect(!answers.contains(200), "\(answers)")
        }
    }
}
