import CCmark
import RelayCore

/// Reads markdown with cmark (the CommonMark reference parser) into the core's `MarkdownSummary`.
///
/// Bounded before any work: the text is cut to `MarkdownSummary.maxInputBytes` before cmark sees it, the
/// walk stops at `maxBlocks` blocks and `maxDepth` levels of nesting, and each block's text at
/// `maxBlockBytes`. Pure function, safe from any thread: each call owns its own cmark document.
enum Markdown {
    static func summary(_ text: String) -> MarkdownSummary {
        let input = Array(MarkdownSummary.boundedInput(text).utf8)
        guard !input.isEmpty else { return .empty }
        let options = CMARK_OPT_DEFAULT | CMARK_OPT_VALIDATE_UTF8
        let parsed = input.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { chars in
                cmark_parse_document(chars.baseAddress, chars.count, options)
            }
        }
        // We own the document (and every node under it) until this scope ends.
        guard let document = parsed else { return .empty }
        defer { cmark_node_free(document) }

        var walker = Walker()
        walker.blocks(under: document, depth: 0)
        return MarkdownSummary(blocks: walker.out)
    }

    /// Collects blocks in document order; borrows the nodes of a document the caller frees.
    private struct Walker {
        var out: [MarkdownSummary.Block] = []

        mutating func blocks(under parent: OpaquePointer, depth: Int) {
            var child = cmark_node_first_child(parent)
            while let node = child, out.count < MarkdownSummary.maxBlocks {
                child = cmark_node_next(node)
                switch cmark_node_get_type(node) {
                case CMARK_NODE_HEADING:
                    var text = InlineText()
                    text.collect(node, depth: depth)
                    out.append(.heading(level: Int(cmark_node_get_heading_level(node)), text: text.result))
                case CMARK_NODE_PARAGRAPH:
                    var text = InlineText()
                    text.collect(node, depth: depth)
                    out.append(.paragraph(text: text.result, strongOnly: text.isStrongOnly))
                case CMARK_NODE_CODE_BLOCK:
                    let literal = cmark_node_get_literal(node).map { String(cString: $0) } ?? ""
                    out.append(.paragraph(text: literal.prefix(utf8Bytes: MarkdownSummary.maxBlockBytes),
                                          strongOnly: false))
                case CMARK_NODE_ITEM:
                    item(node, depth: depth)
                case CMARK_NODE_LIST, CMARK_NODE_BLOCK_QUOTE, CMARK_NODE_CUSTOM_BLOCK:
                    if depth < MarkdownSummary.maxDepth { blocks(under: node, depth: depth + 1) }
                default:
                    continue  // HTML blocks and thematic breaks say nothing an alert can show
                }
            }
        }

        /// A list item's own paragraphs become one item; lists and quotes nested in it follow as blocks.
        mutating func item(_ node: OpaquePointer, depth: Int) {
            var text = InlineText()
            var nested: [OpaquePointer] = []
            var child = cmark_node_first_child(node)
            while let part = child {
                child = cmark_node_next(part)
                switch cmark_node_get_type(part) {
                case CMARK_NODE_PARAGRAPH, CMARK_NODE_HEADING:
                    if !text.isEmpty { text.append(" ") }
                    text.collect(part, depth: depth)
                case CMARK_NODE_LIST, CMARK_NODE_BLOCK_QUOTE:
                    nested.append(part)
                default:
                    continue
                }
            }
            if !text.isEmpty { out.append(.listItem(text: text.result)) }
            guard depth < MarkdownSummary.maxDepth else { return }
            for part in nested where out.count < MarkdownSummary.maxBlocks {
                blocks(under: part, depth: depth + 1)
            }
        }
    }

    /// The plain text of a block's inline content, and whether all of it is bold.
    private struct InlineText {
        private var text = ""
        private var boldText = false
        private var plainText = false

        var isEmpty: Bool { text.isEmpty }
        var isStrongOnly: Bool { boldText && !plainText }
        var result: String { text.prefix(utf8Bytes: MarkdownSummary.maxBlockBytes) }

        mutating func append(_ piece: String) {
            guard text.utf8.count <= MarkdownSummary.maxBlockBytes else { return }
            text += piece
        }

        mutating func collect(_ parent: OpaquePointer, depth: Int, bold: Bool = false) {
            var child = cmark_node_first_child(parent)
            while let node = child {
                child = cmark_node_next(node)
                switch cmark_node_get_type(node) {
                case CMARK_NODE_TEXT, CMARK_NODE_CODE:
                    let literal = cmark_node_get_literal(node).map { String(cString: $0) } ?? ""
                    if literal.contains(where: { !$0.isWhitespace }) {
                        if bold { boldText = true } else { plainText = true }
                    }
                    append(literal)
                case CMARK_NODE_SOFTBREAK, CMARK_NODE_LINEBREAK:
                    append(" ")
                case CMARK_NODE_STRONG:
                    if depth < MarkdownSummary.maxDepth { collect(node, depth: depth + 1, bold: true) }
                case CMARK_NODE_EMPH, CMARK_NODE_LINK, CMARK_NODE_IMAGE, CMARK_NODE_CUSTOM_INLINE:
                    if depth < MarkdownSummary.maxDepth { collect(node, depth: depth + 1, bold: bold) }
                default:
                    continue  // inline HTML is markup, not text
                }
            }
        }
    }
}

extension TextReaders {
    /// The readers the relay uses: `JSONParser` for JSON text, cmark for markdown.
    static let live = TextReaders(
        parseJSON: { text in try? JSONParser.parse(text) },
        markdown: { text in Markdown.summary(text) })
}
