import RelayCore

// Only the fake APNs reads tokens (`JWTVerifier`); the relay itself only ever encodes.
extension Base64 {
    /// Decodes padded or unpadded text in `alphabet`; nil on any character outside it or a truncated quantum.
    static func decode(_ text: String, _ alphabet: Alphabet = .standard) -> [UInt8]? {
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
