/// What the alert says about a pause: "what the run made, then what it asks" (the seed's "what it sends").
///
/// Every part comes from a fallback chain, first match wins:
/// - **context** (markdown): the newest `work.waiting` event's `payload.body`, else the markdown description
///   stored with the run's input, else its approval artifact's data, else the newest event naming the run,
///   from before the pause, with a string `payload.body`;
/// - **title**: `work.waiting`'s `payload.title`, else the approval artifact's description, else the
///   context's opening heading or bold line, else the input's one question, else a prompt-like string
///   parameter, else "Suspended until you resume it";
/// - **subtitle**: the flow's name;
/// - **body**: the context's list items, one a line (or its opening text), then the input's question.
/// `docs/payloads.md` says how `work.waiting` and "approval artifact" are read on a real server.
public struct AlertText: Sendable, Equatable {
    /// Where the context came from (for logs and tests).
    public enum ContextSource: String, Sendable, Equatable {
        case workWaiting, inputDescription, approvalArtifact, event, none
    }

    /// Which rung of the title chain answered.
    public enum TitleSource: String, Sendable, Equatable {
        case workWaiting, artifactDescription, opening, question, parameter, fallback
    }

    public var title: String
    public var subtitle: String
    public var body: String
    public var category: PauseInput.Category
    public var contextSource: ContextSource
    public var titleSource: TitleSource

    public init(title: String, subtitle: String, body: String, category: PauseInput.Category,
                contextSource: ContextSource = .none, titleSource: TitleSource = .fallback) {
        self.title = title
        self.subtitle = subtitle
        self.body = body
        self.category = category
        self.contextSource = contextSource
        self.titleSource = titleSource
    }

    // MARK: - Constants

    /// The event a flow (or anything acting for it) emits to say what it waits for: resource
    /// `prefect.flow-run.<id>`, payload `{"title"?: String, "body": markdown}`.
    public static let workWaitingEvent = "work.waiting"
    public static let fallbackTitle = "Suspended until you resume it"
    public static let maxTitleCharacters = 120
    public static let maxSubtitleCharacters = 80
    /// The body before payload fitting; each payload then cuts further to stay within 4096 bytes.
    public static let maxBodyCharacters = 1000
    public static let maxListItems = 8
    /// Any single source string is cut to this many UTF-8 bytes before it is cleaned or searched.
    static let maxSourceBytes = 4096

    // MARK: - Composing

    /// Reads `context` through the chains above. Never fails: hostile or missing input gives the fallbacks.
    public init(context: PauseContext, readers: TextReaders) {
        let run = context.run
        let input = PauseInput(keyset: run.state?.runInputKeyset, rows: context.inputRows,
                               parseJSON: readers.parseJSON)
        let sources = Sources(context: context)
        let (source, markdown) = sources.context(input: input)
        let summary = markdown.map(readers.markdown) ?? .empty
        let (title, titleSource, titleBlock) = AlertText.title(sources, summary: summary, input: input, run: run)
        var body = AlertText.bodyLines(summary, skipping: titleBlock, question: titleSource == .question ? nil : input.question)
            .joined(separator: "\n").truncated(toCharacters: AlertText.maxBodyCharacters)
        if body.isEmpty { body = AlertText.waitingSentence(run: run, category: input.category) }

        let subtitle = AlertText.line(context.flowName, AlertText.maxSubtitleCharacters)
            ?? AlertText.line(run.name, AlertText.maxSubtitleCharacters) ?? ""
        self.init(title: title ?? AlertText.fallbackTitle, subtitle: subtitle, body: body, category: input.category,
                  contextSource: source, titleSource: titleSource)
    }

    /// The run's events and artifacts that the chains read, picked once.
    private struct Sources {
        let workWaiting: RunEvent?
        let artifact: RunArtifact?
        /// The newest event naming the run, from before the pause, with a string `payload.body`.
        let earlierEvent: RunEvent?

        init(context: PauseContext) {
            let run = context.run
            let pausedAt = run.state?.timestamp.flatMap(Timestamp.parse)
            workWaiting = AlertText.newest(context.events.filter {
                $0.name == AlertText.workWaitingEvent && $0.names(run.resourceID)
            })
            artifact = AlertText.approvalArtifact(context.artifacts)
            earlierEvent = AlertText.newest(context.events.filter { event in
                guard event.names(run.resourceID), event.payload["body"]?.string?.hasVisibleText == true,
                      let occurred = event.occurred.flatMap(Timestamp.parse) else { return false }
                return pausedAt.map { occurred <= $0 } ?? true
            })
        }

        /// The context chain: where the markdown comes from, and the markdown.
        func context(input: PauseInput) -> (ContextSource, String?) {
            if let body = workWaiting?.payload["body"]?.string, body.hasVisibleText { return (.workWaiting, body) }
            if let description = input.description { return (.inputDescription, description) }
            if let data = artifact?.data.string, data.hasVisibleText { return (.approvalArtifact, data) }
            if let body = earlierEvent?.payload["body"]?.string { return (.event, body) }
            return (.none, nil)
        }
    }

