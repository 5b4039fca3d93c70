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
}
