/// An http(s) origin plus path, split the way the C clients want it (host, port, TLS, path).
public struct HTTPURL: Sendable, Equatable {
    public var tls: Bool
    public var host: String
    public var port: Int
    public var path: String

    public var string: String {
        let defaultPort = tls ? 443 : 80
        let hostPart = host.contains(":") ? "[\(host)]" : host
        return (tls ? "https://" : "http://") + hostPart + (port == defaultPort ? "" : ":\(port)") + path
    }

    /// `host` or `host:port` as sent in `Host` / `:authority`.
    public var authority: String {
        let hostPart = host.contains(":") ? "[\(host)]" : host
        return port == (tls ? 443 : 80) ? hostPart : "\(hostPart):\(port)"
    }

    public init(tls: Bool, host: String, port: Int, path: String) {
        self.tls = tls
        self.host = host
        self.port = port
        self.path = path
    }

    public static func parse(_ text: String, variable: String, requireHTTPS: Bool = false) throws(ConfigError) -> HTTPURL {
        let fix = requireHTTPS ? "an https:// origin like https://api.push.apple.com"
                               : "an http(s):// URL like http://127.0.0.1:4200/api"
        let tls: Bool
        var rest: Substring
        if text.hasPrefix("https://") { tls = true; rest = text.dropFirst(8) }
        else if text.hasPrefix("http://") { tls = false; rest = text.dropFirst(7) }
        else { throw ConfigError(variable, "must be \(fix), got \"\(text.prefix(80))\"") }
        if requireHTTPS && !tls { throw ConfigError(variable, "must be \(fix) (APNs needs TLS)") }
        guard !text.contains(where: { $0.isWhitespaceASCIIFirst || $0 == "?" || $0 == "#" }) else {
            throw ConfigError(variable, "must be \(fix) without spaces, query or fragment")
        }

        let pathStart = rest.firstIndex(of: "/") ?? rest.endIndex
        let authority = rest[..<pathStart]
        let path = String(rest[pathStart...])
        rest = authority
        if rest.contains("@") { throw ConfigError(variable, "must not carry credentials; use PREFECT_API_AUTH_STRING") }

        let (host, portText) = try splitHostPort(rest, variable: variable, shape: fix)
        guard !host.isEmpty else { throw ConfigError(variable, "has no host; it must be \(fix)") }
        var port = tls ? 443 : 80
        if let portText {
            guard let parsed = Int(portText), (1...65535).contains(parsed) else {
                throw ConfigError(variable, "has a bad port \"\(portText.prefix(10))\"; use 1-65535")
            }
            port = parsed
        }
        return HTTPURL(tls: tls, host: String(host), port: port, path: path)
    }
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`: the host (without brackets) and the port's text, if any. `shape`
/// says what `variable` must look like, for the error.
func splitHostPort(_ rest: Substring, variable: String, shape: String) throws(ConfigError)
    -> (host: Substring, portText: Substring?)
{
    if rest.hasPrefix("[") {
        guard let close = rest.firstIndex(of: "]") else { throw ConfigError(variable, "has an unclosed [ in its host") }
        let host = rest[rest.index(after: rest.startIndex)..<close]
        let after = rest[rest.index(after: close)...]
        if after.hasPrefix(":") { return (host, after.dropFirst()) }
        guard after.isEmpty else { throw ConfigError(variable, "must be \(shape)") }
        return (host, nil)
    }
    if let colon = rest.firstIndex(of: ":") {
        return (rest[..<colon], rest[rest.index(after: colon)...])
    }
    return (rest, nil)
}
