/// Markdown reduced to what an alert can show: its blocks in order, each with the plain text of its inline
/// content. The edge builds it with cmark (`Relay/Context/Markdown.swift`); the core only reads it.
public struct MarkdownSummary: Sendable, Equatable {
    public enum Block: Sendable, Equatable {
        /// `# …` to `###### …`.
        case heading(level: Int, text: String)
        /// A paragraph (or code block); `strongOnly` when all of its text is bold, e.g. `**Approve?**`.
        case paragraph(text: String, strongOnly: Bool)
        /// One list item's own text (nested lists come as their own items).
        case listItem(text: String)

        public var text: String {
            switch self {
            case .heading(_, let text), .paragraph(let text, _), .listItem(let text): return text
            }
        }

        public var isListItem: Bool {
            if case .listItem = self { return true }
            return false
        }
    }

    public var blocks: [Block]

    public init(blocks: [Block]) {
        self.blocks = blocks
    }

    public static let empty = MarkdownSummary(blocks: [])

    // MARK: - Bounds (the edge applies them before and while parsing)

    /// Markdown longer than this (UTF-8 bytes) is cut, on a character boundary, before it is parsed.
    public static let maxInputBytes = 16 * 1024
    /// At most this many blocks are kept.
    public static let maxBlocks = 64
    /// Each block's text is cut at this many UTF-8 bytes.
    public static let maxBlockBytes = 1024
    /// Nesting deeper than this (block quotes in lists in …, emphasis in links in …) is skipped.
    public static let maxDepth = 16

    /// `text` cut to `maxInputBytes` on a character boundary: what the parser is given.
    public static func boundedInput(_ text: String) -> String {
        text.prefix(utf8Bytes: maxInputBytes)
    }
}

/// How the core reads the text Prefect stores: JSON text (input rows) and markdown (descriptions, artifacts,
/// event bodies). Both need C parsers, so the edge supplies them (`TextReaders.live` in `Relay`).
public struct TextReaders: Sendable {
    /// Parses JSON text; nil when it is not JSON. Callers bound the text's size first.
    public var parseJSON: @Sendable (String) -> JSONValue?
    /// Reads markdown into blocks; callers need not bound the text (the reader must).
    public var markdown: @Sendable (String) -> MarkdownSummary

    public init(parseJSON: @escaping @Sendable (String) -> JSONValue?,
                markdown: @escaping @Sendable (String) -> MarkdownSummary) {
        self.parseJSON = parseJSON
        self.markdown = markdown
    }
}
