import Glibc
@testable import Relay
@testable import RelayCore

/// A child process the tests started; killed on `stop()` or when the test process exits.
final class ChildProcess: @unchecked Sendable {
    let pid: pid_t
    let logPath: String

    init(_ path: String, _ arguments: [String], environment: [String: String], logPath: String) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, logPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
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
        var child = pid_t()
        let rc = posix_spawn(&child, path, &actions, nil, argv, envp)
        guard rc == 0 else { throw TestFailure("could not start \(path): \(String(cString: strerror(rc)))") }
        pid = child
        self.logPath = logPath
        ChildRegistry.shared.add(child)
    }

    /// Sends `signal` and waits (bounded) for the exit; returns the exit status, or nil if it had to be killed.
    @discardableResult
    func stop(signal sig: Int32 = SIGTERM, timeout: Double = 10) -> Int32? {
        kill(pid, sig)
        let deadline = SystemClock.monotonic() + timeout
        var status: Int32 = 0
        while SystemClock.monotonic() < deadline {
            if waitpid(pid, &status, WNOHANG) == pid {
                ChildRegistry.shared.remove(pid)
                return (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
            }
            usleep(20_000)
        }
        kill(pid, SIGKILL)
        waitpid(pid, &status, 0)
        ChildRegistry.shared.remove(pid)
        return nil
    }

    /// The exit code if the process has exited (reaped here), else nil at once.
    func exitCode() -> Int32? {
        var status: Int32 = 0
        guard waitpid(pid, &status, WNOHANG) == pid else { return nil }
        ChildRegistry.shared.remove(pid)
        return (status >> 8) & 0xff
    }

    /// Waits for the process to exit by itself (bounded); returns the exit code.
    func waitForExit(timeout: Double) -> Int32? {
        let deadline = SystemClock.monotonic() + timeout
        var status: Int32 = 0
        while SystemClock.monotonic() < deadline {
            if waitpid(pid, &status, WNOHANG) == pid {
                ChildRegistry.shared.remove(pid)
                return (status >> 8) & 0xff
            }
            usleep(20_000)
        }
        return nil
    }

    var log: String { (try? TestFiles.read(logPath)) ?? "" }
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

func sleepSeconds(_ seconds: Double) { usleep(UInt32(seconds * 1_000_000)) }
