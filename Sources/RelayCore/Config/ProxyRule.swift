/// The egress proxy rule, read once from HTTPS_PROXY, HTTP_PROXY and NO_PROXY (each also in lower case), the way
/// curl and Python's httpx (and so Prefect's own client) read them:
/// - an https target goes through `https_proxy`/`HTTPS_PROXY`, a plain-http one through `http_proxy`/`HTTP_PROXY`;
///   when both spellings are set the lower-case one wins; an empty value counts as unset.
/// - the proxy is an `http://[user:pass@]host[:port]` URL (no scheme means http; the port defaults to 80 as in
///   httpx); the relay always asks it for a CONNECT tunnel.
/// - `no_proxy`/`NO_PROXY` is a comma-separated list: `*` (everything direct), a host name that matches itself and
///   every subdomain (a leading `.` or `*.` means the same), an IP literal that matches only that address (IPv6 with
///   or without brackets), each optionally with `:port` to match that port only. Matching ignores case.
public struct ProxyRule: Sendable, Equatable {
    public var https: ProxyEndpoint?
    public var http: ProxyEndpoint?
    public var noProxy: [NoProxyEntry]

    public enum Route: Sendable, Equatable {
        case direct
        case proxy(ProxyEndpoint)

        /// The proxy, or nil for direct.
        public var endpoint: ProxyEndpoint? {
            if case .proxy(let proxy) = self { return proxy }
            return nil
        }

        /// `direct` or `via http://proxy:3128` (never the credentials).
        public var description: String { endpoint.map { "via \($0)" } ?? "direct" }
    }

    /// One NO_PROXY entry, normalised.
    public enum NoProxyEntry: Sendable, Equatable {
        case everything
        /// A host name (lower case, no leading dot) matching itself and its subdomains; `port` nil: any port.
        case domain(String, port: Int?)
        /// An IP literal (lower case, no brackets) matching only itself.
        case address(String, port: Int?)
    }

    public static let none = ProxyRule(https: nil, http: nil, noProxy: [])

    public init(https: ProxyEndpoint?, http: ProxyEndpoint?, noProxy: [NoProxyEntry]) {
        self.https = https
        self.http = http
        self.noProxy = noProxy
    }

    /// Reads the six variables through their descriptors in `Settings`; a malformed proxy URL is a `ConfigError`
    /// naming the variable (never its password).
    public init(environment env: [String: String]) throws(ConfigError) {
        let reader = EnvironmentReader(env)
        // The first of the two set and not blank (the descriptor trims, and reads blank as unset), with its name.
        func pick(_ lower: Setting<String?>, _ upper: Setting<String?>) throws(ConfigError) -> (name: String, value: String)? {
            for setting in [lower, upper] {
                if let value = try setting.read(reader) { return (setting.name, value) }
            }
            return nil
        }
        https = try pick(Settings.httpsProxyLower, Settings.httpsProxy).map { v throws(ConfigError) in
            try ProxyEndpoint.parse(v.value, variable: v.name)
        }
        http = try pick(Settings.httpProxyLower, Settings.httpProxy).map { v throws(ConfigError) in
            try ProxyEndpoint.parse(v.value, variable: v.name)
        }
        noProxy = try pick(Settings.noProxyLower, Settings.noProxy).map { v throws(ConfigError) in
            try ProxyRule.parseNoProxy(v.value, variable: v.name)
        } ?? []
    }

    /// Whether a proxy is configured at all.
    public var isEmpty: Bool { https == nil && http == nil }

    /// How to reach `host:port` (`tls`: an https or wss target).
    public func route(tls: Bool, host: String, port: Int) -> Route {
        guard let proxy = tls ? https : http else { return .direct }
        return bypasses(host: host, port: port) ? .direct : .proxy(proxy)
    }

    public func route(for url: HTTPURL) -> Route { route(tls: url.tls, host: url.host, port: url.port) }

    /// Whether NO_PROXY sends `host:port` direct.
    public func bypasses(host: String, port: Int) -> Bool {
        var name = host.lowercased()
        if name.hasPrefix("[") && name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        while name.hasSuffix(".") { name.removeLast() }
        let isAddress = ProxyRule.isIPLiteral(name)
        for entry in noProxy {
            switch entry {
            case .everything: return true
            case .address(let address, let entryPort):
                if address == name && (entryPort == nil || entryPort == port) { return true }
            case .domain(let domain, let entryPort):
                guard !isAddress, entryPort == nil || entryPort == port else { continue }
                if name == domain || name.hasSuffix("." + domain) { return true }
            }
        }
        return false
    }

    static func parseNoProxy(_ text: String, variable: String) throws(ConfigError) -> [NoProxyEntry] {
        var entries: [NoProxyEntry] = []
        for raw in text.split(separator: ",") {
            var item = Substring(raw.lowercased().trimmingWhitespace())
            if item.isEmpty { continue }
            if item == "*" { entries.append(.everything); continue }
            // httpx accepts scheme://host entries; the scheme makes no difference to the relay.
            if let (_, rest) = splitScheme(item) { item = rest }
            var port: Int?
            var host: Substring
            if item.hasPrefix("[") {
                guard let close = item.firstIndex(of: "]") else {
                    throw ConfigError(variable, "has an unclosed [ in \"\(item)\"; write an IPv6 address as [::1] or [::1]:443")
                }
                host = item[item.index(after: item.startIndex)..<close]
                let after = item[item.index(after: close)...]
                if after.hasPrefix(":") { port = try noProxyPort(after.dropFirst(), item, variable) }
                else if !after.isEmpty { throw ConfigError(variable, "has a malformed entry \"\(item)\"") }
            } else if item.filter({ $0 == ":" }).count == 1, let colon = item.firstIndex(of: ":") {
                host = item[..<colon]
                port = try noProxyPort(item[item.index(after: colon)...], item, variable)
            } else {
                host = item  // a name, an IPv4 address, or a bare IPv6 address (several colons)
            }
            while host.hasSuffix(".") { host.removeLast() }
            if isIPLiteral(String(host)) {
                entries.append(.address(String(host), port: port))
            } else {
                while host.hasPrefix("*") || host.hasPrefix(".") { host.removeFirst() }
                guard !host.isEmpty else { throw ConfigError(variable, "has an entry \"\(item)\" without a host name") }
                entries.append(.domain(String(host), port: port))
            }
        }
        return entries
    }

