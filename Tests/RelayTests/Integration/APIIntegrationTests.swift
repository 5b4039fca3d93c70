import Glibc
import Testing
@testable import Relay
@testable import RelayCore

extension SharedPrefect {
    /// The HTTP API against a real Prefect server (basic auth on) and the real relay binary.
    @Suite(.serialized) struct APIIntegrationTests {
        static let good = "Basic " + Base64.encode(Array(PrefectServer.authString.utf8))
        static let token = String(repeating: "0f", count: 32)

        func startRelay(_ extra: [String: String] = [:]) async throws -> RelayProcess {
            let api = try await PrefectServer.shared.apiURL()
            var env = ["PREFECT_API_URL": api, "PREFECT_API_AUTH_STRING": PrefectServer.authString, "BASE_PATH": "/push",
                       "LOG_LEVEL": "debug"]
            env.merge(extra) { $1 }
            return try RelayProcess(environment: env)
        }

        func devices(_ relay: RelayProcess) throws -> [Device] {
            try Store(path: relay.directory + "/relay.db").allDevices()
        }

        func register(_ http: TestHTTP, id: String = "phone-1", auth: String? = good) throws -> TestHTTP.Reply {
            var headers: [String: String] = [:]
            if let auth { headers["Authorization"] = auth }
            let body: JSONValue = ["id": .string(id), "token": .string(Self.token), "environment": "development",
                                   "server_id": "home"]
            return try http.request("POST", "/push/devices", headers: headers, body: body.encoded())
        }

        @Test func credentialIsCheckedByPrefect() async throws {
            let relay = try await startRelay()
            let http = relay.http
            #expect(try register(http).status == 200)
            let wrong = try register(http, auth: "Basic " + Base64.encode(Array("admin:nope".utf8)))
            #expect(wrong.status == 401)
            #expect(wrong.json?["error"]?.string?.isEmpty == false)
            let none = try register(http, auth: nil)
            #expect(none.status == 401)
            // /health needs no credential.
            let health = try http.request("GET", "/push/health")
            #expect(health.status == 200)
            #expect(health.json?["devices"] == 1)
            #expect(!relay.process.log.contains("YWRtaW46cGFzcw"))  // the credential never reaches the log
        }

        @Test func prefectDownIs503() async throws {
            let closed = TestSocket.freePort()
            let relay = try RelayProcess(environment: ["PREFECT_API_URL": "http://127.0.0.1:\(closed)/api", "BASE_PATH": "/push"])
            let reply = try register(relay.http)
            #expect(reply.status == 503)
            #expect(reply.json?["error"]?.string?.contains("Prefect") == true)
            // not cached: still 503, and /health still answers
            #expect(try register(relay.http).status == 503)
            #expect(try relay.http.request("GET", "/push/health").status == 200)
        }

