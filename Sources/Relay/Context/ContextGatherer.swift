import RelayCore

/// Reads everything an alert is made from, concurrently: the run, its flow, its input
/// rows, its artifacts and the recent events naming it. Handles the two read traps of a real server
/// (`docs/architecture.md`): the run can lag its own Paused event, and input rows land after the event, in two steps.
struct ContextGatherer: Sendable {
    let prefect: PrefectClient
    /// The run reads begun as their Paused events were parsed: a pause's first run read is taken from here.
    var readAhead: RunReadAhead? = nil

    /// What was read for one pause: the alert's inputs (`context.run` is the run as read; the watcher wants its
    /// timeout too).
    struct Gathered: Sendable {
        var context: PauseContext
        /// The run has already left this pause (a reconnect's backfill can replay a pause that is over).
        var movedOn: Bool
    }

    /// Reads a pause's context. Nil, without `onRun`, when the run can't be read at all (Prefect down, run
    /// deleted): the caller logs and gives up.
    /// `pausedAt` is the pause's state timestamp (unix seconds, with the fraction when known), to tell a run that
    /// lags its event from one that has moved on. `flowName` is the name the Paused event's related flow carries;
    /// when known, the flow isn't read.
    /// `readHistory` false skips the artifacts and events reads (the socket already told them: `RecentRunEvents`).
    /// The input rows are read once the run has named them (its keyset): Prefect writes them after the Paused
    /// state, so a read beside the run's would find nothing on a real server and only cost it a request.
    /// `onRun` runs on the run as soon as it is read, before the input rows are waited for: work that needs the run
    /// but not the rows (the announce's look at the pause tracker) overlaps the rows' read, which is already on its way
    /// when it was sent ahead (`RunReadAhead`).
    func gather<Result>(runID: String, stateID: String, pausedAt: Double, flowID: String?,
                        flowName knownFlowName: String? = nil, readHistory: Bool = true,
                        onRun: (RunDetails) async -> Result) async -> (gathered: Gathered, onRun: Result)?
    {
        let knownFlowName = knownFlowName.flatMap { $0.isEmpty ? nil : $0 }
        guard readHistory || knownFlowName == nil else {
            // A run the socket followed, its flow named by the event: the run and its input rows are all there is to
            // read, one after the other, without the child tasks below (each a task to make and schedule for nothing).
            guard let (run, movedOn) = await readRun(runID: runID, stateID: stateID, pausedAt: pausedAt) else {
                return nil
            }
            let result = await onRun(run)
            let rows = await inputRows(runID: runID, stateID: stateID, keyset: run.state?.runInputKeyset)
            return (Gathered(context: PauseContext(run: run, flowName: knownFlowName, inputRows: rows, artifacts: [],
                                                   events: []), movedOn: movedOn), result)
        }
        // The run first: the input read waits on its keyset, and Prefect serves requests in the order they arrive.
        async let runRead = readRun(runID: runID, stateID: stateID, pausedAt: pausedAt)
        async let artifacts = readHistory ? prefect.filter("/artifacts/filter", [
            "artifacts": ["flow_run_id": ["any_": [.string(runID)]]], "sort": "CREATED_DESC", "limit": 20,
        ], run: runID) : .success([])
        async let events = readHistory ? prefect.json("POST", "/events/filter", body: [
            "filter": [
                "any_resource": ["id": [.string("prefect.flow-run." + runID)]],
                "event": ["exclude_prefix": ["prefect.flow-run.", "prefect.task-run.", "prefect.log"]],
                "order": "DESC",
            ],
            "limit": 50,
        ], run: runID) : .failure(HTTPFailure(.skipped, "not read: the socket followed the run"))
        // The flow's name, read beside the run when the event didn't carry it.
        async let eventFlow = knownFlowName == nil ? flowName(flowID) : knownFlowName
        guard let (run, movedOn) = await runRead else { return nil }
        let result = await onRun(run)
        let rows = await inputRows(runID: runID, stateID: stateID, keyset: run.state?.runInputKeyset)
        let name: String?
        if let read = await eventFlow { name = read } else { name = await flowName(run.flowID) }

        var eventList: [RunEvent] = []
        if case .success(let reply) = await events, reply.status == 200, let json = try? JSONParser.parse(reply.body) {
            eventList = RunEvent.list(prefect: json)
        }

        let artifactList = (try? await artifacts.get()).map { RunArtifact.list(prefect: .array($0)) } ?? []
        let context = PauseContext(run: run, flowName: name, inputRows: rows, artifacts: artifactList,
                                   events: eventList)
        return (Gathered(context: context, movedOn: movedOn), result)
    }

    /// Pauses before each re-read of a run that still shows a state from before the pause. Prefect sends the
    /// Paused event as it commits the state, so a read sent at once can begin before the commit and answer the old
    /// state; by the time that answer is back (6-25 ms on a busy server here) the commit is done, so the first
    /// re-read goes at once rather than 5 ms later; ~1.3 s in all.
    static let runRereadDelaysMs = [1, 3, 5, 10, 20, 40, 80, 160, 320, 640]

