import Testing
@testable import RelayCore

@Suite struct JSONTests {
    @Test func roundTripsThroughJansson() throws {
        let text = #"{"a":[1,2.5,"x\n\"y",true,null],"b":{"c":"é😀"}}"#
        let value = try JSONParser.parse(text)
        #expect(value["a"]?.array?.count == 5)
        #expect(value["b"]?["c"]?.string == "é😀")
        #expect(try JSONParser.parse(value.encoded()) == value)
    }

    @Test func refusesBadInput() {
        #expect(throws: JSONParseError.self) { try JSONParser.parse("{\"a\":") }
        #expect(throws: JSONParseError.self) { try JSONParser.parse([0x22, 0xff, 0xfe, 0x22]) }
        let deep = String(repeating: "[", count: 500) + String(repeating: "]", count: 500)
        #expect(throws: JSONParseError.self) { try JSONParser.parse(deep) }
    }

    @Test func encodesControlCharactersAndSortsKeys() {
        let value: JSONValue = ["b": "\u{1}", "a": 1]
        #expect(value.encoded() == #"{"a":1,"b":"\u0001"}"#)
    }
}

@Suite struct Base64Tests {
    @Test func rfc4648Vectors() {
        let vectors = ["": "", "f": "Zg==", "fo": "Zm8=", "foo": "Zm9v", "foob": "Zm9vYg==", "fooba": "Zm9vYmE=",
                       "foobar": "Zm9vYmFy", "admin:pass": "YWRtaW46cGFzcw=="]
        for (plain, encoded) in vectors { #expect(Base64.encode(Array(plain.utf8)) == encoded) }
    }
}
