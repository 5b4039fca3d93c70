/// Prefect's answers to "may this Authorization header in?", remembered for five minutes (`Authorizer`).
/// Keyed by a hash of the header, never the header itself; only definite answers (admit or refuse) are stored —
/// an unreachable Prefect is never cached. Bounded: expired entries go first, then the oldest.
public struct AuthCache: Sendable {
    public static let lifetime: Double = 300
    public let capacity: Int
    /// How long an entry lives (seconds).
    public let entryLifetime: Double
    private var entries: [String: (admitted: Bool, expires: Double)] = [:]

    public init(capacity: Int = 1024, lifetime: Double = AuthCache.lifetime) {
        self.capacity = capacity
        self.entryLifetime = lifetime
    }

    public func lookup(_ key: String, now: Double) -> Bool? {
        guard let entry = entries[key], entry.expires > now else { return nil }
        return entry.admitted
    }

    public mutating func store(_ key: String, admitted: Bool, now: Double) {
        if entries.count >= capacity && entries[key] == nil {
            entries = entries.filter { $0.value.expires > now }
            if entries.count >= capacity, let oldest = entries.min(by: { $0.value.expires < $1.value.expires }) {
                entries[oldest.key] = nil
            }
        }
        entries[key] = (admitted, now + entryLifetime)
    }

    public var count: Int { entries.count }
}

/// The shape of an `Authorization` value, checked before anyone asks Prefect about it: 1–4096 characters of
/// visible ASCII and spaces, starting with an auth scheme (a token). Anything else is the caller's mistake (400),
/// not a question for Prefect, which would answer 400 and make it look like the relay's fault.
public enum CredentialShape {
    public static let maxLength = 4096

    /// What is wrong with `value`, or nil when it is well formed.
    public static func problem(_ value: String) -> String? {
        let bytes = value.utf8
        if bytes.isEmpty { return "the Authorization header is empty" }
        if bytes.count > maxLength { return "the Authorization header is over \(maxLength) bytes" }
        guard bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else {
            return "the Authorization header holds a control or non-ASCII character"
        }
        let scheme = bytes.prefix { $0 != 0x20 }
        guard !scheme.isEmpty, scheme.allSatisfy(HTTPSyntax.isTokenByte) else {
            return "the Authorization header must start with a scheme, e.g. Basic"
        }
        return nil
    }
}
