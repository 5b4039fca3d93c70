/// Base64 (RFC 4648) in its two alphabets: `.standard` with padding (§4, HTTP Basic credentials) and `.url`
/// without padding (§5, every part of a JWT).
public enum Base64 {
    public enum Alphabet: Sendable {
        case standard, url

        fileprivate var symbols: [UInt8] {
            Array(("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789" + (self == .url ? "-_" : "+/")).utf8)
        }
    }

    private static let standardSymbols = Alphabet.standard.symbols
    private static let urlSymbols = Alphabet.url.symbols

    public static func encode(_ bytes: some Collection<UInt8>, _ alphabet: Alphabet = .standard) -> String {
        let symbols = alphabet == .url ? urlSymbols : standardSymbols
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var iterator = bytes.makeIterator()
        while let b0 = iterator.next() {
            let b1 = iterator.next()
            let b2 = b1 == nil ? nil : iterator.next()
            out.append(symbols[Int(b0 >> 2)])
            out.append(symbols[Int((b0 & 0x03) << 4 | (b1 ?? 0) >> 4)])
            if let b1 { out.append(symbols[Int((b1 & 0x0f) << 2 | (b2 ?? 0) >> 6)]) }
            if let b2 { out.append(symbols[Int(b2 & 0x3f)]) }
            if alphabet == .standard && b2 == nil { out += b1 == nil ? [0x3d, 0x3d] : [0x3d] }  // "=" padding
        }
        return String(decoding: out, as: UTF8.self)
    }

    public static func encode(_ text: String, _ alphabet: Alphabet = .standard) -> String {
        encode(Array(text.utf8), alphabet)
    }

    /// Decodes padded or unpadded text in `alphabet`; nil on any character outside it or a truncated quantum.
    public static func decode(_ text: String, _ alphabet: Alphabet = .standard) -> [UInt8]? {
        let (c62, c63) = alphabet == .url ? (UInt8(ascii: "-"), UInt8(ascii: "_")) : (UInt8(ascii: "+"), UInt8(ascii: "/"))
        var values: [UInt8] = []
        values.reserveCapacity(text.utf8.count)
        for c in text.utf8 {
            switch c {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): values.append(c - UInt8(ascii: "A"))
            case UInt8(ascii: "a")...UInt8(ascii: "z"): values.append(c - UInt8(ascii: "a") + 26)
            case UInt8(ascii: "0")...UInt8(ascii: "9"): values.append(c - UInt8(ascii: "0") + 52)
            case c62: values.append(62)
            case c63: values.append(63)
            case UInt8(ascii: "="): continue
            default: return nil
            }
        }
        if values.count % 4 == 1 { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(values.count * 3 / 4)
        var index = 0
        while index < values.count {
            let chunk = values[index..<min(index + 4, values.count)]
            let v = chunk.enumerated().reduce(UInt32(0)) { $0 | UInt32($1.element) << (18 - 6 * UInt32($1.offset)) }
            out.append(UInt8(v >> 16 & 0xff))
            if chunk.count > 2 { out.append(UInt8(v >> 8 & 0xff)) }
            if chunk.count > 3 { out.append(UInt8(v & 0xff)) }
            index += 4
        }
        return out
    }
}
