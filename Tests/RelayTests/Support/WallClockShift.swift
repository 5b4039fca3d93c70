import Glibc
@testable import Relay

/// Steps a relay's wall clock while it runs, as an NTP correction or a restored VM does: the relay runs under
/// `Fixtures/preload/clock-shift.c` (built here with the system C compiler), which adds the shift in a shared
/// file to CLOCK_REALTIME, gettimeofday and time; CLOCK_MONOTONIC is untouched.
final class WallClockShift: @unchecked Sendable {
    let directory = TestFiles.temporaryDirectory()
    private var file: String { directory + "/shift" }
    private let library: String

    init() throws {
        library = directory + "/clock-shift.so"
        let source = TestFiles.packageRoot + "/Tests/RelayTests/Fixtures/preload/clock-shift.c"
        let compiler = access("/usr/bin/cc", X_OK) == 0 ? "/usr/bin/cc" : "/usr/bin/gcc"
        let build = try ChildProcess(compiler, ["-shared", "-fPIC", "-O2", "-o", library, source, "-ldl"],
                                     environment: ["PATH": "/usr/bin:/bin"], logPath: directory + "/cc.log")
        guard build.waitForExit(timeout: 60) == 0 else { throw TestFailure("could not build clock-shift.so: \(build.log)") }
        try step(0)
    }

    /// What the relay needs in its environment to run under the shift.
    var environment: [String: String] { ["LD_PRELOAD": library, "CLOCK_SHIFT_FILE": file] }

    /// From now on the relay's wall clock reads `seconds` off the real one.
    func step(_ seconds: Int64) throws {
        let fd = open(file, O_WRONLY | O_CREAT, 0o644)
        guard fd >= 0 else { throw TestFailure("could not open \(file)") }
        defer { close(fd) }
        var value = seconds
        guard withUnsafeBytes(of: &value, { pwrite(fd, $0.baseAddress, 8, 0) }) == 8 else {
            throw TestFailure("could not write \(file)")
        }
    }
}
