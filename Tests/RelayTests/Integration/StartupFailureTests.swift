import Glibc
import Testing
@testable import Relay
@testable import RelayCore

/// Start-up failures end with one line and exit code 2, not a crash.
@Suite struct StartupFailureTests {
    @Test func portInUseExits2() throws {
        // Hold a listening socket on a free port, then start the relay on it.
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = INADDR_ANY
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && listen(fd, 1) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        try #require(bound)
        let port = Int(UInt16(bigEndian: address.sin_port))

        let directory = TestFiles.temporaryDirectory()
        defer { TestFiles.removeTree(directory) }
        let env = ["PREFECT_API_URL": "http://127.0.0.1:\(TestSocket.freePort())/api", "PORT": String(port),
                   "DB_PATH": directory + "/relay.db"]
        let relay = try ChildProcess(RelayProcess.binary, [], environment: env, logPath: directory + "/relay.log")
        let code = relay.waitForExit(timeout: 20)
        if code == nil { relay.stop(signal: SIGKILL) }
        #expect(code == 2, "\(relay.log)")
        #expect(relay.log.contains("PORT"))
    }

    /// A relay that can start no thread (its user's process limit is already reached: `prlimit --nproc=1` for
    /// `nobody`, whose one process is the relay) exits 2 naming the thread and the fix, never a trap. Needs root to
    /// become `nobody` (root ignores the limit), as CI runs.
    @Test(.enabled(if: getuid() == 0 && access("/usr/bin/setpriv", X_OK) == 0 && access("/usr/bin/prlimit", X_OK) == 0))
    func noThreadForTheRelayExits2() throws {
        let directory = TestFiles.temporaryDirectory()
        defer { TestFiles.removeTree(directory) }
        chmod(directory, 0o777)
        let env = ["PREFECT_API_URL": "http://127.0.0.1:\(TestSocket.freePort())/api", "PORT": "0",
                   "DB_PATH": directory + "/relay.db"]
        let relay = try ChildProcess("/usr/bin/setpriv",
                                     ["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--", "/usr/bin/prlimit",
                                      "--nproc=1:1", "--", RelayProcess.binary],
                                     environment: env, logPath: directory + "/relay.log")
        let code = relay.waitForExit(timeout: 20)
        if code == nil { relay.stop(signal: SIGKILL) }
        #expect(code == 2, "\(relay.log)")
        #expect(relay.log.contains("event=startup.failed error=\"could not start thread "), "\(relay.log)")
        #expect(relay.log.contains("ulimit -u"), "\(relay.log)")
    }

    /// The key's ids with the key's variable misspelt: a half-configured APNs. The relay must not run green and send
    /// nothing: exit 2 naming the missing variable, after a warning that names the setting the misspelt one resembles.
    @Test func halfConfiguredAPNsExits2NamingTheKeyAndTheSlip() throws {
        let directory = TestFiles.temporaryDirectory()
        defer { TestFiles.removeTree(directory) }
        let env = ["PREFECT_API_URL": "http://127.0.0.1:\(TestSocket.freePort())/api", "PORT": "0",
                   "DB_PATH": directory + "/relay.db", "APNS_KEYPATH": directory + "/AuthKey.p8",
                   "APNS_KEY_ID": "ABC123DEFG", "APNS_TEAM_ID": "TEAM123456"]
        let relay = try ChildProcess(RelayProcess.binary, [], environment: env, logPath: directory + "/relay.log")
        let code = relay.waitForExit(timeout: 20)
        if code == nil { relay.stop(signal: SIGKILL) }
        #expect(code == 2, "\(relay.log)")
        #expect(relay.log.contains("APNS_KEY_PATH is not set"), "\(relay.log)")
        #expect(relay.log.contains("event=config.unknown_variable variable=APNS_KEYPATH did_you_mean=APNS_KEY_PATH"),
                "\(relay.log)")
    }

    /// A relay given no APNs setting at all runs (the seed's "runs without a key"), says so, and names a variable one
    /// slip from a setting it reads.
    @Test func noAPNsSettingsRunsAndNamesASlip() throws {
        let directory = TestFiles.temporaryDirectory()
        defer { TestFiles.removeTree(directory) }
        let env = ["PREFECT_API_URL": "http://127.0.0.1:\(TestSocket.freePort())/api", "PORT": "0",
                   "DB_PATH": directory + "/relay.db", "LOGLEVEL": "debug"]
        let relay = try ChildProcess(RelayProcess.binary, [], environment: env, logPath: directory + "/relay.log")
        defer { relay.stop(signal: SIGKILL) }
        try waitUntil("the relay to start", timeout: 20) { relay.log.contains("event=apns.disabled") }
        #expect(relay.log.contains("event=config.unknown_variable variable=LOGLEVEL did_you_mean=LOG_LEVEL"), "\(relay.log)")
        #expect(relay.exitCode() == nil, "the relay stopped: \(relay.log)")
    }
}
