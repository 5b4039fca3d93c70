import Glibc
import Testing
@testable import FakeAPNs
@testable import Relay
@testable import RelayCore

/// One end-to-end setup: a real Prefect server, two fake APNs hosts, the relay binary pointed at all of them,
/// and flows from tools/flows.py run by the venv's python. Everything on 127.0.0.1; every wait bounded.
final class EndToEnd: @unchecked Sendable {
    static let deviceToken = String(repeating: "a1", count: 32)
    static let startToken = String(repeating: "b2", count: 32)
    static let activityToken = String(repeating: "c3", count: 32)

    let prefect: PrefectServer
    let api: String
    let production: FakeAPNs
    let development: FakeAPNs
    let directory = TestFiles.temporaryDirectory()
    private(set) var relay: RelayProcess?
    /// Set on top of (and over) `environment`'s settings for the relay.
    var extraEnvironment: [String: String] = [:]
    fileprivate(set) var flows: [ChildProcess] = []

    init(prefect: PrefectServer = .shared, apnsIdentity: FakeAPNs.Identity = .test) async throws {
        self.prefect = prefect
        api = try await prefect.apiURL()
        production = try FakeAPNs(name: "production", identity: apnsIdentity)
        development = try FakeAPNs(name: "development", identity: apnsIdentity)
    }

    deinit {
        flows.forEach { $0.stop(signal: SIGKILL, timeout: 5) }
        production.stop()
        development.stop()
    }

    var environment: [String: String] {
        APNsFixtures.relayEnvironment(production: production.port, development: development.port)
            .merging(["PREFECT_API_URL": api, "PREFECT_API_AUTH_STRING": prefect.currentAuthString,
                      "DB_PATH": directory + "/relay.db", "LOG_LEVEL": "debug"]) { $1 }
            .merging(extraEnvironment) { $1 }
    }

    /// Starts (or restarts) the relay on the same database and waits until it is subscribed.
    @discardableResult
    func startRelay() throws -> RelayProcess {
        relay?.stop()
        let started = try RelayProcess(environment: environment, directory: directory)
        relay = started
        try waitUntil("the relay subscribes", timeout: 30) {
            (try? started.http.request("GET", "/health").json?["subscribed"]) == .bool(true)
        }
        return started
    }

    func stopRelay() {
        relay?.stop()
        relay = nil
    }

    /// Registers the test phone (development environment, with a push-to-start token).
    func registerDevice(serverID: String = "e2e") throws {
        guard let relay else { throw TestFailure("no relay") }
        let body: JSONValue = ["id": "phone", "token": .string(Self.deviceToken), "start_token": .string(Self.startToken),
                               "environment": "development", "server_id": .string(serverID)]
        let reply = try relay.http.request("POST", "/devices", headers: ["Authorization": prefect.currentAuthorization],
                                           body: body.encoded())
        guard reply.status == 200 else { throw TestFailure("register: \(reply.status) \(reply.body)") }
    }