        @Test func everyRouteRoundTrips() async throws {
            let relay = try await startRelay()
            let http = relay.http
            let auth = ["Authorization": Self.good]

            let first = try register(http)
            #expect(first.status == 200)
            #expect(first.json?["id"] == "phone-1")
            #expect(first.json?["token"] == .string(Self.token))
            #expect(first.json?["environment"] == "development")
            #expect(first.json?["server_id"] == "home")
            #expect(first.json?["start_token"] == nil)

            let refreshed: JSONValue = ["id": "phone-1", "token": .string(Self.token), "environment": "production",
                                        "server_id": "home", "start_token": .string(Self.token.uppercased())]
            let second = try http.request("POST", "/push/devices", headers: auth, body: refreshed.encoded())
            #expect(second.status == 200)
            #expect(second.json?["environment"] == "production")
            #expect(second.json?["start_token"] == .string(Self.token))
            #expect(try devices(relay).count == 1)

            let activity = try http.request("PUT", "/push/devices/phone-1/activities/run-1", headers: auth,
                                            body: #"{"token":"\#(Self.token)"}"#)
            #expect(activity.status == 204)
            let unknownActivity = try http.request("PUT", "/push/devices/ghost/activities/run-1", headers: auth,
                                                   body: #"{"token":"\#(Self.token)"}"#)
            #expect(unknownActivity.status == 404)

            let test = try http.request("POST", "/push/devices/phone-1/test", headers: auth)
            #expect(test.status == 503)  // no APNs key configured
            #expect(try http.request("POST", "/push/devices/ghost/test", headers: auth).status == 404)

            let health = try http.request("GET", "/push/health")
            #expect(health.json?["ok"] == true)
            #expect(health.json?["subscribed"]?.bool != nil)
            #expect(health.json?["apns"] == false)
            #expect(health.json?["devices"] == 1)
            #expect(health.json?["waiting"]?.int != nil)  // other tests share the Prefect server

            #expect(try http.request("DELETE", "/push/devices/phone-1", headers: auth).status == 204)
            #expect(try http.request("DELETE", "/push/devices/phone-1", headers: auth).status == 404)
            #expect(try devices(relay).isEmpty)
        }

        @Test func badInputIsA4xxAndChangesNothing() async throws {
            let relay = try await startRelay()
            let http = relay.http
            #expect(try register(http, id: "keep").status == 200)
            let before = try devices(relay)
            let auth = ["Authorization": Self.good]
            let t = Self.token
            let cases: [(String, String, [String: String], String?, Int)] = [
                ("POST", "/push/devices", auth, "{not json", 400),
                ("POST", "/push/devices", auth, "[1,2]", 400),
                ("POST", "/push/devices", auth, "", 400),
                ("POST", "/push/devices", auth, #"{"id":1,"token":"\#(t)","environment":"production","server_id":"s"}"#, 400),
                ("POST", "/push/devices", auth, #"{"id":"keep","token":"\#(t)","environment":"staging","server_id":"s"}"#, 400),
                ("POST", "/push/devices", auth, #"{"id":"keep","token":"xyz!","environment":"production","server_id":"s"}"#, 400),
                ("POST", "/push/devices", auth, #"{"id":"keep","token":"\#(t)0","environment":"production","server_id":"s"}"#, 400),
                ("POST", "/push/devices", auth, #"{"id":"keep","token":"\#(t)","environment":"production"}"#, 400),
                ("POST", "/push/devices", auth, "{\"id\":\"keep\",\"token\":\"\(t)\",\"environment\":\"production\",\"server_id\":\"\u{FF}\"", 400),
                ("POST", "/push/devices", auth.merging(["Content-Type": "text/plain"]) { $1 }, "{}", 415),
                ("PUT", "/push/devices/keep/activities/r", auth, #"{"token":5}"#, 400),
                ("POST", "/push/nothing", auth, "{}", 404),
                ("GET", "/push/devices", auth, nil, 405),
                ("PATCH", "/push/devices/keep", auth, "{}", 405),
                ("DELETE", "/health", auth, nil, 404),
            ]
            for (method, path, headers, body, status) in cases {
                let reply = try http.request(method, path, headers: headers, body: body)
                #expect(reply.status == status, "\(method) \(path) \(body ?? "")")
                #expect(reply.json?["error"]?.string?.isEmpty == false, "\(method) \(path): \(reply.body)")
            }

            // Oversized: refused from the header, before any body is read.
            let big = try http.raw(Array("POST /push/devices HTTP/1.1\r\nHost: x\r\nAuthorization: \(Self.good)\r\nContent-Type: application/json\r\nContent-Length: 70000\r\n\r\n{".utf8))
            #expect(big.status == 413)
            // No length at all.
            let chunked = try http.raw(Array("POST /push/devices HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n2\r\n{}\r\n0\r\n\r\n".utf8))
            #expect(chunked.status == 411)
            // Truncated: promises 100 bytes, sends 10, hangs up. The relay drops the connection and answers others.
            _ = try? http.raw(Array("POST /push/devices HTTP/1.1\r\nHost: x\r\nAuthorization: \(Self.good)\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"id\":\"tr".utf8),
                              closeWrite: true, timeout: 2)
            // A slow sender holding a connection open doesn't stop anyone else.
            let slow = try TestSocket.connect(port: relay.port)
            try TestSocket.send(slow, Array("POST /push/devices HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n{".utf8))
            #expect(try http.request("GET", "/push/health").status == 200)
            close(slow)

            #expect(try devices(relay) == before)
            #expect(try http.request("GET", "/push/health").json?["devices"] == 1)
            #expect(relay.process.waitForExit(timeout: 0) == nil)  // still running
        }

        @Test func badConfigStopsStartupWithExit2() throws {
            let dir = TestFiles.temporaryDirectory()
            defer { TestFiles.removeTree(dir) }
            let missing = try ChildProcess(RelayProcess.binary, [], environment: [:], logPath: dir + "/a.log")
            #expect(missing.waitForExit(timeout: 10) == 2)
            #expect(missing.log.contains("PREFECT_API_URL"))
            let badPort = try ChildProcess(RelayProcess.binary, [], environment: ["PREFECT_API_URL": "http://127.0.0.1:1/api", "PORT": "x"],
                                           logPath: dir + "/b.log")
            #expect(badPort.waitForExit(timeout: 10) == 2)
            #expect(badPort.log.contains("PORT"))
            let badStore = try ChildProcess(RelayProcess.binary, [], environment: ["PREFECT_API_URL": "http://127.0.0.1:1/api",
                                            "DB_PATH": dir + "/no/such/dir/x.db", "PORT": "0"], logPath: dir + "/c.log")
            #expect(badStore.waitForExit(timeout: 10) == 2)
            #expect(badStore.log.contains("DB_PATH"))
        }

        @Test func helpAndVersion() throws {
            let dir = TestFiles.temporaryDirectory()
            defer { TestFiles.removeTree(dir) }
            let help = try ChildProcess(RelayProcess.binary, ["--help"], environment: [:], logPath: dir + "/h.log")
            #expect(help.waitForExit(timeout: 10) == 0)
            for name in Settings.all.map(\.name) { #expect(help.log.contains(name)) }
            let version = try ChildProcess(RelayProcess.binary, ["--version"], environment: [:], logPath: dir + "/v.log")
            #expect(version.waitForExit(timeout: 10) == 0)
            #expect(version.log.hasPrefix("prefect-push "))
            // The test build isn't stamped: --verbose says so rather than listing no library.
            let verbose = try ChildProcess(RelayProcess.binary, ["version", "--verbose"], environment: [:],
                                           logPath: dir + "/vv.log")
            #expect(verbose.waitForExit(timeout: 10) == 0)
            #expect(verbose.log.hasPrefix(BuildInfo.versionLine + "\nlibraries: unknown (not a stamped release build"))
            let unknown = try ChildProcess(RelayProcess.binary, ["--version", "--verbsoe"], environment: [:],
                                           logPath: dir + "/vu.log")
            #expect(unknown.waitForExit(timeout: 10) == 2)
            #expect(unknown.log.contains("--verbsoe"))
        }

        @Test func sigtermExitsCleanly() async throws {
            let relay = try await startRelay()
            #expect(relay.process.stop(signal: SIGTERM) == 0)
            #expect(relay.process.log.contains("relay.stopped"))
        }
    }
}
