import Testing
@testable import Relay
@testable import RelayCore

/// A synthetic pause to vary one input at a time.
struct ContextCase: Sendable, CustomTestStringConvertible {
    var name: String
    var context: PauseContext
    var testDescription: String { name }

    static let runID = "11111111-2222-3333-4444-555555555555"
    static let pausedAt = "2026-11-29T22:00:00Z"
    static let keyset = InputKeyset(schema: "paused-1-schema", description: "paused-1-description",
                                    response: "paused-1-response")
    static let strSchema = #"{"additionalProperties":false,"properties":{"value":{"title":"Value","type":"string"}},"required":["value"],"title":"strAutomaticRunInput","type":"object"}"#
    static let commentSchema = #"{"additionalProperties":false,"properties":{"comment":{"title":"Comment","type":"string"}},"required":["comment"],"title":"Approval","type":"object"}"#

    static func make(_ name: String, keyset: InputKeyset? = nil, rows: [InputRow] = [], artifacts: [RunArtifact] = [],
                     events: [RunEvent] = [], parameters: [String: JSONValue] = [:]) -> ContextCase {
        let state = RunState(id: "state-1", type: "PAUSED", name: "Paused", timestamp: pausedAt,
                             pauseTimeout: "2026-11-29T22:15:00Z", runInputKeyset: keyset)
        let run = RunDetails(id: runID, name: "brave-otter", state: state, parameters: parameters)
        return ContextCase(name: name, context: PauseContext(run: run, flowName: "nightly-deploy", inputRows: rows,
                                                             artifacts: artifacts, events: events))
    }

    static func event(_ name: String, at occurred: String = "2026-11-29T21:59:00Z", body: String? = nil,
                      title: String? = nil, resource: String = "prefect.flow-run." + runID,
                      related: [String] = []) -> RunEvent {
        var payload: [String: JSONValue] = [:]
        if let body { payload["body"] = .string(body) }
        if let title { payload["title"] = .string(title) }
        return RunEvent(name: name, occurred: occurred, resourceID: resource, relatedIDs: related,
                        payload: .object(payload))
    }

    static func description(_ markdown: String) -> InputRow {
        InputRow(key: "paused-1-description", value: JSONValue.string(markdown).encoded())
    }

    static let approval = RunArtifact(key: "approval-request", type: "markdown", description: "Approve the rollout",
                                      data: "## From the artifact\n\nartifact text")
}

@Suite struct ContextAlertTextTests {
    let readers = TextReaders.live

    // MARK: - Real scenarios

    struct Expected: Sendable, CustomTestStringConvertible {
        var scenario: String
        var title: String
        var subtitle: String
        var body: String
        var category: PauseInput.Category
        var source: AlertText.ContextSource
        var testDescription: String { scenario }
    }

    static let scenarios: [Expected] = [
        Expected(scenario: "one-field", title: "Approve the nightly deploy?", subtitle: "fixture-one-field",
                 body: "service: billing-api\nversion: 1.4.2\nComment?", category: .reply, source: .inputDescription),
        Expected(scenario: "str", title: AlertText.fallbackTitle, subtitle: "fixture-str",
                 body: "aquamarine-bonobo is waiting for your reply.", category: .reply, source: .none),
        Expected(scenario: "multi-field", title: AlertText.fallbackTitle, subtitle: "fixture-multi-field",
                 body: "Review the release notes, then approve or reject.", category: .input,
                 source: .inputDescription),
        Expected(scenario: "plain", title: AlertText.fallbackTitle, subtitle: "fixture-plain",
                 body: "benign-spoonbill is waiting for you to resume it.", category: .plain, source: .none),
        Expected(scenario: "artifact", title: "Approval request for the nightly deploy", subtitle: "fixture-artifact",
                 body: "service: billing-api\nversion: 1.4.2", category: .plain, source: .approvalArtifact),
        Expected(scenario: "custom-event", title: AlertText.fallbackTitle, subtitle: "fixture-custom-event",
                 body: "Deploy billing-api 1.4.2 to production?", category: .plain, source: .event),
        Expected(scenario: "suspended", title: AlertText.fallbackTitle, subtitle: "fixture-suspend",
                 body: "noisy-moth is waiting for your reply.", category: .reply, source: .none),
    ]

    static func context(_ scenario: String) -> PauseContext {
        switch scenario {
        case "one-field": return ContextFixtures.oneField()
        case "str": return ContextFixtures.str()
        case "multi-field": return ContextFixtures.multiField()
        case "plain": return ContextFixtures.plain()
        case "artifact": return ContextFixtures.artifact()
        case "custom-event": return ContextFixtures.customEvent()
        default: return ContextFixtures.suspended()
        }
    }

