import Glibc
import Testing
@testable import Relay
@testable import RelayCore

/// JSONParser against the rules it shares with the relay's jansson reading (`Jansson`), which stays the oracle:
/// where a case is about agreement, both are asked.
@Suite struct JSONParserTests {
    // MARK: - Helpers

    private func read(_ text: String) throws(JSONParseError) -> JSONValue { try JSONParser.parse(Array(text.utf8)) }

    private func refusal(_ bytes: [UInt8]) -> JSONParseError? {
        do {
            _ = try JSONParser.parse(bytes)
            return nil
        } catch {
            return error
        }
    }

    private func refusal(_ text: String) -> JSONParseError? { refusal(Array(text.utf8)) }

    /// Both parsers accept with the same value, or both refuse.
    private func expectAgreement(_ bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) {
        let ours = try? JSONParser.parse(bytes)
        let jansson = try? Jansson.parse(bytes)
        #expect(ours == jansson, "\(bytes) reads as \(String(describing: ours)), jansson \(String(describing: jansson))",
                sourceLocation: sourceLocation)
    }

    private func expectAgreement(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) {
        expectAgreement(Array(text.utf8), sourceLocation: sourceLocation)
    }

    private static func fixtureNames() -> [String] {
        guard let dir = opendir(ContextFixtures.fixturesRoot + "prefect") else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name.hasSuffix(".json") { names.append(name) }
        }
        return names.sorted()
    }

    // MARK: - Fixtures

    @Test func readsEveryPrefectFixtureAsJanssonDoes() throws {
        let names = Self.fixtureNames()
        #expect(names.count >= 20, "found \(names.count) fixtures")
        for name in names {
            let bytes = ContextFixtures.bytes("prefect/" + name)
            #expect(!bytes.isEmpty, "\(name) is empty")
            let expected = try Jansson.parse(bytes)
            let value = try JSONParser.parse(bytes)
            #expect(value == expected, "\(name)")
            let viaBuffer = try bytes.withUnsafeBytes { raw throws(JSONParseError) in try JSONParser.parse(raw) }
            #expect(viaBuffer == expected, "\(name) via a raw buffer")
        }
    }

    // MARK: - Top level and whitespace

    @Test func readsAnyValueAtTheTop() throws {
        #expect(try read("1") == .int(1))
        #expect(try read("\"x\"") == .string("x"))
        #expect(try read("true") == .bool(true))
        #expect(try read("false") == .bool(false))
        #expect(try read("null") == .null)
        #expect(try read("[]") == .array([]))
        #expect(try read("{}") == .object([:]))
        #expect(try read(" \t\r\n [ 1 ,\n\t2 ] \r\n") == [1, 2])
        #expect(try read(#"{ "a" : { "b" : [ true , null ] } }"#) == ["a": ["b": [true, nil]]])
    }

    @Test func refusesEmptyInputAndTrailingBytes() {
        #expect(refusal("")?.message == "unexpected end of input at offset 0: expected a value")
        #expect(refusal(" \n\t")?.offset == 3)
        for text in ["1 x", "{} {}", "[1]]", "1 2", "\"a\"\"b\"", "null,", "[1]\u{0}", "1\u{0C}"] {
            #expect(refusal(text) != nil, "\(text)")
            expectAgreement(text)
        }
        #expect(refusal("[1] x")?.message == "unexpected byte 0x78 at offset 4: expected the end of input after the value")
        // Only the four JSON whitespace bytes: no form feed, vertical tab or no-break space.
        for text in ["\u{0C}1", "\u{0B}1", "\u{A0}1", "\u{FEFF}1"] { expectAgreement(text) }
    }

    /// jansson's lexer drops one NUL byte right after a number or a literal (it "ungets" the byte that ended the
    /// token, and a NUL left in its one-byte buffer reads as "empty", so the next read skips it): it accepts `1\0`
    /// and `[true\0]`. That is not JSON, and the relay has no use for it: JSONParser refuses every NUL outside a
    /// string. (The fuzz harness reads such a NUL as a space when it asks jansson.)
    @Test func refusesNULBytesOutsideStringsWhereJanssonDropsThem() throws {
        for text in ["1\u{0}", "true\u{0}", "[1\u{0}]", "{\"a\":null\u{0}}", "[1e5\u{0},false\u{0}]"] {
            #expect(try Jansson.parse(text) == Jansson.parse(text.replacingNUL()), "\(text)")
            #expect(refusal(text)?.message.hasPrefix("unexpected byte 0x00") == true, "\(text)")
        }
        // Where jansson reads the NUL itself (not after a number or literal), both refuse.
        for text in ["\u{0}1", "[\u{0}1]", "\"a\"\u{0}", "[1]\u{0}", "1\u{0}\u{0}", "nul\u{0}l", "1\u{0}5"] {
            expectAgreement(text)
        }
    }

    @Test func refusesBadStructure() {
        let cases = ["[1,]", "[,1]", "[1 2]", "[", "]", "{", "}", "{\"a\":1,}", "{\"a\" 1}", "{\"a\":}", "{1:2}",
                     "{\"a\":1 \"b\":2}", "{,}", "[1,,2]", "{\"a\"}", "tru", "nul", "truex", "True", "NULL", "[true1]",
                     "{\"a\":1]", "[1}", "'a'", "NaN", "Infinity", "-Infinity"]
        for text in cases {
            #expect(refusal(text) != nil, "\(text)")
            expectAgreement(text)
        }
        let missing = refusal("{\"a\":}")
        #expect(missing?.message == "unexpected byte 0x7d at offset 5: expected a value")
        #expect(missing?.offset == 5)
        #expect(refusal("[1,]")?.message == "unexpected byte 0x5d at offset 3: expected a value")
        #expect(refusal("{\"a\":1,}")?.message == "unexpected byte 0x7d at offset 7: expected a member name")
        #expect(refusal("[1")?.message == "unexpected end of input at offset 2: expected ',' or ']' after an array item")
    }

    // MARK: - Strings

    @Test func readsEveryEscape() throws {
        #expect(try read(#""\"\\\/\b\f\n\r\t""#) == .string("\"\\/\u{8}\u{C}\n\r\t"))
        #expect(try read(#""a\u00e9b\u20AC\u0041""#) == .string("aéb€A"))
        #expect(try read(#""\ud83d\ude00 \uD83D\uDE00""#) == .string("😀 😀"))
        #expect(try read(#""\udbff\udfff""#) == .string("\u{10FFFF}"))
        #expect(try read(#""plain é € 😀""#) == .string("plain é € 😀"))
        #expect(try read(#"{"k\n\u00e9":"v"}"#) == ["k\né": "v"])
        for text in [#""\x""#, #""\U0041""#, #""\u004""#, #""\u00zz""#, #""\"#, #""\u"#, #""\'""#, #""\ ""#] {
            #expect(refusal(text) != nil, "\(text)")
            expectAgreement(text)
        }
        #expect(refusal(#""ab\q""#)?.message == "invalid escape \\q at offset 3")
    }

    @Test func refusesLoneSurrogates() {
        let cases = [#""\ud800""#, #""\udc00""#, #""\ud800\u0041""#, #""\ud800\ud800""#, #""\ud800x""#,
                     #""\ud800\n""#, #""\udfff\ud800""#, #""x\ud83d""#]
        for text in cases {
            #expect(refusal(text) != nil, "\(text)")
            expectAgreement(text)
        }
        #expect(refusal(#""\udc00""#)?.message == "low surrogate \\udc00 without a high one before it at offset 1")
        #expect(refusal(#""ab\ud800\u0041""#)?.message
            == "high surrogate \\ud800 is followed by \\u0041, not a low one at offset 3")
    }

    @Test func allowsNULInValuesButNotInNames() throws {
        #expect(try read(#""a\u0000b""#) == .string("a\u{0}b"))
        #expect(try read(#""a\u0000b""#).string?.utf8.count == 3)
        #expect(try read(#"["\u0000"]"#) == ["\u{0}"])
        expectAgreement(#""a\u0000b""#)
        // jansson refuses NUL in object keys even with JSON_ALLOW_NUL; so do we.
        expectAgreement(#"{"a\u0000b":1}"#)
        #expect(refusal(#"{"a\u0000b":1}"#)?.message == "\\u0000 at offset 3 in a member name: NUL is not allowed in names")
    }

    @Test func refusesRawControlCharacters() throws {
        for byte: UInt8 in [0x00, 0x01, 0x09, 0x0A, 0x0D, 0x1F] {
            let bytes: [UInt8] = [0x22, 0x61, byte, 0x62, 0x22]
            let hex = (byte < 16 ? "0" : "") + String(byte, radix: 16)
            #expect(refusal(bytes)?.message == "control character 0x\(hex) at offset 2 in a string: it must be escaped")
            expectAgreement(bytes)
        }
        expectAgreement([0x22, 0x7F, 0x22])  // DEL is not a control character in JSON
        #expect(try JSONParser.parse([0x22, 0x7F, 0x22]) == .string("\u{7F}"))
    }

    /// The eight-byte scan must find a quote, backslash, control character or non-ASCII byte at any position.
    @Test func findsSpecialBytesAtEveryPosition() throws {
        for position in 0..<20 {
            let before = String(repeating: "a", count: position)
            let after = String(repeating: "b", count: 19 - position)
            #expect(try read("\"\(before)\\n\(after)\"") == .string(before + "\n" + after))
            #expect(try read("\"\(before)é\(after)\"") == .string(before + "é" + after))
            #expect(try read("\"\(before)\"") == .string(before))
            #expect(try read("[\"\(before)\",\"\(after)\"]") == .array([.string(before), .string(after)]))
            #expect(refusal("\"\(before)\u{1}\(after)\"")?.offset == position + 1)
            #expect(refusal("\"\(before)")?.message.hasPrefix("unexpected end of input at offset \(position + 1)") == true)
            var invalid = Array("\"\(before)x\(after)\"".utf8)
            invalid[position + 1] = 0xFF
            #expect(refusal(invalid)?.offset == position + 1)
        }
    }

    @Test func refusesInvalidUTF8AsJanssonDoes() throws {
        let valid: [[UInt8]] = [[0xC3, 0xA9], [0xE2, 0x82, 0xAC], [0xF0, 0x9F, 0x98, 0x80], [0xF4, 0x8F, 0xBF, 0xBF],
                                [0xEF, 0xBF, 0xBF], [0xED, 0x9F, 0xBF], [0xEE, 0x80, 0x80], [0xC2, 0x80]]
        for sequence in valid {
            let bytes = [0x22] + sequence + [0x22]
            #expect(try JSONParser.parse(bytes) == .string(String(decoding: sequence, as: UTF8.self)))
            expectAgreement(bytes)
        }
        let invalid: [[UInt8]] = [
            [0xC0, 0x80], [0xC1, 0xBF], [0xE0, 0x80, 0x80], [0xE0, 0x9F, 0xBF], [0xF0, 0x80, 0x80, 0x80],  // overlong
            [0xF0, 0x8F, 0xBF, 0xBF],
            [0xED, 0xA0, 0x80], [0xED, 0xBF, 0xBF],  // surrogates written as UTF-8
            [0xF4, 0x90, 0x80, 0x80], [0xF5, 0x80, 0x80, 0x80], [0xFF], [0xFE],  // past U+10FFFF, never UTF-8
            [0x80], [0xBF], [0xC3], [0xE2, 0x82], [0xF0, 0x9F, 0x98], [0xC3, 0x41], [0xE2, 0x41, 0x82],  // cut short
        ]
        for sequence in invalid {
            let bytes = [0x22, 0x61] + sequence + [0x22]
            #expect(refusal(bytes)?.offset == 2, "\(sequence)")
            expectAgreement(bytes)
            // Also with an escape in the string (the other way a string is built) and cut off at the end.
            expectAgreement([0x22, 0x5C, 0x6E] + sequence + [0x22])
            #expect(refusal([0x22, 0x5C, 0x6E] + sequence + [0x22])?.offset == 3, "\(sequence) after an escape")
            expectAgreement([0x22] + sequence)
        }
        #expect(refusal([0x22, 0x61, 0xC0, 0x80, 0x22])?.message == "invalid UTF-8 at offset 2 (byte 0xc0) in a string")
        // Outside strings any byte past ASCII is just unexpected.
        expectAgreement([0x5B, 0xC3, 0xA9, 0x5D])
        #expect(refusal([0x5B, 0xC3, 0xA9, 0x5D])?.message == "unexpected byte 0xc3 at offset 1: expected a value")
    }

    // MARK: - Numbers

    @Test func readsIntegersInInt64() throws {
        #expect(try read("0") == .int(0))
        #expect(try read("-0") == .int(0))
        #expect(try read("42") == .int(42))
        #expect(try read("-17") == .int(-17))
        #expect(try read("9223372036854775807") == .int(Int64.max))
        #expect(try read("-9223372036854775808") == .int(Int64.min))
        #expect(try read("[1,-1,0]") == [1, -1, 0])
        for text in ["0", "-0", "9223372036854775807", "-9223372036854775808", "1234567890123456789"] {
            expectAgreement(text)
        }
    }

    @Test func refusesIntegersPastInt64AsJanssonDoes() {
        for text in ["9223372036854775808", "-9223372036854775809", "10000000000000000000", "18446744073709551616",
                     "99999999999999999999", "-99999999999999999999", String(repeating: "9", count: 400)] {
            #expect(refusal(text) != nil, "\(text)")
            expectAgreement(text)
        }
        #expect(refusal("[9223372036854775808]")?.message == "integer at offset 1 does not fit in 64 bits")
    }

    @Test func readsRealsCorrectlyRounded() throws {
        #expect(try read("1.5") == .double(1.5))
        #expect(try read("-0.0") == .double(-0.0))
        #expect(try read("-0.0").double?.sign == .minus)
        #expect(try read("-0e0").double?.sign == .minus)
        #expect(try read("0.1") == .double(0.1))
        #expect(try read("1E+2") == .double(100))
        #expect(try read("1e-2") == .double(0.01))
        #expect(try read("1.0") == .double(1))
        #expect(try read("1e22") == .double(1e22))
        #expect(try read("1e23") == .double(1e23))
        #expect(try read("1e-400") == .double(0))
        #expect(try read("2.2250738585072011e-308") == .double(Double.leastNormalMagnitude.nextDown))
        #expect(try read("4.9406564584124654e-324") == .double(Double.leastNonzeroMagnitude))
        #expect(try read("1.7976931348623157e308") == .double(Double.greatestFiniteMagnitude))
        #expect(try read("3.141592653589793238462643383279") == .double(3.141592653589793))
        #expect(try read("9007199254740993.0") == .double(9007199254740992))  // 2^53 + 1 rounds to even
        #expect(try read("0.30000000000000004") == .double(0.1 + 0.2))
        let reals = ["1.5", "-0.0", "0.1", "1E+2", "1e-2", "123.456e-7", "1e22", "1e23", "1e-400", "0e999",
                     "2.2250738585072011e-308", "4.9406564584124654e-324", "1.7976931348623157e308",
                     "3.141592653589793238462643383279", "9007199254740993.0", "0.000000000000000000000000000001",
                     "123456789012345678901234567890", "1234567890.1234567890e10", "7.2057594037927933e16",
                     "89255.0e-22", "1.00000000000000011102230246251565404236316680908203125"]
        for text in reals { expectAgreement(text) }
    }

    @Test func refusesRealsThatOverflow() {
        for text in ["1e400", "-1e400", "1e309", "1.8e308", "1e99999999999999999999"] {
            #expect(refusal(text) != nil, "\(text)")
            expectAgreement(text)
        }
        #expect(refusal("1e400")?.message == "number at offset 0 is too big for a double")
    }

    @Test func refusesNumbersOutsideTheGrammar() {
        let cases = ["01", "-01", "00", "+1", ".5", "1.", "1.e5", "1e", "1e+", "1E-", "-", "--1", "- 1", "0x10",
                     "1.5.5", "1e5e5", "1_000", "١"]
        for text in cases {
            #expect(refusal(text) != nil, "\(text)")
            expectAgreement(text)
        }
        #expect(refusal("[01]")?.message == "number at offset 1 has a leading zero")
        #expect(refusal("1.x")?.message == "unexpected byte 0x78 at offset 2: expected a digit after '.'")
        #expect(refusal("-")?.message == "unexpected end of input at offset 1: expected a digit")
    }

    // MARK: - Objects and depth

    @Test func keepsTheLastOfRepeatedNames() throws {
        #expect(try read(#"{"a":1,"b":2,"a":3}"#) == ["a": 3, "b": 2])
        #expect(try read(#"{"a":{"x":1},"a":[2]}"#) == ["a": [2]])
        expectAgreement(#"{"a":1,"b":2,"a":3}"#)
        expectAgreement(#"{"a":1,"\u0061":2}"#)
    }

    @Test func readsLargeContainers() throws {
        let items = (0..<1000).map(String.init).joined(separator: ",")
        #expect(try read("[\(items)]").array?.count == 1000)
        let members = (0..<1000).map { "\"k\($0)\":\($0)" }.joined(separator: ",")
        let object = try read("{\(members)}")
        #expect(object.object?.count == 1000)
        #expect(object["k999"] == .int(999))
        expectAgreement("[\(items)]")
        expectAgreement("{\(members)}")
    }

    /// A value 64 levels down is refused, as `Jansson.convert` refuses it (the root is level 0).
    @Test func refusesNestingAtTheSameDepthAsJSONParser() throws {
        func arrays(_ n: Int, _ inner: String = "") -> String {
            String(repeating: "[", count: n) + inner + String(repeating: "]", count: n)
        }
        func objects(_ n: Int, _ inner: String = "1") -> String {
            String(repeating: "{\"a\":", count: n) + inner + String(repeating: "}", count: n)
        }
        #expect(throws: Never.self) { try read(arrays(64)) }
        #expect(refusal(arrays(65))?.message == "value at offset 64 is nested deeper than 64 levels")
        #expect(refusal(arrays(64, "1")) != nil)
        #expect(throws: Never.self) { try read(arrays(63, "1")) }
        #expect(throws: Never.self) { try read(objects(63)) }
        #expect(refusal(objects(64)) != nil)
        #expect(throws: Never.self) { try read(objects(63, "{}")) }
        #expect(refusal(objects(64, "{}")) != nil)
        for n in 60...67 {
            expectAgreement(arrays(n))
            expectAgreement(arrays(n, "1"))
            expectAgreement(arrays(n, "{}"))
            expectAgreement(objects(n))
            expectAgreement(objects(n, "[]"))
            expectAgreement(objects(n, "[\"x\"]"))
        }
        // Hostile nesting is refused at the bound, without walking (or recursing) further.
        #expect(refusal(arrays(100_000))?.offset == 64)
        #expect(refusal(String(repeating: "{\"a\":[", count: 50_000))?.offset == 6 * 32)
    }

    // MARK: - Round trip

    @Test func readsWhatJSONValueEncodes() throws {
        let value: JSONValue = ["s": "a\"b\\c\n\u{1}\u{0}é😀\u{2028}", "n": [1, -2, 2.5, 1e300, -0.001, nil, true],
                                "o": ["": [:], "x": []]]
        #expect(try read(value.encoded()) == value)
    }
}

private extension String {
    /// NUL bytes as spaces, which is how jansson reads one right after a number or literal.
    func replacingNUL() -> String { String(decoding: utf8.map { $0 == 0 ? 0x20 : $0 }, as: UTF8.self) }
}