    private static func noProxyPort(_ text: Substring, _ item: Substring, _ variable: String) throws(ConfigError) -> Int {
        guard let port = Int(text), (1...65535).contains(port) else {
            throw ConfigError(variable, "has a bad port in \"\(item)\"; write host, host:port, or *")
        }
        return port
    }

    /// An IPv4 dotted quad or an IPv6 literal (without brackets).
    static func isIPLiteral(_ host: String) -> Bool {
        if host.contains(":") { return host.allSatisfy { $0.isHexDigit || $0 == ":" || $0 == "." } }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts.allSatisfy { part in
            !part.isEmpty && part.count <= 3 && part.allSatisfy(\.isASCIIDigit) && Int(part)! <= 255
        }
    }
}

/// An HTTP proxy: where it is and the Basic credentials it wants, if any. `description` never shows them.
public struct ProxyEndpoint: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var username: String?
    public var password: String?

    public init(host: String, port: Int, username: String? = nil, password: String? = nil) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password
    }

    /// `host:port` (IPv6 in brackets), to connect to and to name in logs.
    public var authority: String { (host.contains(":") ? "[\(host)]" : host) + ":\(port)" }

    /// The proxy for logs and `check`: `http://host:port`, never the credentials.
    public var description: String { "http://" + authority }

    /// The `Proxy-Authorization` value, or nil without credentials.
    public var authorization: String? {
        guard let username else { return nil }
        return "Basic " + Base64.encode(username + ":" + (password ?? ""))
    }

    /// `http://[user:pass@]host[:port][/]`; no scheme means http://.
    public static func parse(_ text: String, variable: String) throws(ConfigError) -> ProxyEndpoint {
        var rest = Substring(text)
        if let (schemeText, after) = splitScheme(rest) {
            let scheme = schemeText.lowercased()
            guard scheme == "http" else {
                throw ConfigError(variable, "uses \(scheme)://, which the relay does not support; give an http:// proxy "
                                  + "(it still carries https through a CONNECT tunnel)")
            }
            rest = after
        }
        while rest.hasSuffix("/") { rest.removeLast() }
        guard !rest.contains("/"), !rest.contains("?"), !rest.contains("#") else {
            throw ConfigError(variable, "must be a proxy origin like http://proxy:3128, without a path")
        }
        let (username, password) = try takeCredentials(from: &rest, variable: variable)
        let (host, portText) = try splitHostPort(rest, variable: variable, shape: "a proxy origin like http://[::1]:3128")
        guard !host.isEmpty, !host.contains(where: \.isWhitespaceASCIIFirst) else {
            throw ConfigError(variable, "must name a proxy host, like http://proxy:3128")
        }
        // libwebsockets (the events socket) keeps the proxy host and credentials in fixed buffers and, given longer
        // ones, quietly connects direct instead: refuse them here.
        if host.utf8.count > 120 {
            throw ConfigError(variable, "names a proxy host over 120 characters, more than the events socket's library takes")
        }
        if let username, (username + ":" + (password ?? "")).utf8.count > 90 {
            throw ConfigError(variable, "has credentials over 90 bytes (user:pass), more than the events socket's library "
                              + "takes; use a shorter proxy password")
        }
        var port = 80
        if let portText {
            guard let value = Int(portText), (1...65535).contains(value) else {
                throw ConfigError(variable, "has a bad port; use http://host:port with a port from 1 to 65535")
            }
            port = value
        }
        return ProxyEndpoint(host: String(host), port: port, username: username, password: password)
    }

    /// Takes `user[:pass]@` off the front of `rest`, %-decoded: (nil, nil) without one, a nil password without a colon.
    private static func takeCredentials(from rest: inout Substring, variable: String) throws(ConfigError)
        -> (username: String?, password: String?)
    {
        guard let at = rest.lastIndex(of: "@") else { return (nil, nil) }
        let userinfo = rest[..<at]
        rest = rest[rest.index(after: at)...]
        let colon = userinfo.firstIndex(of: ":")
        guard let user = percentDecoded(colon.map { userinfo[..<$0] } ?? userinfo),
              let pass = percentDecoded(colon.map { userinfo[userinfo.index(after: $0)...] } ?? "") else {
            throw ConfigError(variable, "has a malformed %-escape in its credentials")
        }
        return (user, colon == nil ? nil : pass)
    }

    private static func percentDecoded(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var utf8 = Array(text.utf8)[...]
        while let byte = utf8.popFirst() {
            if byte == UInt8(ascii: "%") {
                guard utf8.count >= 2, let value = UInt8(String(decoding: utf8.prefix(2), as: UTF8.self), radix: 16) else {
                    return nil
                }
                bytes.append(value)
                utf8 = utf8.dropFirst(2)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// `scheme` and the rest of `scheme://rest`, or nil without `://`.
func splitScheme(_ text: Substring) -> (Substring, Substring)? {
    guard let colon = text.firstIndex(of: ":"), text[colon...].hasPrefix("://") else { return nil }
    return (text[..<colon], text[text.index(colon, offsetBy: 3)...])
}
