import Glibc
import Testing
@testable import Relay
@testable import RelayCore

/// The listeners bind exactly the address they are given, or start-up fails naming the setting. Under a sandbox
/// that refuses netlink sockets (systemd's `RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX`), libwebsockets 4.1.6
/// could not look the address up with getifaddrs and bound every interface, while `relay.started` named the address
/// asked for. The relay here runs under `Fixtures/preload/no-netlink.c`, which refuses AF_NETLINK the same way
/// (seccomp), and what it listens on is read from the kernel: its sockets in `/proc/<pid>/net/tcp`.
@Suite struct ListenerBindTests {
    @Test func withoutNetlinkTheListenersBindOnlyTheAskedAddress() throws {
        let directory = TestFiles.temporaryDirectory()
        defer { TestFiles.removeTree(directory) }
        var environment = [
            "PREFECT_API_URL": "http://127.0.0.1:\(TestSocket.freePort())/api", "DB_PATH": directory + "/relay.db",
            "PORT": "0", "API_BIND": "127.0.0.1", "METRICS_PORT": "0", "METRICS_BIND": "127.0.0.1",
        ]
        environment.merge(try Self.noNetlink(in: directory)) { $1 }
        let relay = try ChildProcess(RelayProcess.binary, [], environment: environment, logPath: directory + "/relay.log")
        defer { relay.stop(signal: SIGKILL) }
        var ended: Int32?
        try waitUntil("the relay starts or exits", timeout: 20) {
            ended = relay.waitForExit(timeout: 0)
            return ended != nil || relay.log.contains("event=relay.started")
        }
        if let ended {
            // Refusing to start is the other right answer, as long as it says which setting and exits 2.
            #expect(ended == 2, "\(describeExit(ended)): \(relay.log.suffix(1500))")
            #expect(relay.log.contains("METRICS_BIND") || relay.log.contains("API_BIND"), "\(relay.log.suffix(1500))")
            return
        }
        // The filter is on in the relay itself, so getifaddrs would fail there.
        #expect(try TestFiles.read("/proc/\(relay.pid)/status").contains("Seccomp:\t2"))
        let listening = try Self.listeningSockets(of: relay.pid)
        #expect(listening.count == 2, "\(listening)")
        for socket in listening {
            #expect(socket.address == "127.0.0.1", "a listener is bound to \(socket.address):\(socket.port)")
        }
        let started = relay.log.split(separator: "\n").first { $0.contains("event=relay.started") } ?? ""
        for socket in listening {
            #expect(started.contains(" port=\(socket.port) ") || started.contains(" metrics=127.0.0.1:\(socket.port)"),
                    "\(started)")
        }
        if let api = listening.first(where: { started.contains(" port=\($0.port) ") }) {
            #expect(try TestHTTP(port: api.port).request("GET", "/health/live").status == 200)
        }
        #expect(relay.stop(signal: SIGTERM) == 0, "\(relay.log.suffix(1500))")
    }

    /// An address that is not this machine's stops start-up, naming the setting (lws 4.1.6 only logged "DOESN'T
    /// EXIST" for an iface it could not find, and ran on without a listener).
    @Test(arguments: ["API_BIND", "METRICS_BIND"])
    func aForeignAddressExits2NamingTheSetting(_ variable: String) throws {
        let directory = TestFiles.temporaryDirectory()
        defer { TestFiles.removeTree(directory) }
        let environment = [
            "PREFECT_API_URL": "http://127.0.0.1:\(TestSocket.freePort())/api", "DB_PATH": directory + "/relay.db",
            "PORT": "0", "METRICS_PORT": "0", variable: "192.0.2.1",  // TEST-NET-1: never a local address
        ]
        let relay = try ChildProcess(RelayProcess.binary, [], environment: environment, logPath: directory + "/relay.log")
        let code = relay.waitForExit(timeout: 20)
        if code == nil { relay.stop(signal: SIGKILL) }
        #expect(code == 2, "\(describeExit(code)): \(relay.log.suffix(1500))")
        #expect(relay.log.contains("event=startup.failed error=\"\(variable): could not listen on port 0 of 192.0.2.1: "
                                   + "192.0.2.1 is not an address of this machine"), "\(relay.log.suffix(1500))")
    }

    @Test func apiBindIsReadLikeMetricsBind() throws {
        let base = ["PREFECT_API_URL": "http://127.0.0.1:4200/api"]
        #expect(try Config(environment: base).apiBind == "0.0.0.0")
        for name in ["API_BIND", "METRICS_BIND"] {
            func read(_ value: String) throws -> String {
                let config = try Config(environment: base.merging([name: value]) { $1 })
                return name == "API_BIND" ? config.apiBind : config.metricsBind
            }
            // Canonical text: what the listener binds and what `relay.started` prints.
            for (value, read_) in [(" 127.0.0.1 ", "127.0.0.1"), ("10.1.255.0", "10.1.255.0"), ("::", "::"),
                                   ("::1", "::1"), ("[::1]", "::1"), ("0:0:0:0:0:0:0:0", "::"),
                                   ("2001:DB8::1", "2001:db8::1"), ("::ffff:127.0.0.1", "127.0.0.1")] {
                #expect(try read(value) == read_, "\(name)=\(value)")
            }
            // inet_pton reads none of these as an address (a sign or a leading zero included).
            for value in ["localhost", "1.2.3.256", "1.2.3", "1.2.3.4.5", "1..2.3", "+1.2.3.4", "01.2.3.4", ":::",
                          "fe80::1%eth0", "[::1", "::1]:80"] {
                #expect(throws: ConfigError.self, "\(name)=\(value)") { _ = try read(value) }
            }
        }
        let zone = try? Config(environment: base.merging(["API_BIND": "fe80::1%eth0"]) { $1 })
        #expect(zone == nil)
        #expect(Settings.all.contains { $0.name == "API_BIND" && $0.meaning.contains("IPv6") })
    }

    // MARK: - Helpers

    /// The preload that refuses netlink sockets, built here with the system C compiler, as the relay's environment.
    static func noNetlink(in directory: String) throws -> [String: String] {
        let library = directory + "/no-netlink.so"
        let source = TestFiles.packageRoot + "/Tests/RelayTests/Fixtures/preload/no-netlink.c"
        let compiler = access("/usr/bin/cc", X_OK) == 0 ? "/usr/bin/cc" : "/usr/bin/gcc"
        let build = try ChildProcess(compiler, ["-shared", "-fPIC", "-O2", "-o", library, source],
                                     environment: ["PATH": "/usr/bin:/bin"], logPath: directory + "/cc.log")
        guard build.waitForExit(timeout: 60) == 0 else { throw TestFailure("could not build no-netlink.so: \(build.log)") }
        var environment = ["LD_PRELOAD": library]
        // An ASan relay would refuse a preload ahead of its runtime.
        if let asan = getenv("ASAN_OPTIONS") { environment["ASAN_OPTIONS"] = String(cString: asan) + ":verify_asan_link_order=0" }
        return environment
    }

    struct Listening: Equatable {
        var address: String
        var port: Int
    }

    /// The TCP sockets `pid` listens on, from the kernel's tables: its descriptors' socket inodes matched against
    /// `/proc/<pid>/net/tcp` and `tcp6` (an IPv6 listener shows as its own address text).
    static func listeningSockets(of pid: pid_t) throws -> [Listening] {
        var inodes: Set<String> = []
        guard let dir = opendir("/proc/\(pid)/fd") else { throw TestFailure("cannot read /proc/\(pid)/fd") }
        defer { closedir(dir) }
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            var target = [CChar](repeating: 0, count: 256)
            let count = readlink("/proc/\(pid)/fd/\(name)", &target, target.count - 1)
            guard count > 0 else { continue }
            let link = String(decoding: target[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if link.hasPrefix("socket:[") { inodes.insert(String(link.dropFirst(8).dropLast())) }
        }
        var found: [Listening] = []
        for table in ["tcp", "tcp6"] {
            for line in try TestFiles.read("/proc/\(pid)/net/\(table)").split(separator: "\n").dropFirst() {
                // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
                let fields = line.split(separator: " ")
                guard fields.count > 9, fields[3] == "0A", inodes.contains(String(fields[9])) else { continue }
                let local = fields[1].split(separator: ":")
                guard local.count == 2, let port = Int(local[1], radix: 16) else { continue }
                found.append(Listening(address: table == "tcp" ? dotted(String(local[0])) : "[\(local[0])]", port: port))
            }
        }
        return found
    }

    /// `/proc/net/tcp`'s address: the 32-bit value as the host reads it, in hex (little-endian here).
    static func dotted(_ hex: String) -> String {
        guard let value = UInt32(hex, radix: 16) else { return hex }
        return [0, 8, 16, 24].map { String((value >> UInt32($0)) & 0xff) }.joined(separator: ".")
    }
}
