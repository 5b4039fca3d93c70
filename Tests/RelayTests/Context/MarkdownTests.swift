import Testing
@testable import Relay
@testable import RelayCore

@Suite struct ContextMarkdownTests {
    typealias Block = MarkdownSummary.Block

    @Test func approvalDescription() {
        let summary = Markdown.summary(
            "## Approve the nightly deploy?\n\n* **service**: `billing-api`\n* **version**: `1.4.2`\n\nReply with a comment.")
        #expect(summary.blocks == [
            .heading(level: 2, text: "Approve the nightly deploy?"),
            .listItem(text: "service: billing-api"),
            .listItem(text: "version: 1.4.2"),
            .paragraph(text: "Reply with a comment.", strongOnly: false),
        ])
    }

    @Test(arguments: [
        ("**Approve the deploy?**", Block.paragraph(text: "Approve the deploy?", strongOnly: true)),
        ("__Approve__ **now**", Block.paragraph(text: "Approve now", strongOnly: true)),
        ("**Review** the release notes", Block.paragraph(text: "Review the release notes", strongOnly: false)),
        ("plain *emph* [link](https://x.y) ![alt](i.png) <b>html</b>",
         Block.paragraph(text: "plain emph link alt html", strongOnly: false)),
        ("line one\nline two  \nline three", Block.paragraph(text: "line one line two line three", strongOnly: false)),
        ("Setext title\n===", Block.heading(level: 1, text: "Setext title")),
        ("```\ncode here\n```", Block.paragraph(text: "code here\n", strongOnly: false)),
        ("> quoted **text**", Block.paragraph(text: "quoted text", strongOnly: false)),
    ])
    func firstBlock(markdown: String, expected: Block) {
        #expect(Markdown.summary(markdown).blocks.first == expected)
    }

    @Test func nestedListsComeAsTheirOwnItems() {
        let summary = Markdown.summary("1. first\n   - inner a\n   - inner b\n2. second\n")
        #expect(summary.blocks.map(\.text) == ["first", "inner a", "inner b", "second"])
        #expect(summary.blocks.allSatisfy { $0.isListItem })
    }

    @Test func emptyAndMarkupOnly() {
        #expect(Markdown.summary("") == .empty)
        #expect(Markdown.summary("   \n\n---\n<div>x</div>\n").blocks.isEmpty)
    }

    @Test func boundedOnHostileInput() {
        let deepQuotes = String(repeating: ">", count: 50_000) + " deep"
        #expect(Markdown.summary(deepQuotes).blocks.count <= MarkdownSummary.maxBlocks)
        let deepLists = (0..<2000).map { String(repeating: "  ", count: $0) + "- x" }.joined(separator: "\n")
        #expect(Markdown.summary(deepLists).blocks.count <= MarkdownSummary.maxBlocks)
        let brackets = String(repeating: "[", count: 100_000) + String(repeating: "*a", count: 50_000)
        let summary = Markdown.summary(brackets)
        #expect(summary.blocks.allSatisfy { $0.text.utf8.count <= MarkdownSummary.maxBlockBytes })
        let manyParagraphs = String(repeating: "p\n\n", count: 10_000)
        #expect(Markdown.summary(manyParagraphs).blocks.count == MarkdownSummary.maxBlocks)
        let nulAndControls = "a\u{0}b\u{1B}[31mred\u{7}"
        #expect(Markdown.summary(nulAndControls).blocks.count == 1)
    }

    @Test func inputIsCutOnACharacterBoundary() {
        let text = String(repeating: "👩‍👩‍👧", count: 2000)  // 18 bytes a character
        let bounded = MarkdownSummary.boundedInput(text)
        #expect(bounded.utf8.count <= MarkdownSummary.maxInputBytes)
        #expect(bounded.allSatisfy { $0 == "👩‍👩‍👧" })
    }
}
