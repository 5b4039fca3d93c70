// JSON reading, differential: JSONParser (pure Swift, the hot path) against jansson (`Jansson`, the reader it
// replaces) on any bytes. Both must accept the same texts with the same value, or both refuse; and what JSONParser
// reads must encode to JSON that reads back the same.
//
// One documented exception, where jansson is the odd one: its lexer drops a NUL byte that directly follows a
// number or a literal (it "ungets" the byte that ended the token, and a NUL in its one-byte buffer reads as "empty",
// so the next read skips it), so jansson accepts `1\0` and `[true\0]`. JSONParser refuses every NUL outside a
// string. jansson is compared on the input as it reads it (those NULs as spaces), and JSONParser must refuse the
// original whenever there was such a NUL.

func fuzzJSON(_ data: [UInt8]) {
    let ours = Result { () throws(JSONParseError) -> JSONValue in try JSONParser.parse(data) }
    let jansson = Result { () throws(JanssonError) -> JSONValue in try Jansson.parse(data) }
    let asJanssonReads = nulsAsJanssonReadsThem(data)
    let comparable = asJanssonReads == data
        ? ours : Result { () throws(JSONParseError) -> JSONValue in try JSONParser.parse(asJanssonReads) }

    if asJanssonReads != data, case .success = ours {
        fatalError("JSONParser accepted a NUL byte outside a string: \(data)")
    }
    if case .failure(let error) = ours {
        fuzzCheck(error.offset >= 0 && error.offset <= data.count, "error offset \(error.offset) outside the input")
    }
    switch (comparable, jansson) {
    case (.failure, .failure):
        return
    case (.success(let value), .failure(let error)):
        fatalError("JSONParser accepted what jansson refuses (\(error)): \(value) from \(data)")
    case (.failure(let error), .success(let value)):
        fatalError("JSONParser refused what jansson accepts (\(value)): \(error) for \(data)")
    case (.success(let value), .success(let expected)):
        fuzzCheck(identical(value, expected), "values differ: \(value) vs jansson \(expected) for \(data)")
        // The raw-buffer entry point reads the same.
        let viaBuffer = asJanssonReads.withUnsafeBytes { raw in try? JSONParser.parse(raw) }
        fuzzCheck(viaBuffer.map { identical($0, value) } == true, "the raw-buffer parse differs for \(data)")
        // Round trip: JSONValue's encoding reads back to the same text (1.0 is written as 1 and reads back as an
        // integer, so the value may change form once; the text may not).
        let text = value.encoded()
        guard let again = try? JSONParser.parse(Array(text.utf8)) else {
            fatalError("JSONParser refuses JSONValue's own encoding: \(text)")
        }
        fuzzCheck(again.encoded() == text, "JSON round trip is not stable: \(text) vs \(again.encoded())")
    }
}

/// `==` and more: a double must match to the bit, so -0.0 and 0.0 differ.
func identical(_ a: JSONValue, _ b: JSONValue) -> Bool {
    switch (a, b) {
    case (.double(let x), .double(let y)): return x.bitPattern == y.bitPattern
    case (.array(let xs), .array(let ys)): return xs.count == ys.count && zip(xs, ys).allSatisfy { identical($0, $1) }
    case (.object(let xs), .object(let ys)):
        return xs.count == ys.count && xs.allSatisfy { key, x in ys[key].map { identical(x, $0) } ?? false }
    default: return a == b
    }
}

/// The input with each NUL that jansson drops (outside a string, right after a digit or a letter, so at the end
/// of a number or literal token) as a space, which reads the same way: the token ends there and the next one
/// starts after it.
func nulsAsJanssonReadsThem(_ data: [UInt8]) -> [UInt8] {
    var out = data
    var inString = false
    var index = 0
    while index < data.count {
        let byte = data[index]
        if inString {
            if byte == 0x5C {
                index += 1  // the escaped byte can't end the string
            } else if byte == 0x22 {
                inString = false
            }
        } else if byte == 0x22 {
            inString = true
        } else if byte == 0, index > 0 {
            let before = data[index - 1]
            if (before >= 0x30 && before <= 0x39) || (before | 0x20 >= 0x61 && before | 0x20 <= 0x7A) { out[index] = 0x20 }
        }
        index += 1
    }
    return out
}
