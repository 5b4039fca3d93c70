/// `Config.init`'s sections that read several variables together, and the checks single settings use.
extension Config {
    /// The Prefect server: API root, Cloud workspace, and its credential (an API key or a basic-auth string).
    static func prefectServer(_ read: EnvironmentReader) throws(ConfigError)
        -> (HTTPURL, CloudWorkspace?, APIKey?, String?)
    {
        guard let raw = try Settings.prefectAPIURL.read(read) else {
            throw ConfigError("PREFECT_API_URL", "is not set; set it to the server's API root, e.g. http://127.0.0.1:4200/api")
        }
        var api = try HTTPURL.parse(raw, variable: "PREFECT_API_URL")
        api.path = api.path.droppingTrailingSlashes()
        let cloud = try CloudWorkspace.recognise(api)
        let key = try Config.apiKey(Settings.prefectAPIKey.read(read))
        var auth: String?
        if let given = try Settings.prefectAuth.read(read), !given.isEmpty {
            guard key == nil else {
                throw ConfigError("PREFECT_API_KEY", "and PREFECT_API_AUTH_STRING are both set; set only one of them "
                                  + "(PREFECT_API_KEY for Prefect Cloud, PREFECT_API_AUTH_STRING for a "
                                  + "self-hosted server)")
            }
            guard cloud == nil else {
                throw ConfigError("PREFECT_API_AUTH_STRING", "is for a self-hosted server; a Prefect Cloud workspace "
                                  + "takes an API key: set PREFECT_API_KEY instead")
            }
            guard given.contains(":"), !given.contains(where: { $0.isNewline }) else {
                throw ConfigError("PREFECT_API_AUTH_STRING", "must be user:pass (one line, with a colon)")
            }
            auth = given
        }
        if cloud != nil && key == nil {
            throw ConfigError("PREFECT_API_KEY", "is not set; a Prefect Cloud workspace needs an API key (a service "
                              + "account's, with read access to the workspace)")
        }
        return (api, cloud, key, auth)
    }

    /// The UI root for run links: as given, else the Cloud workspace's, else the API root without `/api`.
    static func prefectUI(_ read: EnvironmentReader, api: HTTPURL, cloud: CloudWorkspace?) throws(ConfigError) -> String {
        if let ui = try Settings.prefectUI.read(read) {
            return try HTTPURL.parse(ui, variable: "PREFECT_UI_URL").string.droppingTrailingSlashes()
        }
        if let cloud { return cloud.uiRoot(api: api) }
        var ui = api
        if ui.path.hasSuffix("/api") { ui.path.removeLast(4) }
        return ui.string.droppingTrailingSlashes()
    }

    /// The APNs signing key (inline or a file, not both) with its ids; nil runs the relay without APNs, which only a
    /// relay given no APNs settings at all does: the key's ids without the key are a half-made configuration (a
    /// misspelt or missing key variable) that would run green and send nothing.
    static func apnsCredentials(_ read: EnvironmentReader) throws(ConfigError) -> APNsCredentials? {
        let inlineKey = try Settings.apnsKey.read(read).flatMap { $0.trimmingWhitespace().isEmpty ? nil : $0 }
        switch (inlineKey, try Settings.apnsKeyPath.read(read)) {
        case (.some, .some):
            throw ConfigError("APNS_KEY", "and APNS_KEY_PATH are both set; set only one of them")
        case (nil, nil):
            let given = [Settings.apnsKeyID.name, Settings.apnsTeamID.name].filter { read.value($0) != nil }
            guard given.isEmpty else {
                throw ConfigError("APNS_KEY_PATH", "is not set (nor APNS_KEY), but \(given.joined(separator: " and ")) "
                                  + "\(given.count == 1 ? "is" : "are"): the relay would run and send nothing. Set "
                                  + "APNS_KEY_PATH to the AuthKey_XXXXXXXXXX.p8 file (or APNS_KEY to its contents), or "
                                  + "unset \(given.joined(separator: " and ")) to run without APNs")
            }
            return nil
        case (let inline, let path):
            let source: KeySource = inline.map { .inline($0) } ?? .file(path!)
            let keyID = try appleID(Settings.apnsKeyID.read(read), "APNS_KEY_ID", "the key's id from the Apple developer site")
            let teamID = try appleID(Settings.apnsTeamID.read(read), "APNS_TEAM_ID", "your Apple team id")
            return APNsCredentials(key: source, keyID: keyID, teamID: teamID)
        }
    }

