/// Everything the relay is told by its environment (DESIGN.md §2). Parsing is pure: the caller passes the
/// environment as a dictionary, and a bad value comes back as a `ConfigError` naming the variable and the fix.
public struct Config: Sendable, Equatable {
    public enum LogLevel: String, Sendable, Comparable, CaseIterable {
        case debug, info, warn, error
        var rank: Int { LogLevel.allCases.firstIndex(of: self)! }
        public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rank < b.rank }
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
    public var basePath: String
    public var apnsProduction: HTTPURL
    public var apnsDevelopment: HTTPURL
    public var apnsCAFile: String?
    public var prefectCAFile: String?
    public var logLevel: LogLevel
    /// The most devices the registry holds; a registration of a new device beyond it is refused (409).
    public var maxDevices: Int

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
        ("BASE_PATH", "HTTP API path prefix, e.g. /push", "none"),
        ("APNS_PRODUCTION_URL", "production APNs origin", "https://api.push.apple.com"),
        ("APNS_DEVELOPMENT_URL", "development (sandbox) APNs origin", "https://api.sandbox.push.apple.com"),
        ("APNS_CA_FILE", "extra PEM trust roots for APNs TLS", "system roots"),
        ("PREFECT_CA_FILE", "extra PEM trust roots for a Prefect server on https", "system roots"),
        ("LOG_LEVEL", "debug, info, warn or error", "info"),
        ("MAX_DEVICES", "the most devices the relay registers; more are refused with 409", "10000"),
    ]

    public init(environment env: [String: String]) throws(ConfigError) {
        func value(_ name: String) -> String? {
            guard let raw = env[name] else { return nil }
            let trimmed = raw.trimmingWhitespace()
            return trimmed.isEmpty ? nil : trimmed
        }

        guard let api = value("PREFECT_API_URL") else {
            throw ConfigError("PREFECT_API_URL", "is not set; set it to the server's API root, e.g. http://127.0.0.1:4200/api")
        }
        prefectAPI = try HTTPURL.parse(api, variable: "PREFECT_API_URL")
        prefectAPI.path = prefectAPI.path.droppingTrailingSlashes()

        cloudWorkspace = try CloudWorkspace.recognise(prefectAPI)
        prefectAPIKey = try Config.apiKey(env["PREFECT_API_KEY"])
        if let auth = env["PREFECT_API_AUTH_STRING"], !auth.isEmpty {
            guard prefectAPIKey == nil else {
                throw ConfigError("PREFECT_API_KEY", "and PREFECT_API_AUTH_STRING are both set; set only one of them "
                                  + "(PREFECT_API_KEY for Prefect Cloud, PREFECT_API_AUTH_STRING for a "
                                  + "self-hosted server)")
            }
            guard cloudWorkspace == nil else {
                throw ConfigError("PREFECT_API_AUTH_STRING", "is for a self-hosted server; a Prefect Cloud workspace "
                                  + "takes an API key: set PREFECT_API_KEY instead")
            }
            guard auth.contains(":"), !auth.contains(where: { $0.isNewline }) else {
                throw ConfigError("PREFECT_API_AUTH_STRING", "must be user:pass (one line, with a colon)")
            }
            prefectAuth = auth
        } else {
            prefectAuth = nil
        }
        if cloudWorkspace != nil && prefectAPIKey == nil {
            throw ConfigError("PREFECT_API_KEY", "is not set; a Prefect Cloud workspace needs an API key (a service "
                              + "account's, with read access to the workspace)")
        }

        if let ui = value("PREFECT_UI_URL") {
            prefectUI = try HTTPURL.parse(ui, variable: "PREFECT_UI_URL").string.droppingTrailingSlashes()
        } else if let cloudWorkspace {
            prefectUI = cloudWorkspace.uiRoot(api: prefectAPI)
        } else {
            var ui = prefectAPI
            if ui.path.hasSuffix("/api") { ui.path.removeLast(4) }
            prefectUI = ui.string.droppingTrailingSlashes()
        }

        let inlineKey = env["APNS_KEY"].flatMap { $0.trimmingWhitespace().isEmpty ? nil : $0 }
        let keyPath = value("APNS_KEY_PATH")
        switch (inlineKey, keyPath) {
        case (.some, .some):
            throw ConfigError("APNS_KEY", "and APNS_KEY_PATH are both set; set only one of them")
        case (nil, nil):
            apns = nil
        case (let inline, let path):
            let source: KeySource = inline.map { .inline($0) } ?? .file(path!)
            let keyID = try Config.appleID(value("APNS_KEY_ID"), "APNS_KEY_ID", "the key's id from the Apple developer site")
            let teamID = try Config.appleID(value("APNS_TEAM_ID"), "APNS_TEAM_ID", "your Apple team id")
            apns = APNsCredentials(key: source, keyID: keyID, teamID: teamID)
        }

        apnsTopic = value("APNS_TOPIC") ?? "io.zzstoatzz.prefect"
        guard apnsTopic.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == "_") })
        else {
            throw ConfigError("APNS_TOPIC", "must be a bundle id like com.example.app")
        }

        dbPath = value("DB_PATH") ?? "prefect-push.db"

        if let rawPort = value("PORT") {
            guard let parsed = Int(rawPort), (0...65535).contains(parsed) else {
                throw ConfigError("PORT", "must be a number from 0 to 65535, got \"\(rawPort.prefix(20))\"")
            }
            port = parsed
        } else {
            port = 8080
        }

        let base = value("BASE_PATH") ?? ""
        let trimmedBase = base.droppingTrailingSlashes()
        guard trimmedBase.isEmpty || (trimmedBase.hasPrefix("/") && !trimmedBase.contains(where: { $0 == "?" || $0 == "#" || $0 == " " }))
        else {
            throw ConfigError("BASE_PATH", "must start with / (e.g. /push) or be empty")
        }
        basePath = trimmedBase

        apnsProduction = try HTTPURL.parse(value("APNS_PRODUCTION_URL") ?? "https://api.push.apple.com",
                                           variable: "APNS_PRODUCTION_URL", requireHTTPS: true)
        apnsDevelopment = try HTTPURL.parse(value("APNS_DEVELOPMENT_URL") ?? "https://api.sandbox.push.apple.com",
                                            variable: "APNS_DEVELOPMENT_URL", requireHTTPS: true)
        apnsCAFile = value("APNS_CA_FILE")
        prefectCAFile = value("PREFECT_CA_FILE")

        if let level = value("LOG_LEVEL") {
            guard let parsed = LogLevel(rawValue: level.lowercased()) else {
                throw ConfigError("LOG_LEVEL", "must be debug, info, warn or error, got \"\(level.prefix(20))\"")
            }
            logLevel = parsed
        } else {
            logLevel = .info
        }

        if let raw = value("MAX_DEVICES") {
            guard let parsed = Int(raw), (1...10_000_000).contains(parsed) else {
                throw ConfigError("MAX_DEVICES", "must be a number from 1 to 10000000, got \"\(raw.prefix(20))\"")
            }
            maxDevices = parsed
        } else {
            maxDevices = Config.defaultMaxDevices
        }
    }

    private static func appleID(_ raw: String?, _ name: String, _ what: String) throws(ConfigError) -> String {
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
