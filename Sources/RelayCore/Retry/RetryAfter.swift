/// The `Retry-After` header (RFC 9110 §10.2.3) as APNs and Prefect send it on 429 and 503.
public enum RetryAfter {
    /// Longest wait taken from a server's word; a larger value is clamped, so one odd answer can't park work for days.
    public static let longest = 3600

    /// Whole seconds from a `delay-seconds` value; nil for anything else. An HTTP-date is read as absent: neither
    /// server sends one, and the caller's own backoff applies instead.
    public static func seconds(_ value: String) -> Int? { seconds(bytes: value.utf8) }

    /// `seconds(_:)` from the header's bytes as they came (the APNs callback reads them without making a String).
    public static func seconds<Bytes: Collection<UInt8>>(bytes value: Bytes) -> Int? {
        let digits = value.drop { $0 == 0x20 }.prefix { $0 != 0x20 }
        return ASCIIDecimal.value(digits, maxDigits: 10).map { min($0, longest) }
    }
}

/// A non-negative decimal written in ASCII digits only, as HTTP header values carry them.
public enum ASCIIDecimal {
    /// The number `bytes` spell, or nil when they are empty, hold anything but `0`–`9`, or run past `maxDigits`
    /// (which keeps the result far from overflow).
    public static func value<Bytes: Collection<UInt8>>(_ bytes: Bytes, maxDigits: Int) -> Int? {
        guard !bytes.isEmpty, bytes.count <= maxDigits else { return nil }
        var number = 0
        for byte in bytes {
            guard byte >= 0x30 && byte <= 0x39 else { return nil }
            number = number * 10 + Int(byte - 0x30)
        }
        return number
    }
}
