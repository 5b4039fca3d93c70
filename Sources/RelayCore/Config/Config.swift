/// Everything the relay is told by its environment (README "Configuration"). Parsing is pure: the caller passes the
/// environment as a dictionary, and a bad value comes back as a `ConfigError` naming the variable and the fix.
public struct Config: Sendable, Equatable {
    public enum LogLevel: String, Sendable, Comparable, CaseIterable {
        case debug, info, warn, error
        var rank: Int { LogLevel.allCases.firstIndex(of: self)! }
        public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rank < b.rank }
    }

    /// How log lines are written (`LOG_FORMAT`): logfmt, or one JSON object per line.
    public enum LogFormat: String, Sendable, CaseIterable {
        case logfmt, json
    }

    /// Where the APNs signing key comes from; the edge reads and parses it at start-up.
    public enum KeySource: Sendable, Equatable {
        case inline(String)
        case file(String)
    }

    public struct APNsCredentials: Sendable, Equatable {
        public var key: KeySource
        public var keyID: String
        public var teamID: String
    }

    public var prefectAPI: HTTPURL
    public var prefectAuth: String?
    /// `PREFECT_API_KEY` (Prefect Cloud): Bearer on REST, the socket's auth token. Never with `prefectAuth`.
    public var prefectAPIKey: APIKey?
    /// Set when `prefectAPI` is a Cloud workspace root (`Config+Cloud.swift`).
    public var cloudWorkspace: CloudWorkspace?
    public var prefectUI: String
    public var apns: APNsCredentials?
    public var apnsTopic: String
    public var dbPath: String
    public var port: Int
    /// `API_BIND`: the address the API listener binds, IPv4 or IPv6, in its canonical text (`0.0.0.0`, every IPv4
    /// interface, by default; `::` is every interface, both families).
    public var apiBind: String
    /// `TRUSTED_PROXIES`: the proxies whose `X-Forwarded-For` names the client; empty by default.
    public var trustedProxies: TrustedProxies
    public var basePath: String
    public var apnsProduction: HTTPURL
    public var apnsDevelopment: HTTPURL
    public var apnsCAFile: String?
    public var prefectCAFile: String?
    public var logLevel: LogLevel
    public var logFormat: LogFormat
    /// The most devices the registry holds; a registration of a new device beyond it is refused (409).
    public var maxDevices: Int
    /// HTTPS_PROXY, HTTP_PROXY, NO_PROXY (either case): how each outbound connection goes out.
    public var proxy: ProxyRule
    /// `METRICS_PORT`: a second listener serving only `GET /metrics`, without the Prefect credential; nil: none.
    public var metricsPort: Int?
    /// `METRICS_BIND`: the address that listener binds (as `apiBind`).
    public var metricsBind: String
    /// `HEALTH_GRACE_SECONDS`: how long the events socket may stay down, or APNs unreachable, before `/health`
    /// answers 503 (`HealthBounds`).
    public var healthGrace: Int
    /// `HEALTH_STARTUP_SECONDS`: how long after start a relay whose events socket has never subscribed still answers
    /// `/health` by the other bounds; past it, 503 (`HealthBounds.startup`).
    public var healthStartup: Int

    public static let defaultMaxDevices = 10_000

    public init(environment env: [String: String]) throws(ConfigError) {
        let read = EnvironmentReader(env)
        (prefectAPI, cloudWorkspace, prefectAPIKey, prefectAuth) = try Config.prefectServer(read)
        prefectUI = try Config.prefectUI(read, api: prefectAPI, cloud: cloudWorkspace)
        prefectCAFile = try Config.prefectCAFile(read)
        apns = try Config.apnsCredentials(read)
        apnsTopic = try Settings.apnsTopic.read(read)
        apnsProduction = try Settings.apnsProduction.read(read)
        apnsDevelopment = try Settings.apnsDevelopment.read(read)
        apnsCAFile = try Settings.apnsCAFile.read(read)
        dbPath = try Settings.dbPath.read(read)
        port = try Settings.port.read(read)
        apiBind = try Settings.apiBind.read(read)
        trustedProxies = try Settings.trustedProxies.read(read)
        basePath = try Settings.basePath.read(read)
        logLevel = try Settings.logLevel.read(read)
        logFormat = try Settings.logFormat.read(read)
        maxDevices = try Settings.maxDevices.read(read)
        metricsPort = try Settings.metricsPort.read(read)
        metricsBind = try Settings.metricsBind.read(read)
        healthGrace = try Settings.healthGrace.read(read)
        healthStartup = try Settings.healthStartup.read(read)
        proxy = try ProxyRule(environment: env)
    }

    /// `DB_PATH` alone, for `prefect-push backup`, which needs nothing else and so works without the Prefect and
    /// APNs settings.
    public static func dbPath(environment: [String: String]) -> String {
        (try? Settings.dbPath.read(EnvironmentReader(environment))) ?? Settings.dbPath.defaultValue
    }

    /// Where the HTTP API listens: `PORT`, `API_BIND` and `BASE_PATH`.
    public struct APIListener: Sendable, Equatable {
        public var port: Int
        public var bind: String
        public var basePath: String
    }

    /// `PORT`, `API_BIND` and `BASE_PATH` alone, for `prefect-push health`: a probe of the relay on this host reads
    /// only where it listens, so a setting it doesn't need (one this environment spells wrong, say) can't fail it.
    public static func apiListener(environment: [String: String]) throws(ConfigError) -> APIListener {
        let read = EnvironmentReader(environment)
        return APIListener(port: try Settings.port.read(read), bind: try Settings.apiBind.read(read),
                           basePath: try Settings.basePath.read(read))
    }

    /// `LOG_FORMAT` alone: the relay reads it before the rest, so even a configuration error is written in it.
    public static func logFormat(environment: [String: String]) throws(ConfigError) -> LogFormat {
        try Settings.logFormat.read(EnvironmentReader(environment))
    }

    static func appleID(_ raw: String?, _ name: String, _ what: String) throws(ConfigError) -> String {
        guard let raw else { throw ConfigError(name, "is required with an APNs key; set it to \(what)") }
        guard raw.count <= 64, raw.allSatisfy(\.isASCIILetterOrDigit) else {
            throw ConfigError(name, "must be letters and digits (Apple's ids are 10 characters)")
        }
        return raw
    }
}

/// A configuration problem: which variable, and what to do about it.
public struct ConfigError: Error, Equatable, CustomStringConvertible {
    public let variable: String
    public let problem: String
    public init(_ variable: String, _ problem: String) {
        self.variable = variable
        self.problem = problem
    }
    public var description: String { "\(variable) \(problem)" }
}

extension String {
    func trimmingWhitespace() -> String {
        var scalars = Substring(self)
        while let first = scalars.first, first.isWhitespaceASCIIFirst { scalars.removeFirst() }
        while let last = scalars.last, last.isWhitespaceASCIIFirst { scalars.removeLast() }
        return String(scalars)
    }

    func droppingTrailingSlashes() -> String {
        var s = self
        while s.hasSuffix("/") { s.removeLast() }
        return s
    }
}
