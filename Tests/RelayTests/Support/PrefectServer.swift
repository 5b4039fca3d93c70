import Testing
import Glibc
@testable import Relay
@testable import RelayCore

/// A real Prefect server (`prefect server start`, SQLite) on a free 127.0.0.1 port, with basic auth on.
/// `shared` is one per test process, started on first use; tests that restart a server make their own.
/// Every server is killed when the tests exit. Needs the venv from `make deps` (or PREFECT_BIN).
actor PrefectServer {
    static let shared = PrefectServer()
    static let authString = "admin:pass"
    static var authorization: String { "Basic " + Base64.encode(Array(authString.utf8)) }

    let port: Int
    let home: String
    private var process: ChildProcess?
    /// The auth string it runs with (`PREFECT_SERVER_API_AUTH_STRING`): `authString` unless `rotate(to:)` changed it.
    private let credential = Locked(PrefectServer.authString)

    init() {
        port = TestSocket.freePort()
        home = TestFiles.temporaryDirectory()
    }

    /// The credential it takes now, as a client's `PREFECT_API_AUTH_STRING` and as an `Authorization` header.
    nonisolated var currentAuthString: String { credential.withLock { $0 } }
    nonisolated var currentAuthorization: String { "Basic " + Base64.encode(Array(currentAuthString.utf8)) }

    /// Stops the server and starts it again on the same port and database, taking only `authString` from then on.
    func rotate(to authString: String) async throws {
        stop()
        credential.withLock { $0 = authString }
        _ = try await apiURL()
    }

    static var binary: String {
        RelayMain.environment()["PREFECT_BIN"] ?? TestFiles.packageRoot + "/.venv/bin/prefect"
    }

    /// The venv's python, beside `prefect`.
    static var python: String {
        var parts = binary.split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast()
        return parts.joined(separator: "/") + "/python"
    }

    var url: String { "http://127.0.0.1:\(port)/api" }

    /// The API root, e.g. http://127.0.0.1:PORT/api; starts the server if it isn't running. Waits without blocking a
    /// thread: the first suites all ask at once, and a start that held one of the cooperative pool's two threads (for
    /// half a minute under ThreadSanitizer) stalled every async test beside it. Callers that come while it starts
    /// wait for that start.
    func apiURL() async throws -> String {
        if process != nil { return url }
        if let starting { return try await starting.value }
        let start = Task { try await self.start() }
        starting = start
        defer { starting = nil }
        return try await start.value
    }

    private var starting: Task<String, any Error>?

    private func start() async throws -> String {
        guard access(PrefectServer.binary, X_OK) == 0 else {
            throw TestFailure("no Prefect at \(PrefectServer.binary): run `make deps` (or set PREFECT_BIN)")
        }
        var env = RelayMain.environment()
        env["PREFECT_HOME"] = home
        env["PREFECT_SERVER_API_AUTH_STRING"] = currentAuthString
        env["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
        env["PREFECT_UI_ENABLED"] = "false"
        env["PREFECT_SERVER_UI_ENABLED"] = "false"
        env["PREFECT_SERVER_LOGGING_LEVEL"] = "WARNING"
        let started = try ChildProcess(PrefectServer.binary, ["server", "start", "--host", "127.0.0.1", "--port", String(port)],
                                       environment: env, logPath: home + "/server.log")
        let http = TestHTTP(port: port)
        var healthy = false
        // Until it answers, or has died.
        await poll(within: 120, every: 0.3) {
            healthy = (try? http.request("GET", "/api/health", timeout: 2))?.status == 200
            return healthy || started.waitForExit(timeout: 0) != nil
        }
        if healthy {
            process = started
            return url
        }
        started.stop(signal: SIGKILL)
        throw TestFailure("Prefect did not become healthy in 120 s: \(started.log.suffix(2000))")
    }

    /// Stops the server (its database stays in `home`, so `apiURL()` brings the same server back).
    func stop() {
        process?.stop(signal: SIGTERM, timeout: 20)
        process = nil
    }

    /// A REST call with the server's credential.
    /// One REST call as the tests' own client. Prefect's SQLite answers 503 ("database is locked") under load, as
    /// the relay knows; the tests wait it out too (bounded), so a busy machine doesn't fail them.
    nonisolated func call(_ method: String, _ path: String, body: JSONValue? = nil) throws -> TestHTTP.Reply {
        var reply: TestHTTP.Reply?
        try poll(timeout: 3, every: 0.3) {
            reply = try TestHTTP(port: port).request(method, "/api" + path, headers: ["Authorization": currentAuthorization],
                                                     body: body?.encoded())
            return reply?.status != 503
        }
        return reply!
    }
}


/// The relay binary (`prefect-push`, built beside the tests) run as a child process on a free port.
final class RelayProcess: @unchecked Sendable {
    let process: ChildProcess
    let port: Int
    let directory: String
    var http: TestHTTP { TestHTTP(port: port) }

    static var binary: String {
        // The test bundle lives beside the product in the build directory.
        var exe = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/self/exe", &exe, exe.count - 1)
        let path = n > 0 ? String(decoding: exe[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
        var parts = path.split(separator: "/", omittingEmptySubsequences: false)
        while let last = parts.last, !last.hasSuffix(".xctest") && parts.count > 1 { parts.removeLast() }
        parts.removeLast()
        return parts.joined(separator: "/") + "/prefect-push"
    }

    /// Starts the relay with `environment` (PORT and DB_PATH filled in when absent) and waits for /health/live.
    /// A free port picked here can be taken by another process before the relay binds it: then it tries another.
    init(environment: [String: String], directory: String? = nil, waitForHealth: Bool = true) throws {
        self.directory = directory ?? TestFiles.temporaryDirectory()
        var env = environment
        let pickPort = env["PORT"] == nil
        if env["DB_PATH"] == nil { env["DB_PATH"] = self.directory + "/relay.db" }
        var attempt = 0
        while true {
            attempt += 1
            if pickPort { env["PORT"] = String(TestSocket.freePort()) }
            let port = Int(env["PORT"]!)!
            let process = try ChildProcess(RelayProcess.binary, [], environment: env, logPath: self.directory + "/relay.log")
            guard waitForHealth else {
                (self.port, self.process) = (port, process)
                return
            }
            switch RelayProcess.waitForHealth(process, port: port, base: env["BASE_PATH"] ?? "") {
            case .up:
                (self.port, self.process) = (port, process)
                return
            case .portTaken where pickPort && attempt < 4:
                continue
            case .portTaken, .down:
                process.stop(signal: SIGKILL)
                throw TestFailure("the relay did not answer /health: \(process.log.suffix(2000))")
            }
        }
    }

    private enum Health { case up, portTaken, down }

    private static func waitForHealth(_ process: ChildProcess, port: Int, base: String) -> Health {
        var health = Health.down
        poll(timeout: 20, every: 0.05) {
            // Liveness, not the verdict: a relay started against a refused credential answers /health with 503.
            if let reply = try? TestHTTP(port: port).request("GET", base + "/health/live", timeout: 2), reply.status == 200 {
                health = .up
                return true
            }
            guard process.waitForExit(timeout: 0) != nil else { return false }
            health = process.log.contains("could not listen on port") ? .portTaken : .down
            return true
        }
        return health
    }

    /// SIGTERM and a bounded wait. A relay that died of a signal, exited non-zero, or did not stop within 10 s of
    /// SIGTERM fails the running test: a crash must never pass for a clean stop. Tests that expect another ending
    /// read it with `process.waitForExit` or `process.stop` themselves.
    func stop(sourceLocation: SourceLocation = #_sourceLocation) {
        let code = process.stop(signal: SIGTERM, timeout: 10)
        if code != 0 {
            Issue.record("the relay ended with \(describeExit(code)); its log ends: \(process.log.suffix(1500))",
                         sourceLocation: sourceLocation)
        }
    }

    /// One still running is stopped, and judged, as `stop()` does; one that ended by itself is judged too (a test
    /// that expected its exit has read the code, and a read code is not judged again).
    deinit {
        if !process.endingWasRead { stop() }
    }
}

/// The suites that run relays against the one shared Prefect server, one after another: a relay sees every run
/// on the server, so a pause made by one suite would otherwise reach another suite's phones.
@Suite(.serialized) enum SharedPrefect {}
