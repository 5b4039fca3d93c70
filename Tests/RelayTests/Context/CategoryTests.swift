import Testing
@testable import Relay
@testable import RelayCore

@Suite struct ContextCategoryTests {
    static let keyset = ContextCase.keyset

    static func schema(_ text: String) -> [InputRow] { [InputRow(key: "paused-1-schema", value: text)] }

    static let cases: [(String, InputKeyset?, [InputRow], PauseInput.Category)] = [
        ("wait_for_input=str", keyset, schema(ContextCase.strSchema), .reply),
        ("one str field", keyset, schema(ContextCase.commentSchema), .reply),
        ("one str field, minimal schema", keyset, schema(#"{"properties":{"note":{"type":"string"}}}"#), .reply),
        ("one str field with a default", keyset,
         schema(#"{"properties":{"note":{"type":"string","default":"ok","title":"Note"}},"type":"object"}"#), .reply),
        ("enum", keyset, schema(#"{"properties":{"env":{"type":"string","enum":["a","b"]}},"type":"object"}"#), .input),
        ("maxLength", keyset, schema(#"{"properties":{"n":{"type":"string","maxLength":3}},"type":"object"}"#), .input),
        ("format", keyset, schema(#"{"properties":{"d":{"type":"string","format":"date-time"}}}"#), .input),
        ("int field", keyset, schema(#"{"properties":{"value":{"type":"integer"}},"title":"intAutomaticRunInput"}"#),
         .input),
        ("Optional[str] (anyOf)", keyset,
         schema(#"{"properties":{"v":{"anyOf":[{"type":"string"},{"type":"null"}]}},"type":"object"}"#), .input),
        ("two fields", keyset,
         schema(#"{"properties":{"a":{"type":"string"},"b":{"type":"string"}},"type":"object"}"#), .input),
        ("multi-field fixture", keyset,
         InputRow.list(prefect: ContextFixtures.response("rest-input-filter-multi-field")), .input),
        ("$defs", keyset, schema(#"{"$defs":{},"properties":{"a":{"type":"string"}},"type":"object"}"#), .input),
        ("additionalProperties true", keyset,
         schema(#"{"additionalProperties":true,"properties":{"a":{"type":"string"}}}"#), .input),
        ("required names another field", keyset,
         schema(#"{"properties":{"a":{"type":"string"}},"required":["b"]}"#), .input),
        ("keyset without rows yet", keyset, [], .input),
        ("garbage schema text", keyset, schema("{not json"), .input),
        ("schema not an object", keyset, schema("\"a string\""), .input),
        ("no keyset, no rows", nil, [], .plain),
        ("no keyset, but a schema row", nil, schema(ContextCase.strSchema), .reply),
        ("huge schema row is not parsed", keyset,
         schema(#"{"properties":{"a":{"type":"string","title":""# + String(repeating: "x", count: 70_000) + "\"}}}"),
         .input),
    ]

    @Test(arguments: cases)
    func category(name: String, keyset: InputKeyset?, rows: [InputRow], expected: PauseInput.Category) {
        let input = PauseInput(keyset: keyset, rows: rows, parseJSON: TextReaders.live.parseJSON)
        #expect(input.category == expected, "\(name)")
    }

    @Test func descriptionIsDecodedFromItsJSONString() {
        let rows = InputRow.list(prefect: ContextFixtures.response("rest-input-filter-one-field"))
        let input = PauseInput(keyset: Self.keyset, rows: rows, parseJSON: TextReaders.live.parseJSON)
        #expect(input.description?.hasPrefix("## Approve the nightly deploy?\n\n* **service**") == true)
        #expect(input.question == "Comment?")
    }

    @Test(arguments: ["not json", "42", "{\"a\":1}", "\"\"", "\"   \""])
    func descriptionThatIsNotAStringIsIgnored(value: String) {
        let rows = [InputRow(key: "paused-1-description", value: value)]
        let input = PauseInput(keyset: Self.keyset, rows: rows, parseJSON: TextReaders.live.parseJSON)
        #expect(input.description == nil)
    }

    @Test func suspendedKeysetRows() {
        var context = ContextFixtures.suspended()
        context.inputRows = InputRow.list(prefect: ContextFixtures.response("rest-input-filter-suspended"))
        let input = PauseInput(keyset: context.run.state?.runInputKeyset, rows: context.inputRows,
                               parseJSON: TextReaders.live.parseJSON)
        #expect(input.category == .reply)
        #expect(input.question == nil)
    }
}
