import Glibc
import Testing
@testable import Relay

/// `prefect-push health`, the scratch image's HEALTHCHECK: exit 0 only when the relay on PORT answers its liveness
/// route under BASE_PATH; 1 otherwise, a usage or configuration error included (Docker's HEALTHCHECK reserves 2).
@Suite struct HealthCommandTests {
    @Test func answersZeroForALiveRelayAndOneWhereNoneListens() async throws {
        let directory = TestFiles.temporaryDirectory()
        defer { TestFiles.removeTree(directory) }
        let prefect = "http://127.0.0.1:\(TestSocket.freePort())/api"  // nothing there: the relay is alive, not ready
        let relay = try RelayProcess(environment: ["PREFECT_API_URL": prefect, "BASE_PATH": "/push"],
                                     directory: directory)
        defer { relay.process.stop(signal: SIGKILL) }
        let env = ["PREFECT_API_URL": prefect, "BASE_PATH": "/push", "PORT": String(relay.port), "API_BIND": "0.0.0.0"]
        #expect(await exitCode(of: [], env, directory) == 0)
        // The wrong base path is a 404 from a live relay: not this relay's liveness route, so not healthy.
        #expect(await exitCode(of: [], env.merging(["BASE_PATH": ""]) { $1 }, directory) == 1)
        #expect(await exitCode(of: [], env.merging(["PORT": String(TestSocket.freePort())]) { $1 }, directory) == 1)
        #expect(await exitCode(of: ["--verbose"], env, directory) == 1)
        #expect(await exitCode(of: [], env.merging(["PORT": "eighty"]) { $1 }, directory) == 1)
    }

    /// Only PORT, API_BIND and BASE_PATH are read: settings the relay would refuse elsewhere don't stop the probe.
    @Test func probesWhateverTheOtherSettingsSay() async throws {
        let directory = TestFiles.temporaryDirectory()
        defer { TestFiles.removeTree(directory) }
        let prefect = "http://127.0.0.1:\(TestSocket.freePort())/api"
        let relay = try RelayProcess(environment: ["PREFECT_API_URL": prefect], directory: directory)
        defer { relay.process.stop(signal: SIGKILL) }
        let env = ["PORT": String(relay.port), "LOG_LEVEL": "loud", "APNS_KEY_ID": "ABC123DEFG"]
        #expect(await exitCode(of: [], env, directory) == 0)
    }

    private func exitCode(of arguments: [String], _ env: [String: String], _ directory: String) async -> Int32? {
        guard let child = try? ChildProcess(RelayProcess.binary, ["health"] + arguments, environment: env,
                                            logPath: directory + "/health.log") else { return nil }
        var code: Int32?
        await poll(within: 20, every: 0.05) {
            code = child.exitCode()
            return code != nil
        }
        if code == nil { child.stop(signal: SIGKILL) }
        return code
    }
}
