// The relay's JSON reader (RFC 8259, strict) straight into `JSONValue`: every Prefect answer, socket message, API
// body and stored props text goes through it. It replaced jansson plus the conversion of jansson's tree, which cost
// ~60 µs warm and ~150 µs cold for a 2.9 KB Prefect run on the relay's small nodes (this reader: ~12 µs warm), four
// times on the way from a Paused event to its push. It accepts what that reading accepted (`json_loadb` with
// `JSON_DECODE_ANY | JSON_ALLOW_NUL`), with the same values; the tests and the JSON fuzz harness hold it to jansson
// (`Tests/RelayTests/Support/Jansson.swift`). One difference, on jansson's side: its lexer drops a NUL byte right
// after a number or literal (`[1\0]` passes), where this reader refuses every NUL outside a string.

/// Why a JSON text was refused: what is wrong, at which byte.
public struct JSONParseError: Error, CustomStringConvertible {
    public let message: String
    /// Where in the input (bytes from the start) the fault was found.
    public let offset: Int
    public var description: String { message }
}

public enum JSONParser {
    /// A value this deep (the root is at 0) is refused, as the jansson reading refused it: hostile nesting stays
    /// cheap and can't exhaust the stack.
    public static let maxDepth = 64

    /// Any JSON value, with whitespace around it and nothing else.
    public static func parse(_ bytes: UnsafeRawBufferPointer) throws(JSONParseError) -> JSONValue {
        guard let start = bytes.baseAddress, bytes.count > 0 else {
            throw JSONParseError(message: "unexpected end of input at offset 0: expected a value", offset: 0)
        }
        var reader = Reader(start: start, count: bytes.count)
        return try reader.document()
    }

    public static func parse(_ bytes: [UInt8]) throws(JSONParseError) -> JSONValue {
        // `withUnsafeBytes` rethrows untyped, so the typed error crosses it as a Result.
        let result = bytes.withUnsafeBytes { raw in
            Result { () throws(JSONParseError) -> JSONValue in try parse(raw) }
        }
        return try result.get()
    }

    public static func parse(_ text: String) throws(JSONParseError) -> JSONValue {
        var text = text
        // Contiguous UTF-8 already for any String the relay makes or reads; bridged ones are made so first.
        let result = text.withUTF8 { utf8 in
            Result { () throws(JSONParseError) -> JSONValue in try parse(UnsafeRawBufferPointer(utf8)) }
        }
        return try result.get()
    }
}

/// One parse: the input, a cursor, and stacks that array items and object members collect on until their
/// container closes, so each container is built once at its final size.
private struct Reader: ~Copyable {
    let start: UnsafeRawPointer
    let count: Int
    var index = 0
    var depth = 0
    var items = MoveStack<JSONValue>(capacity: 64)
    var members = MoveStack<(key: String, value: JSONValue)>(capacity: 64)
    var unescaped: [UInt8] = []

    init(start: UnsafeRawPointer, count: Int) {
        self.start = start
        self.count = count
    }

    @inline(__always) func byte(_ at: Int) -> UInt8 { start.load(fromByteOffset: at, as: UInt8.self) }

    mutating func document() throws(JSONParseError) -> JSONValue {
        skipWhitespace()
        let value = try readValue()
        skipWhitespace()
        guard index == count else { throw unexpected("expected the end of input after the value") }
        return value
    }

    /// JSON whitespace is space, tab, line feed and carriage return only.
    @inline(__always) mutating func skipWhitespace() {
        while index < count {
            let b = byte(index)
            guard b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 else { return }
            index += 1
            // Indentation, eight spaces at a time.
            while index + 8 <= count, start.loadUnaligned(fromByteOffset: index, as: UInt64.self) == Reader.spaces {
                index += 8
            }
        }
    }

    static let spaces: UInt64 = 0x2020_2020_2020_2020

    mutating func readValue() throws(JSONParseError) -> JSONValue {
        guard index < count else { throw unexpected("expected a value") }
        guard depth < JSONParser.maxDepth else {
            throw JSONParseError(message: "value at offset \(index) is nested deeper than \(JSONParser.maxDepth) levels",
                                offset: index)
        }
        switch byte(index) {
        case 0x22: return .string(try readString(isKey: false))
        case 0x7B: return try readObject()
        case 0x5B: return try readArray()
        case 0x74: try readLiteral("true"); return .bool(true)
        case 0x66: try readLiteral("false"); return .bool(false)
        case 0x6E: try readLiteral("null"); return .null
        case 0x2D, 0x30...0x39: return try readNumber()
        default: throw unexpected("expected a value")
        }
    }

