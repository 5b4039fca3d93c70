/// The standard `process_*` metrics (Prometheus client libraries' names and meanings), from values the edge reads
/// in /proc. Parsing is pure so it is tested without a process to read.
public struct ProcessSample: Sendable, Equatable {
    public var cpuSeconds: Double
    public var residentBytes: Int
    public var virtualBytes: Int
    public var openFDs: Int
    public var maxFDs: Int
    /// Unix seconds.
    public var startTime: Double

    public init(cpuSeconds: Double, residentBytes: Int, virtualBytes: Int, openFDs: Int, maxFDs: Int, startTime: Double) {
        self.cpuSeconds = cpuSeconds
        self.residentBytes = residentBytes
        self.virtualBytes = virtualBytes
        self.openFDs = openFDs
        self.maxFDs = maxFDs
        self.startTime = startTime
    }

    /// From the one line of /proc/self/stat, as the Go and Python clients read it: utime + stime (fields 14, 15)
    /// and starttime (22) in clock ticks, vsize (23) in bytes, rss (24) in pages. The command name (field 2) may
    /// hold spaces and parentheses, so fields are counted from its last `)`.
    public init?(stat: String, clockTicks: Double, pageSize: Int, bootTime: Double, openFDs: Int, maxFDs: Int) {
        guard let close = stat.lastIndex(of: ")"), clockTicks > 0 else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // fields[0] is field 3 (state).
        func field(_ n: Int) -> Double? { n - 3 < fields.count ? Double(fields[n - 3]) : nil }
        guard let utime = field(14), let stime = field(15), let start = field(22), let vsize = field(23),
              let rss = field(24) else { return nil }
        self.init(cpuSeconds: (utime + stime) / clockTicks, residentBytes: Int(rss) * pageSize, virtualBytes: Int(vsize),
                  openFDs: openFDs, maxFDs: maxFDs, startTime: bootTime + start / clockTicks)
    }

    /// `btime` from /proc/stat: the boot time in unix seconds.
    public static func bootTime(procStat: String) -> Double? {
        for line in procStat.split(separator: "\n") where line.hasPrefix("btime ") {
            return Double(line.dropFirst(6).drop { $0 == " " })
        }
        return nil
    }

    func render() -> String {
        var out = ""
        func metric(_ name: String, _ type: String, _ help: String, _ value: String) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n\(name) \(value)\n"
        }
        metric("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.",
               Metrics.number(cpuSeconds))
        metric("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", String(residentBytes))
        metric("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", String(virtualBytes))
        metric("process_open_fds", "gauge", "Number of open file descriptors.", String(openFDs))
        metric("process_max_fds", "gauge", "Maximum number of open file descriptors.", String(maxFDs))
        metric("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.",
               Metrics.number(startTime))
        return out
    }
}