    @Test(arguments: scenarios)
    func realScenario(_ expected: Expected) {
        let text = AlertText(context: Self.context(expected.scenario), readers: readers)
        #expect(text.title == expected.title)
        #expect(text.subtitle == expected.subtitle)
        #expect(text.body == expected.body)
        #expect(text.category == expected.category)
        #expect(text.contextSource == expected.source)
    }

    @Test func descriptionRowMissingYetIsStillInput() {
        // trap 2: the schema row landed, the description row not yet (and the default limit of 1)
        let rows = InputRow.list(prefect: ContextFixtures.response("rest-input-filter-default-limit"))
        var context = ContextFixtures.oneField()
        context.inputRows = rows
        let text = AlertText(context: context, readers: readers)
        #expect(text.category == .reply)
        #expect(text.title == "Comment?")
        #expect(text.titleSource == .question)
        #expect(text.body == "aquamarine-bonobo is waiting for your reply.")
    }

    // MARK: - Context chain, every rung

    static let contextRungs: [(ContextCase, AlertText.ContextSource, String)] = {
        typealias C = ContextCase
        let waiting = C.event("work.waiting", body: "made **3** reports")
        let earlier = C.event("relay.approval.requested", at: "2026-11-29T21:58:00Z", body: "from the event")
        return [
            (C.make("work.waiting beats all", keyset: C.keyset, rows: [C.description("from the description")],
                    artifacts: [C.approval], events: [earlier, waiting]), .workWaiting, "made 3 reports"),
            (C.make("newest work.waiting", events: [waiting, C.event("work.waiting", at: "2026-11-29T21:59:30Z",
                                                                      body: "newer")]), .workWaiting, "newer"),
            (C.make("work.waiting naming the run as related", events: [
                C.event("work.waiting", body: "related", resource: "prefect.task-run.x",
                        related: ["prefect.flow-run." + C.runID])]), .workWaiting, "related"),
            (C.make("description next", keyset: C.keyset, rows: [C.description("from the description")],
                    artifacts: [C.approval], events: [earlier]), .inputDescription, "from the description"),
            (C.make("work.waiting without body falls through", keyset: C.keyset,
                    rows: [C.description("from the description")],
                    events: [C.event("work.waiting", title: "only a title")]), .inputDescription,
             "from the description"),
            (C.make("artifact next", artifacts: [C.approval], events: [earlier]), .approvalArtifact,
             "From the artifact"),
            (C.make("newest approval artifact", artifacts: [
                RunArtifact(key: "approval-old", type: "markdown", description: nil, data: "old",
                            created: "2026-11-29T21:00:00Z"),
                RunArtifact(key: "deploy-approval", type: "markdown", description: nil, data: "new",
                            created: "2026-11-29T21:30:00Z"),
            ]), .approvalArtifact, "new"),
            (C.make("other artifacts are not approvals", artifacts: [
                RunArtifact(key: "report", type: "markdown", description: "d", data: "not this"),
                RunArtifact(key: "approval-table", type: "table", description: "d", data: "[[1]]"),
                RunArtifact(key: nil, type: "markdown", description: "approval", data: "unkeyed"),
            ], events: [earlier]), .event, "from the event"),
            (C.make("event before the pause", events: [earlier]), .event, "from the event"),
            (C.make("newest event before the pause", events: [
                earlier, C.event("x.y", at: "2026-11-29T21:59:59Z", body: "newest"),
                C.event("x.z", at: "2026-11-29T22:00:01Z", body: "after the pause"),
            ]), .event, "newest"),
            (C.make("event after the pause is ignored", events: [
                C.event("x.z", at: "2026-11-29T22:00:01Z", body: "after the pause")]), .none,
             "brave-otter is waiting for you to resume it."),
            (C.make("event about another run is ignored", events: [
                C.event("x.y", body: "other", resource: "prefect.flow-run.other")]), .none,
             "brave-otter is waiting for you to resume it."),
            (C.make("event body must be a string", events: [
                RunEvent(name: "x.y", occurred: "2026-11-29T21:59:00Z", resourceID: "prefect.flow-run." + C.runID,
                         payload: ["body": ["nested": "object"]])]), .none,
             "brave-otter is waiting for you to resume it."),
            (C.make("nothing"), .none, "brave-otter is waiting for you to resume it."),
        ]
    }()

