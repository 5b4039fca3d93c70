import Testing
@testable import Relay
@testable import RelayCore

/// Whatever a flow, a parameter or an input row holds, the phone gets a sane, bounded alert.
@Suite struct ContextHostileInputTests {
    static func check(_ context: PauseContext, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let text = AlertText(context: context, readers: .live)
        #expect(!text.title.isEmpty, sourceLocation: sourceLocation)
        #expect(text.title.count <= AlertText.maxTitleCharacters, sourceLocation: sourceLocation)
        #expect(text.subtitle.count <= AlertText.maxSubtitleCharacters, sourceLocation: sourceLocation)
        #expect(!text.body.isEmpty && text.body.count <= AlertText.maxBodyCharacters, sourceLocation: sourceLocation)
        for (field, value) in [("title", text.title), ("subtitle", text.subtitle), ("body", text.body)] {
            let bad = value.unicodeScalars.first {
                ($0.value < 0x20 && !(field == "body" && $0 == "\n")) || (0x7F...0x9F).contains($0.value)
                    || (0x202A...0x202E).contains($0.value)
            }
            #expect(bad == nil, "\(field) holds U+\(String(bad?.value ?? 0, radix: 16))", sourceLocation: sourceLocation)
        }
        let props = WaitingProps(run: context.run, flowName: context.flowName, text: text, serverId: "server-1",
                                 uiRoot: "https://prefect.example.com")!
        for push in ContextPayloadTests.allPushes(props) {
            #expect(push.json.utf8.count <= PushMessage.maxBytes, sourceLocation: sourceLocation)
            _ = try JSONParser.parse(push.json)
        }
    }

    static let controls = "a\u{0}b\u{7}c\u{1B}[31md\u{7F}e\u{85}f\u{202E}g\u{2066}h\r\ni\u{FEFF}j\u{2028}k"

    @Test func hugeDescription() throws {
        let huge = String(repeating: "## Heading\n\n- item 🧑‍💻 with text\n\n", count: 40_000)
        try Self.check(ContextCase.make("huge", keyset: ContextCase.keyset, rows: [ContextCase.description(huge)]).context)
    }

    @Test func hugeSingleLine() throws {
        let line = String(repeating: "👩‍👩‍👧‍👦", count: 300_000)
        try Self.check(ContextCase.make("huge line", keyset: ContextCase.keyset,
                                        rows: [ContextCase.description(line)]).context)
    }

    @Test func controlCharactersEverywhere() throws {
        var item = ContextCase.make("controls", keyset: ContextCase.keyset,
                                    rows: [ContextCase.description("# T\(Self.controls)\n\n- \(Self.controls)")],
                                    events: [ContextCase.event("work.waiting", body: Self.controls,
                                                               title: Self.controls)])
        item.context.flowName = Self.controls
        item.context.run.name = Self.controls
        try Self.check(item.context)
        let text = AlertText(context: item.context, readers: .live)
        #expect(text.title == "a b c [31md e f g h i j k")
    }

    @Test func invalidUTF8InInputRows() throws {
        let bad: [UInt8] = [0x22, 0x23, 0x20, 0xFF, 0xFE, 0xC3, 0x28, 0xE2, 0x82, 0x22]  // "# \xff\xfe\xc3( \xe2\x82"
        let rows = [InputRow(key: "paused-1-description", value: String(decoding: bad, as: UTF8.self)),
                    InputRow(key: "paused-1-schema", value: String(decoding: [0x7B, 0xFF, 0x7D], as: UTF8.self))]
        try Self.check(ContextCase.make("utf8", keyset: ContextCase.keyset, rows: rows).context)
    }

    @Test func deeplyNestedJSONInRows() throws {
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        let deepObject = String(repeating: "{\"a\":", count: 5000) + "1" + String(repeating: "}", count: 5000)
        let rows = [InputRow(key: "paused-1-schema", value: deep), InputRow(key: "paused-1-description", value: deepObject)]
        let item = ContextCase.make("deep", keyset: ContextCase.keyset, rows: rows)
        try Self.check(item.context)
        #expect(AlertText(context: item.context, readers: .live).category == .input)
    }

    /// A hostile Markdown input, named in the test log by what it repeats: the text runs to 200 kB, and the log
    /// used to print each one whole.
    struct MarkdownBomb: Sendable, CustomTestStringConvertible {
        let text: String
        let testDescription: String

        init(_ unit: String, times: Int) {
            text = String(repeating: unit, count: times)
            testDescription = "\(unit.debugDescription) × \(times)"
        }

        init(_ name: String, text: String) {
            self.text = text
            testDescription = name
        }
    }

    @Test(arguments: [
        MarkdownBomb(">", times: 200_000),
        MarkdownBomb("[", times: 200_000),
        MarkdownBomb("*a **b ", times: 30_000),
        MarkdownBomb("- ", times: 100_000),
        MarkdownBomb("5,000 list items indented 0-199 spaces",
                     text: (0..<5000).map { String(repeating: " ", count: $0 % 200) + "1. x" }.joined(separator: "\n")),
        MarkdownBomb("`", times: 100_000),
        MarkdownBomb("<a>", times: 50_000),
        MarkdownBomb("[a](", times: 50_000),
    ])
    func markdownBombs(bomb: MarkdownBomb) throws {
        try Self.check(ContextCase.make("bomb", keyset: ContextCase.keyset, rows: [ContextCase.description(bomb.text)]).context)
        try Self.check(ContextCase.make("bomb", artifacts: [RunArtifact(key: "approval", type: "markdown",
                                                                        description: bomb.text, data: .string(bomb.text))]).context)
    }

    @Test func hugeNamesAndParameters() throws {
        let long = String(repeating: "n", count: 100_000)
        var item = ContextCase.make("names", parameters: ["prompt": .string(long + "\n" + long), "message": 3])
        item.context.flowName = long
        item.context.run.name = long
        try Self.check(item.context)
    }

    @Test func whitespaceOnlyEverywhere() throws {
        let blank = " \n\t\u{0}\u{200B} "
        var item = ContextCase.make("blank", keyset: ContextCase.keyset, rows: [ContextCase.description(blank)],
                                    artifacts: [RunArtifact(key: "approval", type: "markdown", description: blank,
                                                            data: .string(blank))],
                                    events: [ContextCase.event("work.waiting", body: blank, title: blank)],
                                    parameters: ["prompt": .string(blank)])
        item.context.flowName = blank
        item.context.run.name = ""
        try Self.check(item.context)
        let text = AlertText(context: item.context, readers: .live)
        #expect(text.title == AlertText.fallbackTitle && text.contextSource == .none)
        #expect(text.body == "This run is waiting for your input.")
    }

    @Test func manyEventsAndArtifacts() throws {
        let events = (0..<5000).map { ContextCase.event("e.\($0)", at: "2026-11-29T21:\(10 + $0 % 49):00Z", body: "b\($0)") }
        let artifacts = (0..<2000).map {
            RunArtifact(key: "approval-\($0)", type: "markdown", description: nil, data: .string("a\($0)"))
        }
        try Self.check(ContextCase.make("many", artifacts: artifacts, events: events).context)
    }

    @Test func unparseableTimes() throws {
        var item = ContextCase.make("times", events: [ContextCase.event("x", at: "garbage", body: "b")])
        item.context.run.state?.timestamp = "not a time"
        item.context.run.state?.pauseTimeout = "never"
        try Self.check(item.context)
        #expect(AlertText(context: item.context, readers: .live).contextSource == .none)
    }
}
