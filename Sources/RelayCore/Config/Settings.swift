/// Every environment variable the relay reads, each written once: name, `--help` line, default, parser. `Config`
/// reads through these; `all` is `--help`'s list, in its order.
public enum Settings {
    static let prefectAPIURL = Setting<String?>.optional(
        "PREFECT_API_URL", "API root of the watched server, http(s)://host[:port]/api, or a Prefect Cloud workspace's "
            + "https://api.prefect.cloud/api/accounts/<id>/workspaces/<id>", unset: "required")
    static let prefectAuth = Setting<String?>.secret(
        "PREFECT_API_AUTH_STRING", "user:pass for a server behind basic auth; read-only is enough",
        unset: "unset: open server")
    static let prefectAPIKey = Setting<String?>.secret(
        "PREFECT_API_KEY", "Prefect Cloud API key (a service account's, read access to the workspace); "
            + "not with PREFECT_API_AUTH_STRING", unset: "unset")
    static let prefectUI = Setting<String?>.optional(
        "PREFECT_UI_URL", "UI root used for the run url sent to phones",
        unset: "PREFECT_API_URL without /api; for Cloud, the workspace in the Cloud UI")
    static let apnsKey = Setting<String?>.secret(
        "APNS_KEY", "the .p8 ES256 signing key as inline PEM", unset: "unset: run without APNs")
    static let apnsKeyPath = Setting<String?>.optional(
        "APNS_KEY_PATH", "the .p8 ES256 signing key as a file", unset: "unset: run without APNs")
    static let apnsKeyID = Setting<String?>.optional("APNS_KEY_ID", "the key's id (required with a key)", unset: "unset")
    static let apnsTeamID = Setting<String?>.optional("APNS_TEAM_ID", "the Apple team id (required with a key)",
                                                      unset: "unset")
    static let apnsTopic = Setting<String>.text("APNS_TOPIC", "the app's bundle id", default: "io.zzstoatzz.prefect",
                                                check: Config.bundleID)
    static let dbPath = Setting<String>.text("DB_PATH", "SQLite file", default: "prefect-push.db")
    static let port = Setting<Int>.number("PORT", "HTTP API port (0 picks a free one)", default: 8080, in: 0...65535)
    static let apiBind = Setting<String>.text(
        "API_BIND", "address the HTTP API listener binds: IPv4 (0.0.0.0, 127.0.0.1), IPv6 (::1, an address), or :: "
            + "for every interface, IPv4 and IPv6", default: "0.0.0.0", check: Config.bindAddress)
    static let basePath = Setting<String>.text("BASE_PATH", "HTTP API path prefix, e.g. /push", default: "",
                                               shown: "none", check: Config.pathPrefix)
    static let apnsProduction = Setting<HTTPURL>.httpsOrigin(
        "APNS_PRODUCTION_URL", "production APNs origin", default: "https://api.push.apple.com")
    static let apnsDevelopment = Setting<HTTPURL>.httpsOrigin(
        "APNS_DEVELOPMENT_URL", "development (sandbox) APNs origin", default: "https://api.sandbox.push.apple.com")
    static let apnsCAFile = Setting<String?>.optional("APNS_CA_FILE", "extra PEM trust roots for APNs TLS",
                                                      unset: "system roots")
    static let prefectCAFile = Setting<String?>.optional(
        "PREFECT_CA_FILE", "extra PEM trust roots for a Prefect server on https", unset: "system roots")
    static let prefectSSLCertFile = Setting<String?>.optional(
        "PREFECT_API_SSL_CERT_FILE", "Prefect's own name for PREFECT_CA_FILE (either may be set; both only if equal)",
        unset: "system roots")
    static let logLevel = Setting<Config.LogLevel>.choice("LOG_LEVEL", "debug, info, warn or error", default: .info)
    static let logFormat = Setting<Config.LogFormat>.choice(
        "LOG_FORMAT", "logfmt, or json for one JSON object per line", default: .logfmt)
    static let maxDevices = Setting<Int>.number(
        "MAX_DEVICES", "the most devices the relay registers; more are refused with 409",
        default: Config.defaultMaxDevices, in: 1...10_000_000)
    // Read by `ProxyRule`, which takes the lower-case name first, as curl and httpx do; an empty value is unset.
    static let httpsProxy = Setting<String?>.optional(
        "HTTPS_PROXY", "http://[user:pass@]host:port proxy for https targets (Prefect, APNs), via CONNECT; "
            + "https_proxy wins", unset: "unset: direct")
    static let httpProxy = Setting<String?>.optional(
        "HTTP_PROXY", "the same for a plain-http Prefect; http_proxy wins", unset: "unset: direct")
    static let noProxy = Setting<String?>.optional(
        "NO_PROXY", "comma-separated hosts sent direct: *, name (and its subdomains), IP, each with an optional :port; "
            + "no_proxy wins", unset: "unset")
    static let httpsProxyLower = Setting<String?>.optional(
        "https_proxy", "the same as HTTPS_PROXY, and wins over it", unset: "unset: HTTPS_PROXY")
    static let httpProxyLower = Setting<String?>.optional(
        "http_proxy", "the same as HTTP_PROXY, and wins over it", unset: "unset: HTTP_PROXY")
    static let noProxyLower = Setting<String?>.optional(
        "no_proxy", "the same as NO_PROXY, and wins over it", unset: "unset: NO_PROXY")
    static let metricsPort = Setting<Int?>.optionalNumber(
        "METRICS_PORT", "port of a separate listener serving only GET /metrics, without the Prefect credential "
            + "(0 picks a free one)", unset: "unset: no listener", in: 0...65535)
    static let metricsBind = Setting<String>.text(
        "METRICS_BIND", "address the metrics listener binds, as API_BIND", default: "0.0.0.0",
        check: Config.bindAddress)
    static let trustedProxies = Setting<TrustedProxies>(
        "TRUSTED_PROXIES", "comma-separated CIDR blocks (or addresses) of the proxies in front of the API, e.g. "
            + "10.0.0.0/8,fd00::/8; from them, the client is read from X-Forwarded-For",
        default: "unset: none, X-Forwarded-For is ignored") { env, name throws(ConfigError) in
        try env.value(name).map { text throws(ConfigError) in try TrustedProxies(parsing: text, variable: name) } ?? .none
    }
    static let healthGrace = Setting<Int>.number(
        "HEALTH_GRACE_SECONDS", "how long the events socket may be down, or APNs unreachable, before /health answers 503",
        default: Int(HealthBounds.defaultGrace), in: 1...86_400)
    static let healthStartup = Setting<Int>.number(
        "HEALTH_STARTUP_SECONDS", "how long after start /health may stay 200 while the events socket has never "
            + "subscribed (a wrong PREFECT_API_URL or credential); past it, 503",
        default: Int(HealthBounds.defaultStartup), in: 5...86_400)

    /// Every variable, in the order `--help` prints them.
    public static let all: [any SettingDescription] = [
        prefectAPIURL, prefectAuth, prefectAPIKey, prefectUI, apnsKey, apnsKeyPath, apnsKeyID, apnsTeamID, apnsTopic,
        dbPath, port, apiBind, trustedProxies, basePath, apnsProduction, apnsDevelopment, apnsCAFile, prefectCAFile,
        prefectSSLCertFile, logLevel, logFormat, maxDevices, httpsProxy, httpProxy, noProxy, httpsProxyLower,
        httpProxyLower, noProxyLower, metricsPort, metricsBind, healthGrace, healthStartup,
    ]
}
