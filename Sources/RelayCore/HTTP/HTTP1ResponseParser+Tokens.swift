// The byte-level pieces of HTTP/1.1 syntax the parser and the request writer share (RFC 9110 §5.6, RFC 9112 §7.1).

extension HTTP1ResponseParser {
    /// The bytes as text without leading or trailing spaces and tabs (OWS).
    static func trimmed(_ bytes: ArraySlice<UInt8>) -> String {
        var slice = bytes
        while let first = slice.first, first == 0x20 || first == 0x09 { slice = slice.dropFirst() }
        while let last = slice.last, last == 0x20 || last == 0x09 { slice = slice.dropLast() }
        return String(decoding: slice, as: UTF8.self)
    }

    /// `1*HEXDIG [ ; extensions ]`, at most 15 digits so it can't overflow.
    static func chunkSize(_ line: ArraySlice<UInt8>) -> Int? {
        var size = 0
        var digits = 0
        var index = line.startIndex
        while index < line.endIndex, let digit = Self.hexValue(line[index]) {
            digits += 1
            guard digits <= 15 else { return nil }
            size = size * 16 + digit
            index += 1
        }
        guard digits > 0 else { return nil }
        // What follows the digits may only be whitespace and `;ext`.
        while index < line.endIndex, line[index] == 0x20 || line[index] == 0x09 { index += 1 }
        guard index == line.endIndex || line[index] == 0x3B else { return nil }
        return size
    }

    static func hexValue(_ byte: UInt8) -> Int? {
        switch byte {
        case 0x30...0x39: return Int(byte - 0x30)
        case 0x41...0x46: return Int(byte - 0x41 + 10)
        case 0x61...0x66: return Int(byte - 0x61 + 10)
        default: return nil
        }
    }

    static func decimal(_ text: String) -> Int? {
        guard !text.isEmpty, text.utf8.count <= 15, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int(text)
    }

    /// Comma-separated list items, trimmed, empty ones dropped.
    static func tokens(_ value: String) -> [String] {
        value.utf8.split(separator: 0x2C).map { item in
            var slice = item
            while let first = slice.first, first == 0x20 || first == 0x09 { slice = slice.dropFirst() }
            while let last = slice.last, last == 0x20 || last == 0x09 { slice = slice.dropLast() }
            return String(decoding: slice, as: UTF8.self)
        }.filter { !$0.isEmpty }
    }

    /// ASCII case-insensitive equality, as header names and these tokens compare.
    static func sameToken(_ a: String, _ b: String) -> Bool {
        func lower(_ byte: UInt8) -> UInt8 { byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte }
        return a.utf8.count == b.utf8.count && zip(a.utf8, b.utf8).allSatisfy { lower($0) == lower($1) }
    }
}
