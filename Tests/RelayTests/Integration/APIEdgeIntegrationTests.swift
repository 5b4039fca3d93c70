import Glibc
import Testing
@testable import Relay
@testable import RelayCore

extension SharedPrefect {
    /// The API edge against the real relay binary (issue 11): hostile bytes get the relay's JSON and a 4xx, path
    /// tricks reach no device, slow heads are cut off, and the registry has a cap.
    @Suite(.serialized) struct APIEdgeIntegrationTests {
        static let good = "Basic " + Base64.encode(Array(PrefectServer.authString.utf8))
        static let token = String(repeating: "0f", count: 32)

        func startRelay(_ extra: [String: String] = [:]) async throws -> RelayProcess {
            let api = try await PrefectServer.shared.apiURL()
            var env = ["PREFECT_API_URL": api, "PREFECT_API_AUTH_STRING": PrefectServer.authString, "BASE_PATH": "/push"]
            env.merge(extra) { $1 }
            return try RelayProcess(environment: env)
        }

        func register(_ http: TestHTTP, id: String) throws -> TestHTTP.Reply {
            let body: JSONValue = ["id": .string(id), "token": .string(Self.token), "environment": "development",
                                   "server_id": "home"]
            return try http.request("POST", "/push/devices", headers: ["Authorization": Self.good], body: body.encoded())
        }

        func ids(_ relay: RelayProcess) throws -> [String] {
            try Store(path: relay.directory + "/relay.db").allDevices().map(\.id).sorted()
        }

        @Test func hostileRequestsAre4xxJSONAndChangeNothing() async throws {
            let relay = try await startRelay()
            let http = relay.http
            #expect(try register(http, id: "keep").status == 200)
            let auth = "Authorization: \(Self.good)\r\n"
            let battery: [([UInt8], Int)] = [
                (Array("garbage\r\n\r\n".utf8), 400),
                (Array("GET /push/health HTTP/9.9\r\n\r\n".utf8), 505),
                (Array("get /push/health HTTP/1.1\r\n\r\n".utf8), 405),
                (Array("BREW /push/devices HTTP/1.1\r\n\r\n".utf8), 405),
                (Array("GET /push/health HTTP/1.1\r\nX: \(String(repeating: "a", count: 65_536))\r\n\r\n".utf8), 431),
                (Array(("GET /push/health HTTP/1.1\r\n" + String(repeating: "X: y\r\n", count: 600) + "\r\n").utf8), 431),
                ([0, 255, 254, 13, 10, 13, 10], 400),
                (Array("DELETE /push/devices/keep/ HTTP/1.1\r\n\(auth)\r\n".utf8), 404),
                (Array("DELETE /push/devices/x/../keep HTTP/1.1\r\n\(auth)\r\n".utf8), 404),
                (Array("DELETE /push/devices/%2e/keep HTTP/1.1\r\n\(auth)\r\n".utf8), 404),
                (Array("DELETE /push/devices/keep%2F HTTP/1.1\r\n\(auth)\r\n".utf8), 404),
                (Array("POST /push/devices/keep//test HTTP/1.1\r\n\(auth)\r\n".utf8), 404),
                (Array("DELETE /push/devices/%E2%80%AEkeep HTTP/1.1\r\n\(auth)\r\n".utf8), 400),
                (Array("DELETE /push/devices/keep HTTP/1.1\r\nAuthorization: Basic a\u{1}b\r\n\r\n".utf8), 400),
                (Array("DELETE /push/devices/keep HTTP/1.1\r\nAuthorization: Basic \u{E9}\r\n\r\n".utf8), 400),
                (Array("POST /push/devices HTTP/1.1\r\n\(auth)Content-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"id\":[".utf8), 400),
                (Array("POST /push/devices HTTP/1.1\r\n\(auth)Content-Type: application/json\r\nContent-Length: 65537\r\n\r\n".utf8), 413),
                (Array("POST /push/devices HTTP/1.1\r\n\(auth)Content-Type: application/json\r\nContent-Length: 4\r\n\r\n\"\u{0}\"x".utf8), 400),
                (Array(("POST /push/devices HTTP/1.1\r\n\(auth)Content-Type: application/json\r\nContent-Length: 4000\r\n\r\n"
                        + String(repeating: "[", count: 4000)).utf8), 400),
            ]
            for (bytes, expected) in battery {
                let reply = try http.raw(bytes)
                #expect(reply.status == expected, "\(String(decoding: bytes.prefix(60), as: UTF8.self).debugDescription)")
                #expect(reply.json?["error"]?.string != nil)
                #expect(reply.headers["content-type"] == "application/json")
            }
            // An id with % or / is addressable once percent-encoded.
            #expect(try register(http, id: "100%/x").status == 200)
            #expect(try http.request("DELETE", "/push/devices/100%25%2Fx", headers: ["Authorization": Self.good]).status == 204)
            #expect(try ids(relay) == ["keep"])
            #expect(try http.request("GET", "/push/health").status == 200)
        }

