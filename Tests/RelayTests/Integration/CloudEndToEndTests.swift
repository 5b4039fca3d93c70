import Glibc
import Testing
@testable import FakeAPNs
@testable import Relay
@testable import RelayCore

extension SharedPrefect {
    /// The relay against a Prefect Cloud workspace: `tools/cloud_standin.py` in front of the shared Prefect server
    /// (Bearer key on REST, the key as the socket's auth token, 429 on demand), configured with only
    /// `PREFECT_API_URL=<workspace root>` and `PREFECT_API_KEY` (plus the APNs variables).
    @Suite(.serialized) struct CloudEndToEndTests {
        /// The end-to-end environment with the workspace root and the key in place of the server's basic auth.
        static func environment(_ e2e: EndToEnd, _ cloud: CloudStandIn, key: String = CloudStandIn.key) -> [String: String] {
            var env = e2e.environment
            env["PREFECT_API_AUTH_STRING"] = nil
            env["PREFECT_API_URL"] = cloud.root
            env["PREFECT_API_KEY"] = key
            return env
        }

        static func startRelay(_ e2e: EndToEnd, _ cloud: CloudStandIn) throws -> RelayProcess {
            let relay = try RelayProcess(environment: environment(e2e, cloud), directory: e2e.directory)
            try waitUntil("the relay subscribes through the stand-in", timeout: 30) {
                (try? relay.http.request("GET", "/health").json?["subscribed"]) == .bool(true)
            }
            return relay
        }

        /// The app's registration, with the workspace's key as its credential.
        static func register(_ relay: RelayProcess, authorization: String = CloudStandIn.authorization) throws -> Int {
            let body: JSONValue = ["id": "phone", "token": .string(EndToEnd.deviceToken),
                                   "start_token": .string(EndToEnd.startToken), "environment": "development",
                                   "server_id": "cloud"]
            return try relay.http.request("POST", "/devices", headers: ["Authorization": authorization],
                                          body: body.encoded()).status
        }

