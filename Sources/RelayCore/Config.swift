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
    /// `API_BIND`: the address the API listener binds (an IPv4 address; `0.0.0.0`, every interface, by default).
    public var apiBind: String
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
    /// `METRICS_BIND`: the address that listener binds (an IPv4 address).
    public var metricsBind: String
    /// `HEALTH_GRACE_SECONDS`: how long the events socket may stay down, or APNs unreachable, before `/health`
    /// answers 503 (`HealthBounds`).
    public var healthGrace: Int
    /// `HEALTH_STARTUP_SECONDS`: how long after start a relay whose events socket has never subscribed still answers
    /// `/health` by the other bounds; past it, 503 (`HealthBounds.startup`).
    public var healthStartup: Int

    public static let defaultMaxDevices = 10_000

    /// Every variable with its default, in the order `--help` prints them.
    public static let variables: [(name: String, meaning: String, defaultValue: String)] = [
        ("PREFECT_API_URL", "API root of the watched server, http(s)://host[:port]/api, or a Prefect Cloud workspace's "
            + "https://api.prefect.cloud/api/accounts/<id>/workspaces/<id>", "required"),
        ("PREFECT_API_AUTH_STRING", "user:pass for a server behind basic auth; read-only is enough", "unset: open server"),
        ("PREFECT_API_KEY", "Prefect Cloud API key (a service account's, read access to the workspace); "
            + "not with PREFECT_API_AUTH_STRING", "unset"),
        ("PREFECT_UI_URL", "UI root used for the run url sent to phones",
         "PREFECT_API_URL without /api; for Cloud, the workspace in the Cloud UI"),
        ("APNS_KEY", "the .p8 ES256 signing key as inline PEM", "unset: run without APNs"),
        ("APNS_KEY_PATH", "the .p8 ES256 signing key as a file", "unset: run without APNs"),
        ("APNS_KEY_ID", "the key's id (required with a key)", "unset"),
        ("APNS_TEAM_ID", "the Apple team id (required with a key)", "unset"),
        ("APNS_TOPIC", "the app's bundle id", "io.zzstoatzz.prefect"),
        ("DB_PATH", "SQLite file", "prefect-push.db"),
        ("PORT", "HTTP API port (0 picks a free one)", "8080"),
        ("API_BIND", "address the HTTP API listener binds: IPv4 only, dotted, e.g. 127.0.0.1", "0.0.0.0"),
        ("BASE_PATH", "HTTP API path prefix, e.g. /push", "none"),
        ("APNS_PRODUCTION_URL", "production APNs origin", "https://api.push.apple.com"),
        ("APNS_DEVELOPMENT_URL", "development (sandbox) APNs origin", "https://api.sandbox.push.apple.com"),
        ("APNS_CA_FILE", "extra PEM trust roots for APNs TLS", "system roots"),
        ("PREFECT_CA_FILE", "extra PEM trust roots for a Prefect server on https", "system roots"),
        ("PREFECT_API_SSL_CERT_FILE", "Prefect's own name for PREFECT_CA_FILE (either may be set; both only if equal)",
         "system roots"),
        ("LOG_LEVEL", "debug, info, warn or error", "info"),
        ("LOG_FORMAT", "logfmt, or json for one JSON object per line", "logfmt"),
        ("MAX_DEVICES", "the most devices the relay registers; more are refused with 409", "10000"),
        ("HTTPS_PROXY", "http://[user:pass@]host:port proxy for https targets (Prefect, APNs), via CONNECT; "
            + "https_proxy wins", "unset: direct"),
        ("HTTP_PROXY", "the same for a plain-http Prefect; http_proxy wins", "unset: direct"),
        ("NO_PROXY", "comma-separated hosts sent direct: *, name (and its subdomains), IP, each with an optional :port; "
            + "no_proxy wins", "unset"),
        ("METRICS_PORT", "port of a separate listener serving only GET /metrics, without the Prefect credential "
            + "(0 picks a free one)", "unset: no listener"),
        ("METRICS_BIND", "address the metrics listener binds: IPv4 only, dotted, e.g. 127.0.0.1", "0.0.0.0"),
        ("HEALTH_GRACE_SECONDS", "how long the events socket may be down, or APNs unreachable, before /health answers 503",
            "300"),
        ("HEALTH_STARTUP_SECONDS", "how long after start /health may stay 200 while the events socket has never "
            + "subscribed (a wrong PREFECT_API_URL or credential); past it, 503", "60"),
    ]

    public init(environment env: [String: String]) throws(ConfigError) {
        let read = EnvironmentReader(env)
        (prefectAPI, cloudWorkspace, prefectAPIKey, prefectAuth) = try Config.prefectServer(read)
        prefectUI = try Config.prefectUI(read, api: prefectAPI, cloud: cloudWorkspace)
        prefectCAFile = try Config.prefectCAFile(read)
        apns = try Config.apnsCredentials(read)
        apnsTopic = try Config.apnsTopic(read)
        apnsProduction = try HTTPURL.parse(read.value("APNS_PRODUCTION_URL") ?? "https://api.push.apple.com",
                                           variable: "APNS_PRODUCTION_URL", requireHTTPS: true)
        apnsDevelopment = try HTTPURL.parse(read.value("APNS_DEVELOPMENT_URL") ?? "https://api.sandbox.push.apple.com",
                                            variable: "APNS_DEVELOPMENT_URL", requireHTTPS: true)
        apnsCAFile = read.value("APNS_CA_FILE")
        dbPath = Config.dbPath(environment: env)
        port = try read.integer("PORT", in: 0...65535, default: 8080)
        apiBind = try Config.bindAddress(read, "API_BIND")
        basePath = try Config.basePath(read)
        logLevel = try Config.logLevel(read)
        logFormat = try Config.logFormat(environment: env)
        maxDevices = try read.integer("MAX_DEVICES", in: 1...10_000_000, default: Config.defaultMaxDevices)
        (metricsPort, metricsBind) = try Config.metricsListener(read)
        healthGrace = try read.integer("HEALTH_GRACE_SECONDS", in: 1...86_400, default: Int(HealthBounds.defaultGrace))
        healthStartup = try read.integer("HEALTH_STARTUP_SECONDS", in: 5...86_400,
                                         default: Int(HealthBounds.defaultStartup))
        proxy = try ProxyRule(environment: env)
    }

    /// `DB_PATH` alone, for `prefect-push backup`, which needs nothing else and so works without the Prefect and
    /// APNs settings.
    public static func dbPath(environment: [String: String]) -> String {
        EnvironmentReader(environment).value("DB_PATH") ?? "prefect-push.db"
    }

    static func appleID(_ raw: String?, _ name: String, _ what: String) throws(ConfigError) -> String {
        guard let raw else { throw ConfigError(name, "is required with an APNs key; set it to \(what)") }
        guard raw.count <= 64, raw.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
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
        while let first = scalars.first, first.isWhitespace { scalars.removeFirst() }
        while let last = scalars.last, last.isWhitespace { scalars.removeLast() }
        return String(scalars)
    }

    func droppingTrailingSlashes() -> String {
        var s = self
        while s.hasSuffix("/") { s.removeLast() }
        return s
    }
}