    mutating func readLiteral(_ word: StaticString) throws(JSONParseError) {
        let letters = UnsafeRawBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
        for letter in letters {
            guard index < count, byte(index) == letter else { throw unexpected("expected \(word)") }
            index += 1
        }
    }

    // MARK: - Containers

    mutating func readArray() throws(JSONParseError) -> JSONValue {
        index += 1  // [
        skipWhitespace()
        if index < count, byte(index) == 0x5D {
            index += 1
            return .array([])
        }
        depth += 1
        let base = items.count
        while true {
            items.push(try readValue())
            skipWhitespace()
            guard index < count else { throw unexpected("expected ',' or ']' after an array item") }
            let b = byte(index)
            if b == 0x2C {
                index += 1
                skipWhitespace()
            } else if b == 0x5D {
                index += 1
                break
            } else {
                throw unexpected("expected ',' or ']' after an array item")
            }
        }
        depth -= 1
        return .array(items.pop(from: base))
    }

    mutating func readObject() throws(JSONParseError) -> JSONValue {
        index += 1  // {
        skipWhitespace()
        if index < count, byte(index) == 0x7D {
            index += 1
            return .object([:])
        }
        depth += 1
        let base = members.count
        while true {
            guard index < count, byte(index) == 0x22 else {
                throw unexpected(members.count == base ? "expected a member name or '}'" : "expected a member name")
            }
            let key = try readString(isKey: true)
            skipWhitespace()
            guard index < count, byte(index) == 0x3A else { throw unexpected("expected ':' after a member name") }
            index += 1
            skipWhitespace()
            members.push((key, try readValue()))
            skipWhitespace()
            guard index < count else { throw unexpected("expected ',' or '}' after an object member") }
            let b = byte(index)
            if b == 0x2C {
                index += 1
                skipWhitespace()
            } else if b == 0x7D {
                index += 1
                break
            } else {
                throw unexpected("expected ',' or '}' after an object member")
            }
        }
        depth -= 1
        var object = [String: JSONValue](minimumCapacity: members.count - base)
        // In order, so a repeated name keeps its last value, as jansson does.
        members.pop(from: base) { key, value in object[key] = value }
        return .object(object)
    }

    // MARK: - Strings

    /// A string at `index` (its opening quote). Text without escapes becomes a String straight from the input;
    /// only text with bytes past ASCII is checked for UTF-8 on the way (the standard library's own check then finds
    /// nothing to repair).
    mutating func readString(isKey: Bool) throws(JSONParseError) -> String {
        let open = index
        index += 1
        let first = index
        var seen: UInt64 = 0  // every byte so far OR-ed together: its high bits say whether any was past ASCII
        while true {
            // Eight bytes at a time to the next quote, backslash or control character.
            if index + 8 <= count {
                let word = UInt64(littleEndian: start.loadUnaligned(fromByteOffset: index, as: UInt64.self))
                let found = Reader.specialBytes(word)
                if found == 0 {
                    seen |= word
                    index += 8
                    continue
                }
                let before = found.trailingZeroBitCount >> 3
                seen |= word & ((1 << (before << 3)) &- 1)
                index += before
            } else if index == count {
                break
            }
            let b = byte(index)
            if b == 0x22 {
                if seen & Reader.highBits != 0 { try validateUTF8(first, index) }
                let string = String(decoding: UnsafeRawBufferPointer(start: start + first, count: index - first),
                                    as: UTF8.self)
                index += 1
                return string
            }
            if b == 0x5C {
                return try readEscapedString(first: first, isKey: isKey, pastASCII: seen & Reader.highBits != 0)
            }
            if b < 0x20 { throw controlCharacter(b) }
            seen |= UInt64(b)
            index += 1  // only in the last few bytes, read one at a time
        }
        throw unclosedString(open)
    }

    static let highBits: UInt64 = 0x8080_8080_8080_8080

    /// The high bit of each byte of `word` that is a quote, a backslash or below 0x20. Exact up to the first such
    /// byte (the borrows can only mark bytes above one that really matches), which is all the caller uses.
    @inline(__always) static func specialBytes(_ word: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let quote = word ^ (ones &* 0x22)
        let backslash = word ^ (ones &* 0x5C)
        let zeroQuote = (quote &- ones) & ~quote
        let zeroBackslash = (backslash &- ones) & ~backslash
        let control = (word &- ones &* 0x20) & ~word
        return (zeroQuote | zeroBackslash | control) & highBits
    }

