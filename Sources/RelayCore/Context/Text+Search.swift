/// Plain substring search and splitting, byte for byte on UTF-8. The standard library's `contains(_:)` and
/// `split(separator:)` for string separators live in its string-processing module, which a static binary then
/// carries whole (1.3 MB, regex parser included); the relay only ever looks for plain ASCII words.
extension StringProtocol {
    /// Whether `needle` occurs in this text (an empty needle always does).
    public func includes(_ needle: String) -> Bool {
        range(of: Array(needle.utf8)) != nil
    }

    /// The text between occurrences of `separator`, empty pieces kept (`"a,,b"` by `","` is `["a", "", "b"]`).
    public func pieces(separatedBy separator: String) -> [String] {
        let sep = Array(separator.utf8)
        var rest = Array(utf8)[...]
        guard !sep.isEmpty else { return [String(decoding: rest, as: UTF8.self)] }
        var out: [String] = []
        while let found = Self.firstRange(of: sep, in: rest) {
            out.append(String(decoding: rest[rest.startIndex..<found], as: UTF8.self))
            rest = rest[(found + sep.count)...]
        }
        out.append(String(decoding: rest, as: UTF8.self))
        return out
    }

    private func range(of needle: [UInt8]) -> Int? {
        Self.firstRange(of: needle, in: Array(utf8)[...])
    }

    private static func firstRange(of needle: [UInt8], in bytes: ArraySlice<UInt8>) -> Int? {
        guard !needle.isEmpty else { return bytes.startIndex }
        guard bytes.count >= needle.count else { return nil }
        var start = bytes.startIndex
        while start <= bytes.endIndex - needle.count {
            if bytes[start] == needle[0] && bytes[start..<start + needle.count].elementsEqual(needle) { return start }
            start += 1
        }
        return nil
    }
}
