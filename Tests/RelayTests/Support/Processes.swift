import Glibc
@testable import Relay
@testable import RelayCore

/// A child process the tests started; killed on `stop()` or when the test process exits.
final class ChildProcess: @unchecked Sendable {
    let pid: pid_t
    let logPath: String

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34+), which Swift's Glibc module doesn't declare.
    private typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private static let closeFrom: CloseFrom? = dlsym(UnsafeMutableRawPointer(bitPattern: 0),
                                                     "posix_spawn_file_actions_addclosefrom_np")
        .map { unsafeBitCast($0, to: CloseFrom.self) }

    init(_ path: String, _ arguments: [String], environment: [String: String], logPath: String) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, logPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        // Nothing else of the test process's: a listener another test opened without O_CLOEXEC would otherwise be
        // the child's too (ListenerBindTests counted two such listeners as the relay's own).
        guard let closeFrom = ChildProcess.closeFrom, closeFrom(&actions, 3) == 0 else {
            throw TestFailure("posix_spawn_file_actions_addclosefrom_np failed (glibc 2.34 or later needed)")
        }
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        // Sanitizer settings reach the relay too (`make test-asan` / `test-tsan` set them for the whole run).
        var environment = environment
        for name in ["ASAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS", "SWIFT_BACKTRACE"] where environment[name] == nil {
            if let value = getenv(name) { environment[name] = String(cString: value) }
        }
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        // A child starts with no signal blocked and the usual dispositions: posix_spawn would otherwise hand it the
        // spawning thread's mask and ignored signals, and a child with SIGTERM blocked never stops on `stop()`.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for sig in [SIGTERM, SIGINT, SIGHUP, SIGABRT, SIGPIPE, SIGUSR1, SIGUSR2] { sigaddset(&defaults, sig) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var child = pid_t()
        let rc = posix_spawn(&child, path, &actions, &attributes, argv, envp)
        guard rc == 0 else { throw TestFailure("could not start \(path): \(String(cString: strerror(rc)))") }
        pid = child
        self.logPath = logPath
        ChildRegistry.shared.add(child)
    }

    /// How it ended (`exitStatus`), once reaped: kept, so a second look neither waits on a reaped pid nor signals
    /// one the kernel may have handed to another process.
    private let ending = Locked<Int32?>(nil)
    /// A caller has been given the ending (`stop`, `exitCode`, `waitForExit` returned it): it judges it.
    private let read = Locked(false)
    var endingWasRead: Bool { read.withLock { $0 } }

    /// Reaps it if it has ended (once), and returns how it ended; nil while it runs.
    private func reap(blocking: Bool = false) -> Int32? {
        ending.withLock { ending in
            if ending != nil { return ending }
            var status: Int32 = 0
            guard waitpid(pid, &status, blocking ? 0 : WNOHANG) == pid else { return nil }
            ChildRegistry.shared.remove(pid)
            ending = exitStatus(status)
            return ending
        }
    }

    private func handedOver(_ code: Int32?) -> Int32? {
        if code != nil { read.withLock { $0 = true } }
        return code
    }

    /// Sends `signal` and waits (bounded) for the exit; returns the exit status (128 + N for a death by signal N),
    /// or nil if it had to be killed. A process that had already ended is not signalled: its ending is returned.
    @discardableResult
    func stop(signal sig: Int32 = SIGTERM, timeout: Double = 10) -> Int32? {
        if let ended = reap() { return handedOver(ended) }
        kill(pid, sig)
        if let ended = waitForExit(timeout: timeout) { return ended }
        kill(pid, SIGKILL)
        _ = reap(blocking: true)
        read.withLock { $0 = true }
        return nil
    }

    /// The exit code if the process has exited, else nil at once; 128 + N for a death by signal N.
    func exitCode() -> Int32? { handedOver(reap()) }

    /// Waits for the process to exit by itself (bounded); returns the exit code, 128 + N for a death by signal N.
    func waitForExit(timeout: Double) -> Int32? {
        var ended: Int32?
        poll(timeout: timeout) {
            ended = reap()
            return ended != nil
        }
        guard let ended else { return nil }
        return handedOver(ended)
    }

    var log: String { (try? TestFiles.read(logPath)) ?? "" }
}

/// "exit N", or the signal's name for 128 + N (`exitStatus`), for a test's message.
func describeExit(_ code: Int32?) -> String {
    guard let code else { return "no exit within its bound (killed)" }
    guard code > 128, let name = strsignal(code - 128) else { return "exit \(code)" }
    return "exit \(code): killed by signal \(code - 128) (\(String(cString: name)))"
}

/// A `waitpid` status as a shell reports it: the exit code, or 128 + the signal that ended the process (SIGSEGV:
/// 139), so a crash never reads as a clean exit.
func exitStatus(_ status: Int32) -> Int32 {
    let signal = status & 0x7f
    return signal == 0 ? (status >> 8) & 0xff : 128 + signal
}

/// Every child still running when the test process exits is killed, so nothing outlives the suite.
final class ChildRegistry: @unchecked Sendable {
    static let shared = ChildRegistry()
    private var pids: Set<pid_t> = []
    private var lock = pthread_mutex_t()

    private init() {
        pthread_mutex_init(&lock, nil)
        atexit { ChildRegistry.shared.killAll() }
    }

    func add(_ pid: pid_t) { pthread_mutex_lock(&lock); pids.insert(pid); pthread_mutex_unlock(&lock) }
    func remove(_ pid: pid_t) { pthread_mutex_lock(&lock); pids.remove(pid); pthread_mutex_unlock(&lock) }
    func killAll() {
        pthread_mutex_lock(&lock)
        for pid in pids {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
        pids.removeAll()
        pthread_mutex_unlock(&lock)
    }
}

enum TestFiles {
    static func temporaryDirectory() -> String {
        var template = Array("/tmp/prefect-push-test-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed")
        return template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    static func read(_ path: String) throws -> String {
        guard let file = fopen(path, "r") else { throw TestFailure("cannot open \(path)") }
        defer { fclose(file) }
        var data: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = fread(&buffer, 1, buffer.count, file)
            if n <= 0 { break }
            data += buffer[0..<n]
        }
        return String(decoding: data, as: UTF8.self)
    }

    static func write(_ path: String, _ text: String) throws {
        guard let file = fopen(path, "w") else { throw TestFailure("cannot write \(path)") }
        defer { fclose(file) }
        _ = Array(text.utf8).withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
    }

    static func removeTree(_ path: String) {
        guard path.hasPrefix("/tmp/prefect-push-test-") else { return }
        _ = system("rm -rf '\(path)'")
    }

    /// The package root, found from this file's path at compile time.
    static var packageRoot: String {
        var parts = "\(#filePath)".split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(4)  // Tests/RelayTests/Support/Processes.swift
        return parts.joined(separator: "/")
    }
}
