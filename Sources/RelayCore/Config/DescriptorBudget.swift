/// How the process's descriptor limit is shared: the relay's own connections (Prefect's pool and events socket, the
/// APNs hosts, SQLite's files, the loops' wake-up descriptors, the runtime's timers) get a fixed reserve, and API
/// clients get what is left, up to `HTTPServer`'s usual 1,024. So no number of API connections can take the
/// descriptors the relay needs to reach Prefect and APNs, and `accept` never fails for lack of one: past the cap the
/// API closes its oldest half-sent request instead (`HTTPServer.adopt`), and lws stops polling the listener.
public struct DescriptorBudget: Sendable, Equatable {
    /// Descriptors kept for everything but API clients. A relay at work holds about 30 (measured: the most
    /// `/proc/PID/fd` held during `make chaos` scenarios was 31, with REST reads failing and retried); the rest is
    /// headroom for reconnects (a new socket opens before the old one closes) and on-demand REST connections.
    public static let reserve = 96
    /// API connections are capped at this, whatever the limit.
    public static let maxAPIConnections = 1024
    /// Below this many API connections the relay still runs, but says the limit is too low.
    public static let comfortableAPIConnections = 256

    /// The soft `RLIMIT_NOFILE` the process runs with.
    public let limit: Int
    /// API connections allowed at once.
    public let apiConnections: Int

    public init(limit: Int) {
        self.limit = limit
        apiConnections = max(4, min(DescriptorBudget.maxAPIConnections, limit - DescriptorBudget.reserve))
    }

    /// The soft limit to ask for: the hard limit, as most servers do at start-up (nginx's `worker_rlimit_nofile`,
    /// Go's runtime), bounded so lws's per-descriptor tables stay small.
    public static func wantedSoftLimit(soft: Int, hard: Int) -> Int {
        max(soft, min(hard, 65_536))
    }

    /// Whether to warn at start-up that API clients get less room than they should.
    public var isTight: Bool { apiConnections < DescriptorBudget.comfortableAPIConnections }
}