    /// Pauses before each re-read of input rows the keyset names but that aren't there yet, while the schema isn't
    /// there either. The flow writes `-schema` 15-20 ms after its Paused state, and every read costs the Prefect
    /// server a request that competes with the flow's own writes, so these come every 10 ms at first.
    static let schemaRereadDelaysMs = [5, 10, 10, 10, 10, 20, 30, 50, 100, 200, 300]

    /// Pauses before each re-read once the schema is there but the description isn't: the description is the
    /// flow's next request (seen 4-30 ms after the schema on a real server), so re-reads come every 3 ms, then back
    /// off; ~0.75 s in all.
    static let descriptionRereadDelaysMs = [3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 5, 5, 10, 20, 50, 100, 200, 300]

    /// `GET /flow_runs/{id}` (the first one taken from `readAhead` when the socket's thread began it), re-read
    /// (bounded, `runRereadDelaysMs`) while it still shows a state from before the pause (the run can lag its own
    /// event). Returns the run and whether it has already moved past the pause: another PAUSED state, or any state
    /// stamped after the pause. Nil when it can't be read or makes no sense.
    private func readRun(runID: String, stateID: String, pausedAt: Double) async -> (RunDetails, movedOn: Bool)? {
        var last: RunDetails?
        for attempt in 0...Self.runRereadDelaysMs.count {
            if attempt > 0 { try? await Task.sleep(for: .milliseconds(Self.runRereadDelaysMs[attempt - 1])) }
            let early = attempt == 0 ? await readAhead?.take(stateID: stateID) : nil
            guard let run = await readRunOnce(runID: runID, early: early) else { continue }
            last = run
            if run.state?.id == stateID { return (run, false) }
            let stamped = run.state?.timestamp.flatMap(Timestamp.parse) ?? 0
            if run.state?.isPaused == true || stamped > pausedAt { return (run, true) }
        }
        return last.map { ($0, false) }
    }

    /// One read of the run: the answer read ahead when there is one (a 200 comes read already), else its own.
    private func readRunOnce(runID: String, early: RunReadAhead.Taken?) async -> RunDetails? {
        if let run = early?.run { return run }
        guard case .found(let json) = await prefect.flowRun(id: runID, answered: early?.answer) else { return nil }
        return RunDetails(prefect: json)
    }

    private func flowName(_ flowID: String?) async -> String? {
        guard let flowID, case .found(let json) = await prefect.flow(id: flowID) else { return nil }
        return json["name"]?.string
    }

    /// The pause's input rows. The flow writes `-schema` then `-description` in separate requests after the
    /// event, so a row the keyset names but that isn't there yet is read again: `schemaRereadDelaysMs` until the
    /// schema is there, then `descriptionRereadDelaysMs`. `wait_for_input=str` names a description that never
    /// comes; its schema says so and ends the wait. The first read may have been sent ahead (`readAhead`).
    private func inputRows(runID: String, stateID: String, keyset: InputKeyset?) async -> [InputRow] {
        guard let keyset, let read = Self.inputFilter(runID: runID, keyset: keyset) else { return [] }
        var early = await readAhead?.takeInput(stateID: stateID)
        var rows: [InputRow] = []
        var beforeSchema = Self.schemaRereadDelaysMs[...]
        var beforeDescription = Self.descriptionRereadDelaysMs[...]
        while true {
            let answer = await prefect.filter(read.path, read.body, run: runID, answered: early.take())
            if case .success(let items) = answer {
                rows = InputRow.list(prefect: .array(items))
            }
            let delay: Int? = switch Self.missing(keyset, in: rows) {
            case nil: nil
            case .schema?: beforeSchema.popFirst()
            case .description?: beforeDescription.popFirst()
            }
            guard let delay else { return rows }
            try? await Task.sleep(for: .milliseconds(delay))
        }
    }

    /// The read of a pause's input rows (by the prefix of its keyset's names); nil when the keyset names none.
    static func inputFilter(runID: String, keyset: InputKeyset?) -> (path: String, body: JSONValue)? {
        guard let schemaKey = keyset?.schema else { return nil }
        let prefix = schemaKey.hasSuffix("schema") ? String(schemaKey.dropLast("schema".count)) : schemaKey
        return ("/flow_runs/\(runID)/input/filter", ["prefix": .string(prefix), "limit": 20])
    }

    private enum MissingRow { case schema, description }

    /// Which of the keyset's rows is still to come; nil when none is (`wait_for_input=str` names a description
    /// that never comes: its schema says so).
    private static func missing(_ keyset: InputKeyset, in rows: [InputRow]) -> MissingRow? {
        let keys = Set(rows.map(\.key))
        guard let schemaKey = keyset.schema, keys.contains(schemaKey) else { return .schema }
        guard let descriptionKey = keyset.description, !keys.contains(descriptionKey) else { return nil }
        let schema = rows.first { $0.key == schemaKey }?.value ?? ""
        return schema.includes("strAutomaticRunInput") ? nil : .description
    }
}
