import Glibc
@testable import FakeAPNs
@testable import Relay
@testable import RelayCore

/// The scripted Prefect of `make bench` (`bench/peer.py`) as a child process on its own port, so no other test's
/// relay sees its pauses; the test drives it through its `/control/` routes. Python from the project's venv (or
/// PREFECT_BIN's).
enum ScriptedPrefect {
    /// The credential it wants (`Authorization: Basic admin:pass`), as a caller of the relay's API sends it.
    static let credential = "Basic " + Base64.encode(Array("admin:pass".utf8))

    /// A relay's environment pointed at the scripted Prefect on `peer` (with its credential) and at one fake APNs
    /// for both hosts.
    static func relayEnvironment(peer: TestHTTP, apns: FakeAPNs) -> [String: String] {
        APNsFixtures.relayEnvironment(production: apns.port, development: apns.port)
            .merging(["PREFECT_API_URL": "http://127.0.0.1:\(peer.port)/api", "PREFECT_API_AUTH_STRING": "admin:pass"]) { $1 }
    }

    /// Starts it for at most `lifetime` seconds (it exits by itself after that) and waits for `GET /api/health`.
    static func start(directory: String, lifetime: Int = 120) throws -> (ChildProcess, TestHTTP) {
        let env = RelayMain.environment()
        var bin = TestFiles.packageRoot + "/.venv/bin"
        if let prefect = env["PREFECT_BIN"], let slash = prefect.lastIndex(of: "/") { bin = String(prefect[..<slash]) }
        let python = access(bin + "/python", X_OK) == 0 ? bin + "/python" : "/usr/bin/python3"
        let port = TestSocket.freePort()
        let script = TestFiles.packageRoot + "/bench/peer.py"
        let process = try ChildProcess(python, [script, String(port), String(lifetime)], environment: env,
                                       logPath: directory + "/peer.log")
        let http = TestHTTP(port: port)
        do {
            try waitUntil("the scripted Prefect answers", timeout: 15) {
                (try? http.request("GET", "/api/health", timeout: 1).status) == 200
            }
        } catch {
            process.stop(signal: SIGKILL)
            throw error
        }
        return (process, http)
    }
}
