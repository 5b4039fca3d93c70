/// Small string helpers for bounding and cleaning hostile text, all grapheme-safe.
extension String {
    /// The longest prefix of whole characters (grapheme clusters) that fits in `limit` UTF-8 bytes.
    public func prefix(utf8Bytes limit: Int) -> String {
        guard utf8.count > limit else { return self }
        var bytes = 0
        var end = startIndex
        for index in indices {
            let size = self[index].utf8.count
            if bytes + size > limit { break }
            bytes += size
            end = self.index(after: index)
        }
        return String(self[..<end])
    }

    /// The most UTF-8 bytes one grapheme keeps in a pushed text. A family emoji with skin tones is 41 bytes, a
    /// tag-sequence flag 28; beyond this a cluster is only stacked marks or joiners, shown as noise anyway.
    public static let maxGraphemeBytes = 64

    /// Every grapheme cluster over `maxBytes` replaced by its longest prefix of whole scalars within `maxBytes`
    /// (with no trailing joiner), so `e` + 2,000 combining accents becomes `e` + a few. Text whose clusters are all
    /// within the bound is returned as is.
    public func boundingGraphemes(maxBytes: Int = String.maxGraphemeBytes) -> String {
        guard contains(where: { $0.utf8.count > maxBytes }) else { return self }
        var out = ""
        for character in self {
            if character.utf8.count <= maxBytes {
                out.append(character)
                continue
            }
            var kept = String.UnicodeScalarView()
            var bytes = 0
            for scalar in character.unicodeScalars {
                let size = UTF8.width(scalar)
                if bytes + size > maxBytes { break }
                kept.append(scalar)
                bytes += size
            }
            while let last = kept.last, last.value == 0x200D || last.properties.generalCategory == .format {
                kept.removeLast()
            }
            out.unicodeScalars.append(contentsOf: kept)
        }
        return out
    }

    /// The longest prefix of whole scalars within `limit` UTF-8 bytes (may end inside a grapheme cluster: for a
    /// bound before finer cutting, not for display).
    public func prefixScalars(utf8Bytes limit: Int) -> String {
        guard utf8.count > limit else { return self }
        var end = utf8.index(utf8.startIndex, offsetBy: limit)
        while end > utf8.startIndex && UTF8.isContinuation(utf8[end]) { end = utf8.index(before: end) }
        return String(self[..<end])
    }

    /// At most `limit` characters; when cut, the last kept character is followed by "…" (within the limit).
    public func truncated(toCharacters limit: Int) -> String {
        guard limit > 0 else { return "" }
        var count = 0
        var end = startIndex
        while end < endIndex, count < limit {
            end = index(after: end)
            count += 1
        }
        if end == endIndex { return self }
        let kept = String(self[..<index(before: end)]).trimmingSpaces()
        return kept + "…"
    }

    /// False when nothing would show: only spaces, control characters and invisible format characters
    /// (zero-width space, …).
    public var hasVisibleText: Bool {
        unicodeScalars.contains {
            let category = $0.properties.generalCategory
            return !$0.properties.isWhitespace && category != .format && category != .control
        }
    }

    /// Leading and trailing spaces, tabs and newlines removed.
    func trimmingSpaces() -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0.isNewline }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else {
            return ""
        }
        return String(self[first...last])
    }

    /// Text safe to show: control and format-override characters become spaces, runs of spaces collapse,
    /// and newlines are kept (at most one blank line) only when `keepNewlines`; the result is trimmed.
    public func cleanedForDisplay(keepNewlines: Bool) -> String {
        var out = ""
        var pendingSpace = false
        var pendingNewlines = 0
        for scalar in unicodeScalars {
            let value = scalar.value
            let isNewline = value == 0x0A || value == 0x0D || value == 0x85 || value == 0x2028 || value == 0x2029
            if isNewline && keepNewlines {
                pendingNewlines += 1
                pendingSpace = false
                continue
            }
            let isControl = value < 0x20 || (0x7F...0x9F).contains(value) || isNewline
            // bidi overrides/isolates would let hostile text reorder what is shown
            let isOverride = (0x202A...0x202E).contains(value) || (0x2066...0x2069).contains(value)
            if isControl || isOverride || value == 0x20 || value == 0xFEFF {
                if !out.isEmpty && pendingNewlines == 0 { pendingSpace = true }
                continue
            }
            if !out.isEmpty {
                if pendingNewlines > 0 {
                    out += pendingNewlines > 1 ? "\n\n" : "\n"
                } else if pendingSpace {
                    out += " "
                }
            }
            pendingNewlines = 0
            pendingSpace = false
            out.unicodeScalars.append(scalar)
        }
        return out
    }
}