        @Test func webSocketUpgradeIsNotAccepted() async throws {
            let relay = try await startRelay()
            let reply = try relay.http.request("GET", "/push/health", headers: [
                "Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
                "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Protocol": "prefect",
            ])
            #expect(reply.status == 200)  // answered as plain HTTP, never 101
            #expect(reply.headers["upgrade"] == nil)
        }

        @Test func slowHeadsAreCutOffAndDoNotBlockOthers() async throws {
            let relay = try await startRelay()
            var slow: [Int32] = []
            defer { slow.forEach { close($0) } }
            for _ in 0..<200 {
                let fd = try TestSocket.connect(port: relay.port)
                try TestSocket.send(fd, Array("GET /push/health HTTP/1.1\r\nX-Slow: ".utf8))
                slow.append(fd)
            }
            let started = SystemClock.monotonic()
            // Answered within 2 s, while the 200 heads stay open until their 5 s deadline: a server that served
            // heads one at a time, or ran out of room for them, would time this request out.
            #expect(try relay.http.request("GET", "/push/health", timeout: 2).status == 200)
            // The header deadline (5 s) closes every slow connection, even one that keeps sending.
            let trickle = slow[0]
            let deadline = SystemClock.monotonic() + 8
            var closedAfter: Double?
            while SystemClock.monotonic() < deadline && closedAfter == nil {
                _ = send(trickle, "a", 1, Int32(MSG_NOSIGNAL))
                var pfd = pollfd(fd: trickle, events: Int16(POLLIN), revents: 0)
                if poll(&pfd, 1, 500) > 0 {
                    var byte: UInt8 = 0
                    if recv(trickle, &byte, 1, 0) <= 0 { closedAfter = SystemClock.monotonic() - started }
                }
            }
            #expect(closedAfter != nil && closedAfter! <= 7, "closed after \(closedAfter ?? -1) s")
        }

        @Test func registryIsCapped() async throws {
            let relay = try await startRelay(["MAX_DEVICES": "2"])
            #expect(try register(relay.http, id: "a").status == 200)
            #expect(try register(relay.http, id: "b").status == 200)
            let third = try register(relay.http, id: "c")
            #expect(third.status == 409)
            #expect(third.json?["error"]?.string?.contains("MAX_DEVICES") == true)
            #expect(try register(relay.http, id: "a").status == 200)  // a refresh still passes
            #expect(try ids(relay) == ["a", "b"])
        }

        @Test func unusablePrefectCAFileStopsStartup() throws {
            let dir = TestFiles.temporaryDirectory()
            defer { TestFiles.removeTree(dir) }
            let child = try ChildProcess(RelayProcess.binary, [], environment: [
                "PREFECT_API_URL": "https://127.0.0.1:1/api", "PREFECT_CA_FILE": dir + "/missing.pem", "PORT": "0",
                "DB_PATH": dir + "/x.db",
            ], logPath: dir + "/a.log")
            #expect(child.waitForExit(timeout: 10) == 2)
            #expect(child.log.contains("PREFECT_CA_FILE"))
        }
    }
}