    /// The title chain; `block` is the summary block used as the title (the body skips it).
    private static func title(_ sources: Sources, summary: MarkdownSummary, input: PauseInput,
                              run: RunDetails) -> (text: String?, source: TitleSource, block: Int?) {
        if let text = line(sources.workWaiting?.payload["title"]?.string, maxTitleCharacters) {
            return (text, .workWaiting, nil)
        }
        if let text = line(sources.artifact?.description, maxTitleCharacters) { return (text, .artifactDescription, nil) }
        if let first = summary.blocks.first, first.isOpeningTitle, let text = line(first.text, maxTitleCharacters) {
            return (text, .opening, 0)
        }
        if let text = line(input.question, maxTitleCharacters) { return (text, .question, nil) }
        if let text = promptParameter(run.parameters) { return (text, .parameter, nil) }
        return (nil, .fallback, nil)
    }

    /// The body: the summary's list items (or its opening text, not the title's block), then `question` if given.
    private static func bodyLines(_ summary: MarkdownSummary, skipping titleBlock: Int?, question: String?) -> [String] {
        var lines: [String] = []
        let items = summary.blocks.filter(\.isListItem).prefix(maxListItems)
        if !items.isEmpty {
            lines = items.compactMap { line($0.text, maxBodyCharacters) }
        } else if let opening = summary.blocks.indices.first(where: { $0 != titleBlock }),
                  let text = line(summary.blocks[opening].text, maxBodyCharacters) {
            lines = [text]
        }
        if let question = line(question, maxTitleCharacters), !lines.contains(question) { lines.append(question) }
        return lines
    }

    // MARK: - Rungs

    /// The newest event by `occurred`; events without a readable time rank oldest.
    static func newest(_ events: [RunEvent]) -> RunEvent? {
        var best: (event: RunEvent, at: Double)?
        for event in events {
            let at = event.occurred.flatMap(Timestamp.parse) ?? -.infinity
            if best == nil || at > best!.at { best = (event, at) }
        }
        return best?.event
    }

    /// The run's approval artifact: the newest artifact whose key names an approval (`approval-request`,
    /// `deploy-approval`, …) and whose data is markdown text. Artifacts arrive newest first
    /// (`sort: CREATED_DESC`); a readable `created` time overrides that order.
    static func approvalArtifact(_ artifacts: [RunArtifact]) -> RunArtifact? {
        var best: (artifact: RunArtifact, at: Double, order: Int)?
        for (order, artifact) in artifacts.enumerated() {
            guard let key = artifact.key, key.lowercased().includes("approval"),
                  artifact.type == nil || artifact.type == "markdown",
                  let data = artifact.data.string, data.hasVisibleText else { continue }
            let at = artifact.created.flatMap(Timestamp.parse) ?? -.infinity
            if best == nil || at > best!.at { best = (artifact, at, order) }
        }
        return best?.artifact
    }

    /// Parameter names that read as "what to ask": a word of the name, split at `_`, `-`, spaces and
    /// camelCase humps, is one of these (earlier words win; then names in sorted order).
    static let promptWords = ["prompt", "question", "message", "ask"]

    static func promptParameter(_ parameters: [String: JSONValue]) -> String? {
        var best: (rank: Int, name: String, text: String)?
        for (name, value) in parameters {
            guard let raw = value.string else { continue }
            let words = AlertText.words(of: name)
            guard let rank = promptWords.firstIndex(where: { words.contains($0) || words.contains($0 + "s") })
            else { continue }
            let firstLine = raw.prefix(utf8Bytes: maxSourceBytes).split(whereSeparator: \.isNewline)
                .lazy.map { String($0).trimmingSpaces() }.first { !$0.isEmpty }
            guard let text = line(firstLine, maxTitleCharacters) else { continue }
            if best == nil || (rank, name) < (best!.rank, best!.name) { best = (rank, name, text) }
        }
        return best?.text
    }

    static func words(of name: String) -> [String] {
        var words: [String] = []
        var current = ""
        var previousLower = false
        for character in name.prefix(200) {
            if !(character.isLetter || character.isNumber) {
                if !current.isEmpty { words.append(current) }
                current = ""
                previousLower = false
                continue
            }
            if character.isUppercase && previousLower && !current.isEmpty {
                words.append(current)
                current = ""
            }
            current += character.lowercased()
            previousLower = character.isLowercase
        }
        if !current.isEmpty { words.append(current) }
        return words
    }

    /// One clean line of at most `limit` characters, or nil when nothing printable is left.
    static func line(_ text: String?, _ limit: Int) -> String? {
        guard let text else { return nil }
        let clean = text.prefix(utf8Bytes: maxSourceBytes).cleanedForDisplay(keepNewlines: false)
        return clean.hasVisibleText ? clean.truncated(toCharacters: limit) : nil
    }

    /// The body when nothing else says anything: the run's name and what it waits for.
    static func waitingSentence(run: RunDetails, category: PauseInput.Category) -> String {
        let name = line(run.name, maxSubtitleCharacters) ?? "This run"
        switch category {
        case .reply: return "\(name) is waiting for your reply."
        case .input: return "\(name) is waiting for your input."
        case .plain: return "\(name) is waiting for you to resume it."
        }
    }
}

extension MarkdownSummary.Block {
    /// A heading, or a paragraph that is all bold: what may stand as a title when it opens the context.
    var isOpeningTitle: Bool {
        switch self {
        case .heading: return true
        case .paragraph(_, let strongOnly): return strongOnly
        case .listItem: return false
        }
    }
}
