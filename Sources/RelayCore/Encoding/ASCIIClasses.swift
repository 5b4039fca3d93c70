/// Character classes answered from the code point where ASCII is what matters. `Character.isLetter`, `isNumber` and
/// `isWhitespace` look every character up in the Swift runtime's Unicode property tables (650 kB): one lookup during
/// start-up's settings checks kept ~140 kB of them resident for the life of the relay.
extension Character {
    /// A–Z or a–z.
    package var isASCIILetter: Bool {
        guard let value = asciiValue else { return false }
        return (0x41...0x5A).contains(value) || (0x61...0x7A).contains(value)
    }

    /// 0–9.
    package var isASCIIDigit: Bool { asciiValue.map { (0x30...0x39).contains($0) } ?? false }

    package var isASCIILetterOrDigit: Bool { isASCIILetter || isASCIIDigit }

    /// `isWhitespace`, with ASCII answered without the tables (tab to carriage return and space: Unicode's
    /// White_Space in ASCII; CR-LF is one `Character` whose `asciiValue` is LF). Anything else, such as a pasted
    /// no-break space, still goes to the tables.
    package var isWhitespaceASCIIFirst: Bool {
        guard let value = asciiValue else { return isWhitespace }
        return value == 0x20 || (0x09...0x0D).contains(value)
    }
}