        @Test func pauseIsAnnouncedWithTheCloudLinkAndResumeEndsIt() async throws {
            let e2e = try await EndToEnd()
            let cloud = try await CloudStandIn()
            let relay = try Self.startRelay(e2e, cloud)
            // Registration is authorized by the workspace: the app's Bearer goes to POST /flows/count there.
            #expect(try Self.register(relay, authorization: "Bearer pnu_notTheWorkspaceKey") == 401)
            #expect(try Self.register(relay, authorization: PrefectServer.authorization) == 401)
            #expect(try Self.register(relay) == 200)
            #expect(try cloud.requests().contains { $0.path == "/flows/count" && $0.status == 401 })

            let run = try e2e.runFlow("input")
            try waitUntil("the alert and the start", timeout: 60) {
                !e2e.pushes(to: EndToEnd.deviceToken, run: run).isEmpty && !e2e.pushes(to: EndToEnd.startToken, run: run).isEmpty
            }
            let alert = try #require(e2e.pushes(to: EndToEnd.deviceToken, run: run).first)
            #expect(alert.payload["aps"]?["alert"]?["title"] == "Approve the nightly deploy?")  // the context was read
            #expect(alert.payload["body"]?["url"] == .string(cloud.runLink(run)))
            #expect(alert.payload["body"]?["serverId"] == "cloud")
            let start = try #require(e2e.pushes(to: EndToEnd.startToken, run: run).first)
            #expect(start.payload["aps"]?["attributes"]?["url"] == .string(cloud.runLink(run)))
            #expect(activityProps(start.payload)?["url"] == .string(cloud.runLink(run)))

            let activity = try relay.http.request("PUT", "/devices/phone/activities/\(run)",
                                                  headers: ["Authorization": CloudStandIn.authorization],
                                                  body: #"{"token":"\#(EndToEnd.activityToken)"}"#)
            #expect(activity.status == 204)
            try e2e.resume(run, input: ["comment": "ship it"])
            try waitUntil("the end push", timeout: 30) { !e2e.pushes(to: EndToEnd.activityToken, run: run).isEmpty }
            let end = try #require(e2e.pushes(to: EndToEnd.activityToken, run: run).first)
            #expect(end.payload["aps"]?["event"] == "end")
            #expect(activityProps(end.payload)?["ended"] == "Running")
            #expect(activityProps(end.payload)?["url"] == .string(cloud.runLink(run)))
            #expect(e2e.pushes(to: EndToEnd.deviceToken, run: run).count == 1)

            // Every read the relay made carried the key (none refused); the socket authenticated with the key in
            // its auth message and, like Prefect's own Cloud subscriber, sent no Authorization on the upgrade.
            let own = try cloud.requests().filter { $0.path != "/flows/count" }
            #expect(!own.isEmpty)
            #expect(own.allSatisfy { $0.status != 401 }, "\(own.map { "\($0.method) \($0.path) \($0.status)" })")
            let sockets = try cloud.sockets()
            #expect(sockets.first?["accepted"] == true)
            #expect(sockets.first?["upgrade_authorization"] == false)
            // The key is never in the log, the metrics or /health.
            let metrics = try relay.http.request("GET", "/metrics", headers: ["Authorization": CloudStandIn.authorization])
            #expect(metrics.status == 200)
            for text in [relay.process.log, metrics.body, try relay.http.request("GET", "/health").body] {
                #expect(!text.contains(CloudStandIn.key))
                #expect(!text.contains(String(CloudStandIn.key.dropFirst(4))))
            }
        }

        /// A bad key: the relay keeps running, logs one clear `events.auth_rejected` line, says so in /health (503), and
        /// neither reconnects nor lists at the fast pace (the next try is a backoff maximum away).
        @Test func wrongKeyIsClearInTheLogAndHealthWithoutHammering() async throws {
            let e2e = try await EndToEnd()
            let cloud = try await CloudStandIn()
            let wrong = "pnu_WrongKeyForTheStandIn0123456789abcd"
            let relay = try RelayProcess(environment: Self.environment(e2e, cloud, key: wrong), directory: e2e.directory)
            try waitUntil("the refusal is logged", timeout: 20) { relay.process.log.contains("events.auth_rejected") }
            try waitUntil("/health says so", timeout: 5) {
                (try? relay.http.request("GET", "/health").json?["auth_rejected"]) == .bool(true)
            }
            let reply = try relay.http.request("GET", "/health")
            let health = reply.json
            #expect(reply.status == 503)  // the relay can't do its job until the key is fixed
            #expect(health?["ok"] == false)
            #expect(health?["subscribed"] == false)
            #expect(health?["problems"]?.array?.first?.string?.hasPrefix("credential: ") == true, "\(reply.body)")
            // A fast retry (1 s backoff, a 3 s listing) would show within 7 s.
            try holds("one refusal, the relay still running", for: 7) {
                relay.process.waitForExit(timeout: 0) == nil
                    && relay.process.log.split(separator: "\n").count { $0.contains(" event=events.auth_rejected ") } <= 1
            }
            let log = relay.process.log
            let rejected = log.split(separator: "\n").filter { $0.contains(" level=error event=events.auth_rejected ") }
            #expect(rejected.count == 1, "\(log)")
            #expect(rejected.first?.contains("credential=PREFECT_API_KEY") == true)
            #expect(rejected.first?.contains("fix=") == true)
            #expect(log.contains("retry_in_ms=60000"), "\(log)")  // the backoff maximum, as for any 1008
            #expect(try cloud.sockets().count == 1)
            let listings = try cloud.requests().filter { $0.path == "/flow_runs/filter" }
            #expect(listings.count <= 1, "\(listings.count) listings in 7 s")
            #expect(!log.contains(wrong) && !log.contains(String(wrong.dropFirst(4))))
            // The API still works for the app: its own (right) key is what the workspace checks.
            let metrics = try relay.http.request("GET", "/metrics", headers: ["Authorization": CloudStandIn.authorization])
            #expect(metrics.status == 200)
            #expect(!metrics.body.contains(wrong))
        }

        /// Cloud answers 429 with Retry-After: the run read waits what it is told, then the pause is announced.
        @Test func rateLimitIsWaitedOut() async throws {
            let e2e = try await EndToEnd()
            let cloud = try await CloudStandIn()
            let relay = try Self.startRelay(e2e, cloud)
            #expect(try Self.register(relay) == 200)
            // Reads for pauses already on the shared server (the first listing's) are done before the throttle.
            try waitUntil("the first listing's reads are done", timeout: 20) {
                guard try cloud.requests().contains(where: { $0.path == "/flow_runs/filter" }) else { return false }
                let metrics = try relay.http.request("GET", "/metrics", headers: ["Authorization": CloudStandIn.authorization])
                return metrics.body.contains("\nprefect_push_prefect_reads_in_flight 0\n")
            }
            // The run id is known only once the run exists, which can be after the relay has read it: throttle the
            // next run reads, whichever run they are for.
            try cloud.throttle(count: 2, retryAfter: 2, method: "GET", pathPrefix: "/flow_runs/")
            let run = try e2e.runFlow("plain")
            try waitUntil("the alert", timeout: 60) { !e2e.pushes(to: EndToEnd.deviceToken, run: run).isEmpty }
            let reads = try cloud.requests().filter { $0.method == "GET" && $0.path == "/flow_runs/\(run)" }
            #expect(reads.first?.status == 429, "\(reads.map(\.status))")
            #expect(reads.last?.status == 200)
            for (refused, next) in zip(reads, reads.dropFirst()) where refused.status == 429 {
                #expect(next.time - refused.time >= 1.9)  // Retry-After: 2, not the 0.2 s backoff
            }
            #expect(e2e.pushes(to: EndToEnd.deviceToken, run: run).first?.payload["body"]?["url"] == .string(cloud.runLink(run)))
            try e2e.resume(run)
        }

        // MARK: - check

        /// Prefect Cloud over https, trusted through the system roots only (no `PREFECT_CA_FILE`): the test CA is filed
        /// by subject hash in a directory of its own (`SSL_CERT_DIR`), as Debian files its roots, and the events socket
        /// (lws's client TLS context) and the REST reads (the pool's) each find it there when the chain names it.
        @Test func overHTTPSTheRootsComeFromTheHashedDirectory() async throws {
            let e2e = try await EndToEnd()
            let cloud = try await CloudStandIn(tls: true)
            let roots = TestFiles.temporaryDirectory()
            defer { TestFiles.removeTree(roots) }
            let hash = try SystemRootsTests.subjectHash(APNsFixtures.path("ca.pem"))
            try TestFiles.write(roots + "/" + hash + ".0", APNsFixtures.text("ca.pem"))
            var env = Self.environment(e2e, cloud)
            env["SSL_CERT_DIR"] = roots
            let relay = try RelayProcess(environment: env, directory: e2e.directory)
            try waitUntil("the relay subscribes over https", timeout: 30) {
                (try? relay.http.request("GET", "/health").json?["subscribed"]) == .bool(true)
            }
            #expect(try Self.register(relay) == 200)  // authorized by a REST read over https
            let run = try e2e.runFlow("input")
            try waitUntil("the alert", timeout: 60) { !e2e.pushes(to: EndToEnd.deviceToken, run: run).isEmpty }
            let alert = try #require(e2e.pushes(to: EndToEnd.deviceToken, run: run).first)
            #expect(alert.payload["aps"]?["alert"]?["title"] == "Approve the nightly deploy?")  // the context was read
            try e2e.resume(run, input: ["comment": "ship it"])
        }

        /// The same with the test CA filed under a hash that is not its own: both TLS clients refuse the stand-in.
        @Test func overHTTPSARootTheDirectoryDoesNotHoldIsRefused() async throws {
            let e2e = try await EndToEnd()
            let cloud = try await CloudStandIn(tls: true)
            let roots = TestFiles.temporaryDirectory()
            defer { TestFiles.removeTree(roots) }
            try TestFiles.write(roots + "/00000000.0", APNsFixtures.text("ca.pem"))
            var env = Self.environment(e2e, cloud)
            env["SSL_CERT_DIR"] = roots
            let relay = try RelayProcess(environment: env, directory: e2e.directory)
            try waitUntil("the socket's TLS failure is logged", timeout: 30) { relay.process.log.contains("events.") }
            Glibc.sleep(3)
            #expect((try? relay.http.request("GET", "/health").json?["subscribed"]) == .bool(false))
            #expect(try Self.register(relay) != 200)
        }

        @Test func checkAcceptsTheWorkspace() async throws {
            let cloud = try await CloudStandIn()
            let result = try CheckIntegrationTests().check(["PREFECT_API_URL": cloud.root, "PREFECT_API_KEY": CloudStandIn.key])
            for name in ["config", "prefect cloud", "prefect api", "prefect events"] {
                #expect(result.status(of: name) == "ok", "\(name): \(result.output)")
            }
            #expect(result.line("prefect cloud").contains(CloudStandIn.workspace))
            #expect(result.line("prefect cloud").contains(cloud.runLink("<run id>")))
            #expect(result.line("prefect api").contains("PREFECT_API_KEY"))
            #expect(result.line("prefect events").contains("auth_success"))
            #expect(!result.output.contains(CloudStandIn.key))
        }

        /// Check over https trusts what the relay trusts: `PREFECT_CA_FILE` for both the REST read and the events
        /// socket (made by `Wiring`, as the relay's are), and without it neither trusts the stand-in. The roots are
        /// an empty directory, so only the CA file can vouch for it.
        @Test func checkOverHTTPSTrustsThePrefectCAFile() async throws {
            let cloud = try await CloudStandIn(tls: true)
            let roots = TestFiles.temporaryDirectory()
            defer { TestFiles.removeTree(roots) }
            let env = ["PREFECT_API_URL": cloud.root, "PREFECT_API_KEY": CloudStandIn.key, "SSL_CERT_DIR": roots]
            let trusted = try CheckIntegrationTests().check(env.merging(["PREFECT_CA_FILE": APNsFixtures.path("ca.pem")]) { $1 })
            for name in ["prefect api", "prefect events"] {
                #expect(trusted.status(of: name) == "ok", "\(name): \(trusted.output)")
            }
            #expect(trusted.line("prefect events").contains("wss://"))
            let untrusted = try CheckIntegrationTests().check(env)
            #expect(untrusted.code == 1, "\(untrusted.output)")
            for name in ["prefect api", "prefect events"] {
                #expect(untrusted.status(of: name) == "failed", "\(name): \(untrusted.output)")
            }
            #expect(untrusted.line("prefect api").contains("PREFECT_CA_FILE"), "\(untrusted.output)")
        }

        @Test func checkPrintsTheFixForAWrongKey() async throws {
            let cloud = try await CloudStandIn()
            let wrong = "pnu_WrongKeyForTheStandIn0123456789abcd"
            let result = try CheckIntegrationTests().check(["PREFECT_API_URL": cloud.root, "PREFECT_API_KEY": wrong])
            #expect(result.code == 1, "\(result.output)")
            #expect(result.status(of: "prefect cloud") == "ok")
            #expect(result.status(of: "prefect api") == "failed")
            #expect(result.line("prefect api").contains("401"))
            #expect(result.line("prefect api").contains("fix: PREFECT_API_KEY"))
            #expect(result.status(of: "prefect events") == "failed")
            #expect(result.line("prefect events").contains("1008"))
            #expect(result.line("prefect events").contains("service account"))
            #expect(!result.output.contains(wrong))
        }

        @Test func checkRefusesAMalformedWorkspaceRoot() async throws {
            let cloud = try await CloudStandIn()
            let noWorkspace = "http://127.0.0.1:\(cloud.port)/api/accounts/\(CloudStandIn.account)/workspaces/nope"
            let result = try CheckIntegrationTests().check(["PREFECT_API_URL": noWorkspace, "PREFECT_API_KEY": CloudStandIn.key])
            #expect(result.code == 2, "\(result.output)")
            #expect(result.line("config").contains("/api/accounts/<account id>/workspaces/<workspace id>"))
            let both = try CheckIntegrationTests().check(["PREFECT_API_URL": cloud.root, "PREFECT_API_KEY": CloudStandIn.key,
                                                          "PREFECT_API_AUTH_STRING": PrefectServer.authString])
            #expect(both.code == 2)
            #expect(both.line("config").contains("PREFECT_API_KEY") && both.line("config").contains("PREFECT_API_AUTH_STRING"))
            #expect(!both.output.contains(CloudStandIn.key))
        }
    }
}
