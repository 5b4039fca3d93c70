/// Prefect's answers to "may this Authorization header in?", remembered for five minutes (DESIGN.md §3).
/// Keyed by a hash of the header, never the header itself; only definite answers (admit or refuse) are stored —
/// an unreachable Prefect is never cached. Bounded: expired entries go first, then the oldest.
public struct AuthCache: Sendable {
    public static let lifetime: Double = 300
    public let capacity: Int
    private var entries: [String: (admitted: Bool, expires: Double)] = [:]

    public init(capacity: Int = 1024) { self.capacity = capacity }

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
        entries[key] = (admitted, now + AuthCache.lifetime)
    }

    public var count: Int { entries.count }
}
