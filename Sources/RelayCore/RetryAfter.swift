/// The `Retry-After` header (RFC 9110 §10.2.3) as APNs and Prefect send it on 429 and 503.
public enum RetryAfter {
    /// Longest wait taken from a server's word; a larger value is clamped, so one odd answer can't park work for days.
    public static let longest = 3600

    /// Whole seconds from a `delay-seconds` value; nil for anything else. An HTTP-date is read as absent: neither
    /// server sends one, and the caller's own backoff applies instead.
    public static func seconds(_ value: String) -> Int? {
        let digits = value.utf8.drop { $0 == 0x20 }.prefix { $0 != 0x20 }
        guard !digits.isEmpty, digits.count <= 10, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return min(Int(String(decoding: digits, as: UTF8.self)) ?? longest, longest)
    }
}
