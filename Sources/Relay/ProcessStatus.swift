import Glibc

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
                let digits = text.dropFirst(6).filter(\.isNumber)
                return Int(digits).map { $0 * 1024 }
            }
        }
        return nil
    }
}
