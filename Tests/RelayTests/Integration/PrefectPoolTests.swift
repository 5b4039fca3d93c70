import Testing
@testable import Relay
@testable import RelayCore

extension SharedPrefect {
    /// The connection pool against a real Prefect server (uvicorn): reads reuse connections, concurrent reads stay
    /// within the pool's limit, and connections the server closes when idle (uvicorn's keep-alive timeout, 5 s by
    /// default) are replaced without the caller noticing. The pool reaches Prefect through a `CountingForwarder`,
    /// which counts the connections it opens.
    @Suite(.serialized) struct PrefectPoolTests {
        struct Setup {
            let prefect: PrefectClient
            let pool: HTTPPool
            let forwarder: CountingForwarder

            func close() {
                pool.close()
                forwarder.stop()
            }
        }

        func client(maxConnections: Int = 6, extraConnections: Int = 6) async throws -> Setup {
            let api = try HTTPURL.parse(try await PrefectServer.shared.apiURL(), variable: "PREFECT_API_URL")
            let forwarder = try CountingForwarder(to: api.port)
            let url = HTTPURL(tls: false, host: "127.0.0.1", port: forwarder.port, path: api.path).string
            let config = try Config(environment: ["PREFECT_API_URL": url, "PREFECT_API_AUTH_STRING": PrefectServer.authString])
            var options = HTTPPool.Options()
            options.maxConnectionsPerHost = maxConnections
            options.extraConnectionsPerHost = extraConnections
            let pool = try HTTPPool(options: options)
            return Setup(prefect: PrefectClient(config: config, http: pool), pool: pool, forwarder: forwarder)
        }

        func isCount(_ result: Result<HTTPReply, HTTPFailure>) -> Bool {
            guard case .success(let reply) = result, reply.status == 200 else { return false }
            return (try? JSONParser.parse(reply.body))?.int != nil
        }

        @Test func sequentialReadsOpenOneConnection() async throws {
            let setup = try await client()
            defer { setup.close() }
            let prefect = setup.prefect
            for _ in 0..<20 {
                #expect(isCount(await prefect.json("POST", "/flows/count", body: [:])))
                if case .failed(let why) = await prefect.read("/flow_runs/00000000-0000-0000-0000-000000000000") {
                    Issue.record("read failed: \(why)")
                }
            }
            #expect(setup.forwarder.accepted == 1)
            // The credential check goes the same way.
            #expect(try await prefect.checkCredential(PrefectServer.authorization).get() == 200)
            #expect(try await prefect.checkCredential("Basic " + Base64.encode(Array("admin:wrong".utf8))).get() == 401)
            #expect(setup.forwarder.accepted == 1)
        }

        @Test func concurrentReadsStayWithinThePool() async throws {
            // The normal size alone: a loaded machine's Prefect can be slow enough (200 ms) to add connections.
            let setup = try await client(maxConnections: 3, extraConnections: 0)
            defer { setup.close() }
            let prefect = setup.prefect
            for round in 0..<3 {
                let results = await withTaskGroup(of: Bool.self) { group in
                    for _ in 0..<15 {
                        group.addTask { self.isCount(await prefect.json("POST", "/flows/count", body: [:])) }
                    }
                    return await group.reduce(into: [Bool]()) { $0.append($1) }
                }
                #expect(results == Array(repeating: true, count: 15), "round \(round)")
                #expect(setup.forwarder.accepted <= 3, "round \(round)")
            }
        }

        @Test func idleConnectionsClosedByTheServerAreReplaced() async throws {
            let setup = try await client()
            defer { setup.close() }
            let prefect = setup.prefect
            #expect(isCount(await prefect.json("POST", "/flows/count", body: [:])))
            #expect(setup.forwarder.accepted == 1)
            // Past uvicorn's keep-alive timeout (5 s) the server closes our idle connection.
            try await eventually("the server closed the idle connection", within: 60) { setup.forwarder.closed == 1 }
            for _ in 0..<3 { #expect(isCount(await prefect.json("POST", "/flows/count", body: [:]))) }
            #expect(setup.forwarder.accepted == 2)
        }
    }
}
