import Glibc
import RelayCore

/// Facts about this process read from /proc.
enum ProcessStatus {
    /// Resident set size in bytes (`VmRSS` in /proc/self/status), or nil if it can't be read.
    static func residentBytes() -> Int? {
        guard let file = fopen("/proc/self/status", "r") else { return nil }
        defer { fclose(file) }
        var line = [CChar](repeating: 0, count: 256)
        while fgets(&line, Int32(line.count), file) != nil {
            let text = line.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            if text.hasPrefix("VmRSS:") {
                let digits = text.dropFirst(6).filter(\.isASCIIDigit)
                return Int(digits).map { $0 * 1024 }
            }
        }
        return nil
    }
}

extension ProcessStatus {
    /// The standard process metrics (`ProcessSample`), or nil if /proc can't be read.
    static func sample() -> ProcessSample? {
        guard let stat = readSmall("/proc/self/stat", limit: 4096), let boot = bootTime else { return nil }
        var limit = rlimit()
        let maxFDs = getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 ? Int(clamping: limit.rlim_cur) : 0
        return ProcessSample(stat: stat, clockTicks: Double(sysconf(Int32(_SC_CLK_TCK))),
                             pageSize: Int(sysconf(Int32(_SC_PAGESIZE))), bootTime: boot, openFDs: openDescriptors(),
                             maxFDs: maxFDs)
    }

    /// Read once: the boot time never changes, and /proc/stat's interrupt line can run to many kilobytes on a
    /// large machine.
    private static let bootTime: Double? = readSmall("/proc/stat", limit: 1 << 20).flatMap(ProcessSample.bootTime)

    /// Entries of /proc/self/fd, less the one the listing itself holds open.
    private static func openDescriptors() -> Int {
        guard let dir = opendir("/proc/self/fd") else { return 0 }
        defer { closedir(dir) }
        var count = 0
        while let entry = readdir(dir) {
            let dot = withUnsafeBytes(of: entry.pointee.d_name) { $0.first == UInt8(ascii: ".") }
            if !dot { count += 1 }
        }
        return max(0, count - 1)
    }

    /// A /proc file read whole, up to `limit` bytes.
    private static func readSmall(_ path: String, limit: Int) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while bytes.count < limit {
            let n = read(fd, &buffer, buffer.count)
            if n <= 0 { break }
            bytes += buffer[0..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