    /// A bundle id (`APNS_TOPIC`): letters, digits, dots, dashes and underscores.
    static func bundleID(_ topic: String, _ name: String) throws(ConfigError) -> String {
        guard topic.allSatisfy({ $0.isASCIILetterOrDigit || $0 == "." || $0 == "-" || $0 == "_" }) else {
            throw ConfigError(name, "must be a bundle id like com.example.app")
        }
        return topic
    }

    /// An API path prefix (`BASE_PATH`): empty, or starting with `/`, without a trailing one.
    static func pathPrefix(_ given: String, _ name: String) throws(ConfigError) -> String {
        let base = given.droppingTrailingSlashes()
        guard base.isEmpty || (base.hasPrefix("/") && !base.contains(where: { $0 == "?" || $0 == "#" || $0 == " " })) else {
            throw ConfigError(name, "must start with / (e.g. /push) or be empty")
        }
        return base
    }

    /// `PREFECT_CA_FILE`, or `PREFECT_API_SSL_CERT_FILE` as Prefect's own settings name it: either, or both when they
    /// name the same file.
    static func prefectCAFile(_ read: EnvironmentReader) throws(ConfigError) -> String? {
        let ours = try Settings.prefectCAFile.read(read)
        let prefects = try Settings.prefectSSLCertFile.read(read)
        if let ours, let prefects, ours != prefects {
            throw ConfigError("PREFECT_CA_FILE", "and PREFECT_API_SSL_CERT_FILE are both set, to different files "
                              + "(\(ours.prefix(100)) and \(prefects.prefix(100))); they are one setting: unset one, "
                              + "or set both to the same file")
        }
        return ours ?? prefects
    }

    /// A listener's bind address (`API_BIND`, `METRICS_BIND`): an IPv4 or IPv6 literal (brackets allowed), in its
    /// canonical text (`IPAddress`: an IPv4-mapped address is its IPv4 address). A host name would need a resolver at
    /// start-up; a zone (`fe80::1%eth0`) would need an interface lookup, which the listener avoids on purpose.
    static func bindAddress(_ bind: String, _ name: String) throws(ConfigError) -> String {
        var text = Substring(bind)
        if text.hasPrefix("[") && text.hasSuffix("]") { text = text.dropFirst().dropLast() }
        guard let address = IPAddress(text) else {
            let zone = text.contains("%") ? " (link-local zones such as %eth0 are not supported)" : ""
            throw ConfigError(name, "must be an IP address such as 0.0.0.0 (every IPv4 interface), :: (every interface, "
                              + "IPv4 and IPv6), 127.0.0.1 or ::1, got \"\(bind.prefix(46))\"\(zone)")
        }
        return address.description
    }
}

/// The environment as `Config` reads it: values trimmed, empty ones absent.
struct EnvironmentReader: Sendable {
    private let env: [String: String]

    init(_ env: [String: String]) { self.env = env }

    /// The value as given (secrets and PEM keys keep their whitespace).
    func raw(_ name: String) -> String? { env[name] }

    /// The value trimmed; nil when unset or blank.
    func value(_ name: String) -> String? {
        guard let raw = env[name] else { return nil }
        let trimmed = raw.trimmingWhitespace()
        return trimmed.isEmpty ? nil : trimmed
    }

    /// A whole number in `range`, or `fallback` when unset.
    func integer(_ name: String, in range: ClosedRange<Int>, default fallback: Int) throws(ConfigError) -> Int {
        guard let raw = value(name) else { return fallback }
        guard let parsed = Int(raw), range.contains(parsed) else {
            throw ConfigError(name, "must be a number from \(range.lowerBound) to \(range.upperBound), got \"\(raw.prefix(20))\"")
        }
        return parsed
    }
}