    @Test(arguments: contextRungs)
    func contextRung(_ item: ContextCase, source: AlertText.ContextSource, body: String) {
        let text = AlertText(context: item.context, readers: readers)
        #expect(text.contextSource == source)
        #expect(text.body == body)
    }

    // MARK: - Title chain, every rung

    static let titleRungs: [(ContextCase, AlertText.TitleSource, String)] = {
        typealias C = ContextCase
        let heading = C.description("# Heading title\n\nbody text")
        let schemaRow = InputRow(key: "paused-1-schema", value: C.commentSchema)
        let prompt: [String: JSONValue] = ["approval_prompt": "Ship 1.4.2?\nmore lines", "count": 3]
        return [
            (C.make("work.waiting title", keyset: C.keyset, rows: [heading, schemaRow], artifacts: [C.approval],
                    events: [C.event("work.waiting", body: "b", title: "Waiting title")], parameters: prompt),
             .workWaiting, "Waiting title"),
            (C.make("artifact description", keyset: C.keyset, rows: [heading, schemaRow], artifacts: [C.approval],
                    parameters: prompt), .artifactDescription, "Approve the rollout"),
            (C.make("opening heading", keyset: C.keyset, rows: [heading, schemaRow], parameters: prompt),
             .opening, "Heading title"),
            (C.make("opening bold line", keyset: C.keyset, rows: [C.description("**Bold title**\n\nbody")]),
             .opening, "Bold title"),
            (C.make("heading not first is no title", keyset: C.keyset,
                    rows: [C.description("intro\n\n# Later"), schemaRow]), .question, "Comment?"),
            (C.make("input's one question", keyset: C.keyset, rows: [schemaRow], parameters: prompt),
             .question, "Comment?"),
            (C.make("field description is the question", keyset: C.keyset, rows: [InputRow(
                key: "paused-1-schema",
                value: #"{"properties":{"why":{"type":"string","description":"Why ship now?"}},"type":"object"}"#)]),
             .question, "Why ship now?"),
            (C.make("prompt parameter", keyset: C.keyset,
                    rows: [InputRow(key: "paused-1-schema", value: C.strSchema)], parameters: prompt),
             .parameter, "Ship 1.4.2?"),
            (C.make("question parameter", parameters: ["userQuestion": "Which region?", "task": "no"]),
             .parameter, "Which region?"),
            (C.make("prompt beats message", parameters: ["message": "m", "prompt": "p"]), .parameter, "p"),
            (C.make("not prompt-like", parameters: ["task_name": "t", "masked": "m", "prompt": 5]), .fallback,
             AlertText.fallbackTitle),
            (C.make("fallback"), .fallback, AlertText.fallbackTitle),
        ]
    }()

    @Test(arguments: titleRungs)
    func titleRung(_ item: ContextCase, source: AlertText.TitleSource, title: String) {
        let text = AlertText(context: item.context, readers: readers)
        #expect(text.titleSource == source)
        #expect(text.title == title)
    }

    // MARK: - Body composition

    static let bodies: [(ContextCase, String)] = {
        typealias C = ContextCase
        let schemaRow = InputRow(key: "paused-1-schema", value: C.commentSchema)
        return [
            (C.make("items then question", keyset: C.keyset,
                    rows: [C.description("## T\n\nintro\n\n- a\n- b"), schemaRow]), "a\nb\nComment?"),
            (C.make("opening text then question", keyset: C.keyset,
                    rows: [C.description("## T\n\nintro\n\nmore"), schemaRow]), "intro\nComment?"),
            (C.make("heading is the opening text when it is not the title", artifacts: [C.approval]),
             "From the artifact"),
            (C.make("question not repeated when it is the title", keyset: C.keyset, rows: [schemaRow]),
             "brave-otter is waiting for your reply."),
            (C.make("at most eight items", keyset: C.keyset,
                    rows: [C.description((1...12).map { "- item \($0)" }.joined(separator: "\n"))]),
             (1...8).map { "item \($0)" }.joined(separator: "\n")),
            (C.make("input fallback sentence", keyset: C.keyset), "brave-otter is waiting for your input."),
        ]
    }()

    @Test(arguments: bodies)
    func body(_ item: ContextCase, body: String) {
        #expect(AlertText(context: item.context, readers: readers).body == body)
    }

    @Test func promptWords() {
        #expect(AlertText.words(of: "approval_prompt") == ["approval", "prompt"])
        #expect(AlertText.words(of: "userQuestion") == ["user", "question"])
        #expect(AlertText.words(of: "task-name") == ["task", "name"])
        #expect(AlertText.words(of: "ASK") == ["ask"])
    }
}
