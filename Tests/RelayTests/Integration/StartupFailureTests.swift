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
}