    func registerActivity(runID: String) throws {
        guard let relay else { throw TestFailure("no relay") }
        let reply = try relay.http.request("PUT", "/devices/phone/activities/\(runID)",
                                           headers: ["Authorization": prefect.currentAuthorization],
                                           body: #"{"token":"\#(Self.activityToken)"}"#)
        guard reply.status == 204 else { throw TestFailure("activity: \(reply.status) \(reply.body)") }
    }

    /// Runs one flow from tools/flows.py in the background and returns its run id once the run exists.
    func runFlow(_ kind: String, timeout: Int = 600, environment extra: [String: String] = [:]) throws -> String {
        let idFile = directory + "/run-\(flows.count).id"
        var env = RelayMain.environment()
        env["PREFECT_API_URL"] = api
        env["PREFECT_API_AUTH_STRING"] = prefect.currentAuthString
        env["FLOW_RUN_ID_FILE"] = idFile
        env["PAUSE_TIMEOUT"] = String(timeout)
        env["PREFECT_HOME"] = directory + "/flow-home"
        env.merge(extra) { _, given in given }
        let process = try ChildProcess(PrefectServer.python, [TestFiles.packageRoot + "/tools/flows.py", "run", kind],
                                       environment: env, logPath: directory + "/flow-\(flows.count).log")
        flows.append(process)
        var runID = ""
        try waitUntil("the flow run exists", timeout: 60) {
            runID = (try? TestFiles.read(idFile)) ?? ""
            return runID.count == 36
        }
        return runID
    }

    func waitForState(_ runID: String, type: String, timeout: Double = 60) throws {
        try waitUntil("run \(runID) is \(type)", timeout: timeout) {
            (try? prefect.call("GET", "/flow_runs/\(runID)").json?["state"]?["type"]?.string) == type
        }
    }

    /// Waits until the paused run's input schema row is stored (the flow writes it after its Paused state).
    func waitForInputRows(_ runID: String, timeout: Double = 30) throws {
        try waitUntil("run \(runID)'s input rows are stored", timeout: timeout) {
            let rows = try? prefect.call("POST", "/flow_runs/\(runID)/input/filter", body: ["prefix": "paused", "limit": 10])
            return rows?.json?.array?.contains { $0["key"]?.string?.hasSuffix("-schema") == true } == true
        }
    }

    func resume(_ runID: String, input: JSONValue? = nil) throws {
        let body: JSONValue = input.map { ["run_input": $0] } ?? [:]
        let reply = try prefect.call("POST", "/flow_runs/\(runID)/resume", body: body)
        guard reply.status == 200 || reply.status == 201, reply.json?["status"] == "ACCEPT" else {
            throw TestFailure("resume: \(reply.status) \(reply.body)")
        }
    }

    func cancel(_ runID: String) throws {
        let reply = try prefect.call("POST", "/flow_runs/\(runID)/set_state",
                                     body: ["state": ["type": "CANCELLED", "name": "Cancelled"], "force": true])
        guard reply.status == 200 || reply.status == 201 else { throw TestFailure("cancel: \(reply.status) \(reply.body)") }
    }

    /// Pushes the fake development host received for a token about `run` (the shared Prefect server may hold
    /// other tests' runs, and a fresh relay's backfill sees them too), parsed.
    func pushes(to token: String, run: String) -> [(headers: [String: String], payload: JSONValue)] {
        development.requests(for: token).compactMap { request in
            guard let payload = try? JSONParser.parse(request.body) else { return nil }
            let runID = payload["body"]?["runId"] ?? activityProps(payload)?["runId"]
            return runID == .string(run) ? (request.headers, payload) : nil
        }
    }

    func stopFlows() {
        flows.forEach { $0.stop(signal: SIGKILL, timeout: 5) }
        flows.removeAll()
    }
}

/// The props a Live Activity push carries (a JSON string inside the payload).
func activityProps(_ payload: JSONValue) -> JSONValue? {
    payload["aps"]?["content-state"]?["props"]?.string.flatMap { try? JSONParser.parse($0) }
}

extension EndToEnd {
    /// Serves the `suspended-release` deployment (suspend needs one) and starts a run of it; returns the run id.
    func runSuspendedDeployment() throws -> String {
        var env = RelayMain.environment()
        env["PREFECT_API_URL"] = api
        env["PREFECT_API_AUTH_STRING"] = prefect.currentAuthString
        env["PREFECT_RUNNER_POLL_FREQUENCY"] = "1"
        env["PREFECT_HOME"] = directory + "/flow-home"
        let serve = try ChildProcess(PrefectServer.python, [TestFiles.packageRoot + "/tools/flows.py", "serve"],
                                     environment: env, logPath: directory + "/serve.log")
        flows.append(serve)
        var deploymentID = ""
        try waitUntil("the deployment exists", timeout: 60) {
            deploymentID = (try? prefect.call("GET", "/deployments/name/suspended-release/suspend").json?["id"]?.string) ?? ""
            return !deploymentID.isEmpty
        }
        let created = try prefect.call("POST", "/deployments/\(deploymentID)/create_flow_run", body: [:])
        guard let runID = created.json?["id"]?.string else { throw TestFailure("create_flow_run: \(created.body)") }
        return runID
    }
}
