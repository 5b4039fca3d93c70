// Alert text and markdown: any run, input rows, artifacts and events (texts from the fuzz input) give an alert
// whose title, subtitle and body are within their character limits; markdown summaries stay bounded.

let textReaders = TextReaders(parseJSON: { try? JSONParser.parse(Array($0.utf8)) }, markdown: { Markdown.summary($0) })

func fuzzText(_ data: [UInt8]) {
    let parts = fields(data, 6)
    let summary = Markdown.summary(text(parts[0]))
    fuzzCheck(summary.blocks.count <= MarkdownSummary.maxBlocks, "\(summary.blocks.count) markdown blocks")
    let state = RunState(id: "s", type: "PAUSED", name: parts[5].first.map { $0 & 1 == 0 ? "Paused" : "Suspended" } ?? "Paused")
    let run = RunDetails(id: "r", name: text(parts[1]), state: state)
    let rows = [InputRow(key: "paused-1-schema", value: text(parts[2])),
                InputRow(key: "paused-1-description", value: text(parts[3]))]
    let context = PauseContext(run: run, flowName: text(parts[4]), inputRows: rows,
                               artifacts: [RunArtifact(key: "a", type: "markdown", description: text(parts[3]),
                                                       data: .string(text(parts[0])))],
                               events: [])
    let alert = AlertText(context: context, readers: textReaders)
    fuzzCheck(alert.title.count <= AlertText.maxTitleCharacters + 1, "title \(alert.title.count) characters")
    fuzzCheck(alert.subtitle.count <= AlertText.maxSubtitleCharacters + 1, "subtitle too long")
    fuzzCheck(alert.body.count <= AlertText.maxBodyCharacters + 40, "body \(alert.body.count) characters")
    fuzzCheck(alert.title.hasVisibleText, "empty title")
}
