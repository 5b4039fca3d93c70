import Glibc
@testable import Relay
@testable import RelayCore

/// `tools/cloud_standin.py` in front of the shared Prefect server: a Prefect Cloud workspace on 127.0.0.1 (Bearer
/// key on REST, the key as the socket's auth token, 429 on demand). One per test; killed with it.
final class CloudStandIn: @unchecked Sendable {
    static let key = "pnu_StandInTestKey0123456789abcdefABCDEF"
    static let account = "9a1c2b3d-4e5f-4a6b-8c7d-0e1f2a3b4c5d"
    static let workspace = "1f2e3d4c-5b6a-4978-8a9b-0c1d2e3f4a5b"
    static var authorization: String { "Bearer " + key }

    let process: ChildProcess
    let directory = TestFiles.temporaryDirectory()
    /// The workspace's API root, `http://127.0.0.1:<port>/api/accounts/<account>/workspaces/<workspace>`.
    let root: String
    let port: Int

    /// `tls`: served over https with the test CA's server certificate (`Fixtures/apns/server.pem`), as Cloud is;
    /// the control calls below are plain http and don't reach it then.
    init(prefect: PrefectServer = .shared, tls: Bool = false) async throws {
        let upstream = try await prefect.apiURL()
        let urlFile = directory + "/url"
        let tlsArguments = tls ? ["--tls-cert", APNsFixtures.path("server.pem"), "--tls-key", APNsFixtures.path("server.key")] : []
        process = try ChildProcess(PrefectServer.python, [
            TestFiles.packageRoot + "/tools/cloud_standin.py", "--upstream", upstream,
            "--upstream-auth", PrefectServer.authString, "--key", Self.key, "--port", "0",
            "--account", Self.account, "--workspace", Self.workspace, "--url-file", urlFile,
        ] + tlsArguments, environment: RelayMain.environment(), logPath: directory + "/standin.log")
        var url = ""
        let started = process
        try waitUntil("the Cloud stand-in listens", timeout: 20) {
            if started.waitForExit(timeout: 0) != nil { throw TestFailure("the stand-in exited: \(started.log)") }
            url = (try? TestFiles.read(urlFile)) ?? ""
            return url.hasPrefix(tls ? "https://" : "http://")
        }
        root = url
        // http(s)://127.0.0.1:PORT/api/...
        let authority = url.drop { $0 != "/" }.dropFirst(2).prefix { $0 != "/" }
        guard let parsed = Int(authority.split(separator: ":").last ?? "") else { throw TestFailure("stand-in url \(url)") }
        port = parsed
    }

    deinit { process.stop(signal: SIGKILL, timeout: 5) }

    /// The Cloud UI's page for `run`, as Prefect derives it from this root (the host is kept: it isn't api.prefect…).
    func runLink(_ run: String) -> String {
        "http://127.0.0.1:\(port)/account/\(Self.account)/workspace/\(Self.workspace)/runs/flow-run/\(run)"
    }

    /// The next `count` workspace requests (with `method`, and `path` or a path under `pathPrefix` after the
    /// workspace prefix, when given)
    /// answer 429 with `Retry-After: retryAfter`.
    func throttle(count: Int, retryAfter: Int, method: String? = nil, path: String? = nil, pathPrefix: String? = nil)
        throws
    {
        var spec: [String: JSONValue] = ["count": .int(Int64(count)), "retry_after": .int(Int64(retryAfter))]
        if let method { spec["method"] = .string(method) }
        if let path { spec["path"] = .string(path) }
        if let pathPrefix { spec["path_prefix"] = .string(pathPrefix) }
        let reply = try TestHTTP(port: port).request("POST", "/_standin/throttle", body: JSONValue.object(spec).encoded())
        guard reply.status == 200 else { throw TestFailure("throttle: \(reply.status) \(reply.body)") }
    }

    struct Request {
        var time: Double
        var method: String
        var path: String
        var status: Int
    }

    /// Every workspace REST request served so far, in order.
    func requests() throws -> [Request] {
        try stats()["requests"]?.array?.compactMap { item in
            guard let time = item["t"]?.double, let method = item["method"]?.string, let path = item["path"]?.string,
                  let status = item["status"]?.int else { return nil }
            return Request(time: time, method: method, path: path, status: Int(status))
        } ?? []
    }

    /// Every events socket opened so far: `accepted` is true (the key), false (close 1008) or null (no auth yet).
    func sockets() throws -> [JSONValue] { try stats()["sockets"]?.array ?? [] }

    private func stats() throws -> JSONValue {
        let reply = try TestHTTP(port: port).request("GET", "/_standin/stats")
        guard reply.status == 200, let json = reply.json else { throw TestFailure("stats: \(reply.status) \(reply.body)") }
        return json
    }
}