    /// The rest of a string from its first backslash (at `index`); `first` is where its text starts, and
    /// `pastASCII` says whether any byte before the backslash was.
    mutating func readEscapedString(first: Int, isKey: Bool, pastASCII: Bool) throws(JSONParseError) -> String {
        unescaped.removeAll(keepingCapacity: true)
        var run = first  // start of the bytes not yet copied
        var seen: UInt8 = pastASCII ? 0x80 : 0  // as in `readString`
        while index < count {
            let b = byte(index)
            if b == 0x22 {
                copy(from: run, to: index)
                // Escapes write whole characters, so the text is valid UTF-8 when the bytes between them are.
                if seen & 0x80 != 0 { try validateUTF8(first, index) }
                index += 1
                return String(decoding: unescaped, as: UTF8.self)
            }
            if b == 0x5C {
                copy(from: run, to: index)
                try readEscape(isKey: isKey)
                run = index
                continue
            }
            if b < 0x20 { throw controlCharacter(b) }
            seen |= b
            index += 1
        }
        throw unclosedString(first - 1)
    }

    mutating func copy(from: Int, to end: Int) {
        if end > from { unescaped.append(contentsOf: UnsafeRawBufferPointer(start: start + from, count: end - from)) }
    }

    /// One escape at `index` (its backslash), appended to `unescaped` as UTF-8.
    mutating func readEscape(isKey: Bool) throws(JSONParseError) {
        let backslash = index
        index += 1
        guard index < count else { throw unexpected("expected an escape after '\\'") }
        let b = byte(index)
        index += 1
        switch b {
        case 0x22, 0x5C, 0x2F: unescaped.append(b)
        case 0x62: unescaped.append(0x08)
        case 0x66: unescaped.append(0x0C)
        case 0x6E: unescaped.append(0x0A)
        case 0x72: unescaped.append(0x0D)
        case 0x74: unescaped.append(0x09)
        case 0x75:
            var scalar = try readHex4()
            if scalar >= 0xD800 && scalar <= 0xDBFF {
                // A high surrogate counts only with a low one escaped right after it.
                guard index + 1 < count, byte(index) == 0x5C, byte(index + 1) == 0x75 else {
                    throw surrogate("high surrogate \\u\(hex(scalar)) is not followed by a low one", at: backslash)
                }
                index += 2
                let low = try readHex4()
                guard low >= 0xDC00 && low <= 0xDFFF else {
                    throw surrogate("high surrogate \\u\(hex(scalar)) is followed by \\u\(hex(low)), not a low one",
                                    at: backslash)
                }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if scalar >= 0xDC00 && scalar <= 0xDFFF {
                throw surrogate("low surrogate \\u\(hex(scalar)) without a high one before it", at: backslash)
            }
            if scalar == 0 && isKey {
                // jansson keeps keys as C strings and refuses NUL in them even with JSON_ALLOW_NUL.
                throw JSONParseError(
                    message: "\\u0000 at offset \(backslash) in a member name: NUL is not allowed in names",
                    offset: backslash)
            }
            appendUTF8(scalar)
        default:
            throw JSONParseError(message: "invalid escape \\\(printable(b)) at offset \(backslash)", offset: backslash)
        }
    }

    mutating func readHex4() throws(JSONParseError) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard index < count else { throw unexpected("expected 4 hex digits after \\u") }
            let b = byte(index)
            let digit: UInt32
            switch b {
            case 0x30...0x39: digit = UInt32(b - 0x30)
            case 0x41...0x46: digit = UInt32(b - 0x41 + 10)
            case 0x61...0x66: digit = UInt32(b - 0x61 + 10)
            default: throw unexpected("expected 4 hex digits after \\u")
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    mutating func appendUTF8(_ scalar: UInt32) {
        switch scalar {
        case 0..<0x80:
            unescaped.append(UInt8(scalar))
        case 0x80..<0x800:
            unescaped.append(UInt8(0xC0 | scalar >> 6))
            unescaped.append(UInt8(0x80 | scalar & 0x3F))
        case 0x800..<0x10000:
            unescaped.append(UInt8(0xE0 | scalar >> 12))
            unescaped.append(UInt8(0x80 | scalar >> 6 & 0x3F))
            unescaped.append(UInt8(0x80 | scalar & 0x3F))
        default:
            unescaped.append(UInt8(0xF0 | scalar >> 18))
            unescaped.append(UInt8(0x80 | scalar >> 12 & 0x3F))
            unescaped.append(UInt8(0x80 | scalar >> 6 & 0x3F))
            unescaped.append(UInt8(0x80 | scalar & 0x3F))
        }
    }

    // MARK: - Numbers

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`. Integers must fit Int64 and reals must be finite,
    /// as jansson requires ("too big integer", "real number overflow").
    mutating func readNumber() throws(JSONParseError) -> JSONValue {
        let first = index
        let negative = byte(index) == 0x2D
        if negative { index += 1 }
        var digits = Digits()
        try readIntegerPart(into: &digits, first: first)
        let integerDigits = digits.significant

        var isInteger = true
        if index < count, byte(index) == 0x2E {
            isInteger = false
            try readFraction(into: &digits)
        }
        var exponent = 0
        if index < count, byte(index) | 0x20 == 0x65 {
            isInteger = false
            exponent = try readExponent()
        }

        if isInteger {
            let limit: UInt64 = negative ? 1 << 63 : UInt64(Int64.max)
            guard integerDigits <= 19, digits.mantissa <= limit else {
                throw JSONParseError(message: "integer at offset \(first) does not fit in 64 bits", offset: first)
            }
            return .int(negative ? Int64(bitPattern: 0 &- digits.mantissa) : Int64(digits.mantissa))
        }
        return try real(digits, exponent: exponent, negative: negative, first: first)
    }

    /// A number's significant digits as they are read: up to 19 of them, enough for any Int64 and for the
    /// exact-double shortcut in `real`. A value on the stack, so reading a number allocates nothing.
    struct Digits {
        var mantissa: UInt64 = 0
        /// Significant digits seen (leading zeros of a fraction don't count), including any past the 19 kept.
        var significant = 0
        /// How many of the kept digits come after the point.
        var fractionDigits = 0
    }

    /// `0 | [1-9][0-9]*` at `index`; `first` is where the number (its sign) began, for the leading-zero error.
    @inline(__always) mutating func readIntegerPart(into digits: inout Digits, first: Int) throws(JSONParseError) {
        guard index < count else { throw unexpected("expected a digit") }
        let lead = byte(index)
        if lead == 0x30 {
            index += 1
            if index < count, byte(index) >= 0x30 && byte(index) <= 0x39 {
                throw JSONParseError(message: "number at offset \(first) has a leading zero", offset: first)
            }
        } else if lead >= 0x31 && lead <= 0x39 {
            while index < count {
                let digit = byte(index) &- 0x30
                guard digit <= 9 else { break }
                digits.significant += 1
                if digits.significant <= 19 { digits.mantissa = digits.mantissa &* 10 &+ UInt64(digit) }
                index += 1
            }
        } else {
            throw unexpected("expected a digit")
        }
    }

    /// `. [0-9]+` at `index` (the point).
    @inline(__always) mutating func readFraction(into digits: inout Digits) throws(JSONParseError) {
        index += 1
        guard index < count, byte(index) &- 0x30 <= 9 else { throw unexpected("expected a digit after '.'") }
        while index < count {
            let digit = byte(index) &- 0x30
            guard digit <= 9 else { break }
            if digit != 0 || digits.significant > 0 { digits.significant += 1 }
            if digits.significant <= 19 {
                digits.mantissa = digits.mantissa &* 10 &+ UInt64(digit)
                digits.fractionDigits += 1
            }
            index += 1
        }
    }

    /// `[eE] [+-]? [0-9]+` at `index` (the e): the exponent, held at ±100,000 (past any double's range either way).
    @inline(__always) mutating func readExponent() throws(JSONParseError) -> Int {
        index += 1
        var negative = false
        if index < count, byte(index) == 0x2B || byte(index) == 0x2D {
            negative = byte(index) == 0x2D
            index += 1
        }
        guard index < count, byte(index) &- 0x30 <= 9 else { throw unexpected("expected a digit in the exponent") }
        var exponent = 0
        while index < count {
            let digit = byte(index) &- 0x30
            guard digit <= 9 else { break }
            if exponent < 100_000 { exponent = exponent * 10 + Int(digit) }
            index += 1
        }
        return negative ? -exponent : exponent
    }

    /// The double for a number read from `first` up to `index`, which must be finite.
    @inline(__always) func real(_ digits: Digits, exponent: Int, negative: Bool, first: Int) throws(JSONParseError)
        -> JSONValue
    {
        // Exact shortcut (Clinger): a mantissa below 2^53 and a power of ten up to 10^22 are both exact doubles,
        // so one multiply or divide rounds correctly. Anything else goes to the standard library's conversion.
        let power = exponent - digits.fractionDigits
        if digits.significant <= 19, digits.mantissa <= 1 << 53, power >= -22 && power <= 22 {
            var value = Double(digits.mantissa)
            value = power < 0 ? value / Reader.powersOfTen[-power] : value * Reader.powersOfTen[power]
            return .double(negative ? -value : value)
        }
        let text = String(decoding: UnsafeRawBufferPointer(start: start + first, count: index - first), as: UTF8.self)
        guard let value = Double(text), value.isFinite else {
            throw JSONParseError(message: "number at offset \(first) is too big for a double", offset: first)
        }
        return .double(value)
    }

    static let powersOfTen: [Double] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
        1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
    ]

    // MARK: - Errors

    func unexpected(_ expectation: String) -> JSONParseError {
        guard index < count else {
            return JSONParseError(message: "unexpected end of input at offset \(index): \(expectation)", offset: index)
        }
        return JSONParseError(message: "unexpected byte 0x\(hex(byte(index), width: 2)) at offset \(index): \(expectation)",
                             offset: index)
    }

    func unclosedString(_ open: Int) -> JSONParseError {
        JSONParseError(message: "unexpected end of input at offset \(count): the string at offset \(open) is not closed",
                      offset: count)
    }

    func controlCharacter(_ b: UInt8) -> JSONParseError {
        JSONParseError(message: "control character 0x\(hex(b, width: 2)) at offset \(index) in a string: it must be escaped",
                      offset: index)
    }

    func surrogate(_ what: String, at offset: Int) -> JSONParseError {
        JSONParseError(message: "\(what) at offset \(offset)", offset: offset)
    }

    /// Throws at the first byte in `first..<end` that breaks UTF-8 (an overlong form, a surrogate, past U+10FFFF,
    /// a sequence cut short), as jansson refuses them.
    func validateUTF8(_ first: Int, _ end: Int) throws(JSONParseError) {
        var at = first
        while at < end {
            let lead = byte(at)
            if lead < 0x80 {
                at += 1
                continue
            }
            let length: Int
            var low: UInt8 = 0x80, high: UInt8 = 0xBF  // bounds for the second byte
            switch lead {
            case 0xC2...0xDF: length = 2
            case 0xE0: length = 3; low = 0xA0
            case 0xED: length = 3; high = 0x9F
            case 0xE1...0xEF: length = 3
            case 0xF0: length = 4; low = 0x90
            case 0xF4: length = 4; high = 0x8F
            case 0xF1...0xF3: length = 4
            default: throw utf8Error(at)
            }
            guard at + length <= end else { throw utf8Error(at) }
            let second = byte(at + 1)
            guard second >= low && second <= high else { throw utf8Error(at) }
            if length > 2 && byte(at + 2) & 0xC0 != 0x80 { throw utf8Error(at) }
            if length > 3 && byte(at + 3) & 0xC0 != 0x80 { throw utf8Error(at) }
            at += length
        }
    }

    func utf8Error(_ at: Int) -> JSONParseError {
        JSONParseError(message: "invalid UTF-8 at offset \(at) (byte 0x\(hex(byte(at), width: 2))) in a string", offset: at)
    }

    func hex(_ value: some BinaryInteger, width: Int = 4) -> String {
        let digits = String(value, radix: 16, uppercase: false)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }

    func printable(_ b: UInt8) -> String {
        b >= 0x20 && b < 0x7F ? String(UnicodeScalar(b)) : "(byte 0x\(hex(b, width: 2)))"
    }
}

/// A stack whose elements leave by move (no reference-count traffic when a container closes); what is left on it
/// when a parse fails is released with it.
private struct MoveStack<Element>: ~Copyable {
    private var elements: UnsafeMutablePointer<Element>
    private var capacity: Int
    private(set) var count = 0

    init(capacity: Int) {
        elements = .allocate(capacity: capacity)
        self.capacity = capacity
    }

    deinit {
        elements.deinitialize(count: count)
        elements.deallocate()
    }

    mutating func push(_ element: consuming Element) {
        if count == capacity {
            let larger = UnsafeMutablePointer<Element>.allocate(capacity: capacity * 2)
            larger.moveInitialize(from: elements, count: count)
            elements.deallocate()
            elements = larger
            capacity *= 2
        }
        (elements + count).initialize(to: element)
        count += 1
    }

    /// The elements from `mark` up, in order, as an array; the stack is left `mark` high.
    mutating func pop(from mark: Int) -> [Element] {
        let moved = count - mark
        let source = elements + mark
        count = mark
        return Array(unsafeUninitializedCapacity: moved) { buffer, initialized in
            buffer.baseAddress!.moveInitialize(from: source, count: moved)
            initialized = moved
        }
    }

    /// Hands the elements from `mark` up to `body` in order; the stack is left `mark` high.
    mutating func pop(from mark: Int, _ body: (consuming Element) -> Void) {
        for slot in mark..<count { body((elements + slot).move()) }
        count = mark
    }
}
