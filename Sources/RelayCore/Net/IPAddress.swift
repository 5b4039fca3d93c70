/// An IP address as the relay compares and logs it: 4 bytes (IPv4) or 16 (IPv6). An IPv4-mapped IPv6 address
/// (`::ffff:a.b.c.d`, what a dual-stack socket reports for an IPv4 peer) is read as the IPv4 address it carries, so
/// one client has one address whichever socket it came in on, and an IPv4 network in `TRUSTED_PROXIES` matches it.
public struct IPAddress: Sendable, Hashable, CustomStringConvertible {
    /// 4 bytes, or 16 that are not IPv4-mapped.
    public let bytes: [UInt8]

    public var isIPv4: Bool { bytes.count == 4 }

    /// `::`, every IPv6 address (with IPv6-only off, every IPv4 one too).
    public var isUnspecifiedIPv6: Bool { bytes.count == 16 && bytes.allSatisfy { $0 == 0 } }

    /// From the bytes of a socket address: 4, or 16 (an IPv4-mapped one becomes its IPv4 address); nil otherwise.
    public init?(bytes: [UInt8]) {
        guard let normalised = IPAddress.normalised(bytes) else { return nil }
        self.bytes = normalised
    }

    /// A dotted IPv4 address (four decimal parts, 0-255, no leading zeros) or an IPv6 literal (RFC 4291 text, an
    /// embedded IPv4 tail allowed; no brackets, no zone such as `%eth0`); nil for anything else.
    public init?(_ text: some StringProtocol) {
        guard let raw = IPAddress.rawBytes(text) else { return nil }
        self.init(bytes: raw)
    }

    /// Dotted for IPv4; RFC 5952 for IPv6 (lower case, the longest run of two or more zero groups as `::`).
    public var description: String {
        if isIPv4 { return bytes.map(String.init).joined(separator: ".") }
        let groups = (0..<8).map { Int(bytes[2 * $0]) << 8 | Int(bytes[2 * $0 + 1]) }
        var best: Range<Int>?
        var index = 0
        while index < 8 {
            guard groups[index] == 0 else { index += 1; continue }
            var end = index
            while end < 8 && groups[end] == 0 { end += 1 }
            if end - index >= 2 && end - index > (best?.count ?? 0) { best = index..<end }
            index = end
        }
        let hex = { (range: Range<Int>) in range.map { String(groups[$0], radix: 16) }.joined(separator: ":") }
        guard let best else { return hex(0..<8) }
        return hex(0..<best.lowerBound) + "::" + hex(best.upperBound..<8)
    }

    // MARK: - Parsing

    /// The address's bytes as written: 4 for dotted IPv4, 16 for IPv6 (an IPv4-mapped one not yet made IPv4, so a
    /// network like `::ffff:10.0.0.0/104` keeps its IPv6 prefix length until `IPNetwork` converts it).
    static func rawBytes(_ text: some StringProtocol) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        // The longest IPv6 text is 45 characters (ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255).
        guard !utf8.isEmpty, utf8.count <= 45 else { return nil }
        return utf8.contains(UInt8(ascii: ":")) ? ipv6(utf8[...]) : ipv4(utf8[...])
    }

    private static func ipv4(_ text: ArraySlice<UInt8>) -> [UInt8]? {
        let parts = text.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var bytes: [UInt8] = []
        for part in parts {
            // Plain decimal, as inet_pton reads it: no sign, no leading zero (which some read as octal).
            guard !part.isEmpty, part.count <= 3, part.allSatisfy({ $0 >= 48 && $0 <= 57 }),
                  part.count == 1 || part.first != 48 else { return nil }
            let value = part.reduce(0) { $0 * 10 + Int($1 - 48) }
            guard value <= 255 else { return nil }
            bytes.append(UInt8(value))
        }
        return bytes
    }

    private static func ipv6(_ text: ArraySlice<UInt8>) -> [UInt8]? {
        let colon = UInt8(ascii: ":")
        var gap: Int?
        for index in text.indices.dropLast() where text[index] == colon && text[index + 1] == colon {
            guard gap == nil else { return nil }  // `::` at most once
            gap = index
        }
        guard let gap else { return groups(text, ipv4Tail: true).flatMap { $0.count == 16 ? $0 : nil } }
        // Only the part after `::` may end in a dotted IPv4 address: the tail is the address's last 32 bits.
        guard let head = groups(text[..<gap], ipv4Tail: false), let tail = groups(text[(gap + 2)...], ipv4Tail: true),
              head.count + tail.count <= 14 else { return nil }
        return head + [UInt8](repeating: 0, count: 16 - head.count - tail.count) + tail
    }

    /// `h:h:...` groups of 1-4 hex digits as bytes, the last one possibly dotted IPv4; empty text is no groups.
    private static func groups(_ text: ArraySlice<UInt8>, ipv4Tail: Bool) -> [UInt8]? {
        guard !text.isEmpty else { return [] }
        let parts = text.split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false)
        var bytes: [UInt8] = []
        for (index, part) in parts.enumerated() {
            if ipv4Tail && index == parts.count - 1 && part.contains(UInt8(ascii: ".")) {
                guard let tail = ipv4(part) else { return nil }
                bytes += tail
                continue
            }
            guard !part.isEmpty, part.count <= 4 else { return nil }
            var value = 0
            for byte in part {
                guard let digit = hexValue(byte) else { return nil }
                value = value << 4 | digit
            }
            bytes += [UInt8(value >> 8), UInt8(value & 0xff)]
        }
        return bytes.count <= 16 ? bytes : nil
    }

    private static func hexValue(_ byte: UInt8) -> Int? {
        switch byte {
        case 48...57: return Int(byte - 48)
        case 97...102: return Int(byte - 87)
        case 65...70: return Int(byte - 55)
        default: return nil
        }
    }

    /// 4 bytes as they are; 16 bytes, or their IPv4 address when they are `::ffff:a.b.c.d`; nil for other lengths.
    static func normalised(_ bytes: [UInt8]) -> [UInt8]? {
        switch bytes.count {
        case 4: return bytes
        case 16: return isIPv4Mapped(bytes) ? Array(bytes[12...]) : bytes
        default: return nil
        }
    }

    static func isIPv4Mapped(_ bytes: [UInt8]) -> Bool {
        bytes.count == 16 && bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xff && bytes[11] == 0xff
    }
}
