/// Parsers from Prefect's JSON (already parsed into `JSONValue` at the edge) into the records. Each takes
/// the response body as Prefect sends it and skips what it cannot read rather than failing the whole answer.

extension InputKeyset {
    public init?(prefect json: JSONValue?) {
        guard let json, json.object != nil else { return nil }
        self.init(schema: json["schema"]?.string, description: json["description"]?.string,
                  response: json["response"]?.string)
    }
}

extension RunState {
    /// A flow run's `state` object; nil when it is null or has no id.
    public init?(prefect json: JSONValue?) {
        guard let json, let id = json["id"]?.string, let type = json["type"]?.string else { return nil }
        let details = json["state_details"]
        self.init(
            id: id, type: type, name: json["name"]?.string ?? type.capitalizedFirst,
            timestamp: json["timestamp"]?.string,
            pauseTimeout: details?["pause_timeout"]?.string,
            pauseReschedule: details?["pause_reschedule"]?.bool ?? false,
            runInputKeyset: InputKeyset(prefect: details?["run_input_keyset"]))
    }
}

extension RunDetails {
    /// `GET /flow_runs/{id}`; nil without an id.
    public init?(prefect json: JSONValue) {
        guard let id = json["id"]?.string else { return nil }
        self.init(id: id, name: json["name"]?.string ?? "", flowID: json["flow_id"]?.string,
                  state: RunState(prefect: json["state"]), parameters: json["parameters"]?.object ?? [:])
    }

    /// `POST /flow_runs/filter`: an array of flow runs.
    public static func list(prefect json: JSONValue) -> [RunDetails] {
        (json.array ?? []).compactMap { RunDetails(prefect: $0) }
    }
}

extension InputRow {
    public init?(prefect json: JSONValue) {
        guard let key = json["key"]?.string, let value = json["value"]?.string else { return nil }
        self.init(key: key, value: value)
    }

    /// `POST /flow_runs/{id}/input/filter`: an array of rows.
    public static func list(prefect json: JSONValue) -> [InputRow] {
        (json.array ?? []).compactMap { InputRow(prefect: $0) }
    }
}

extension RunArtifact {
    public init?(prefect json: JSONValue) {
        guard json.object != nil else { return nil }
        self.init(key: json["key"]?.string, type: json["type"]?.string, description: json["description"]?.string,
                  data: json["data"] ?? .null, created: json["created"]?.string)
    }

    /// A keyed artifact from Prefect's `prefect.artifact-collection.created|updated` event (payload: key, type, data,
    /// description; the run is the related `flow-run`), with the run it belongs to.
    public static func fromCollectionEvent(_ event: PrefectEvent) -> (runID: String, artifact: RunArtifact)? {
        let runPrefix = "prefect.flow-run."
        guard event.resourceID.hasPrefix("prefect.artifact-collection."), let key = event.payload["key"]?.string,
              let run = event.related(role: "flow-run"), run.id.hasPrefix(runPrefix), run.id.count > runPrefix.count
        else { return nil }
        let artifact = RunArtifact(key: key, type: event.payload["type"]?.string,
                                   description: event.payload["description"]?.string,
                                   data: event.payload["data"] ?? .null, created: Timestamp.format(event.occurred))
        return (String(run.id.dropFirst(runPrefix.count)), artifact)
    }

    /// `POST /artifacts/filter`: an array of artifacts.
    public static func list(prefect json: JSONValue) -> [RunArtifact] {
        (json.array ?? []).compactMap { RunArtifact(prefect: $0) }
    }
}

extension RunEvent {
    /// One event object; also accepts the websocket wrapper `{"type":"event","event":{…}}`.
    public init?(prefect json: JSONValue) {
        if json["type"]?.string == "event", let inner = json["event"] {
            self.init(prefect: inner)
            return
        }
        guard let name = json["event"]?.string else { return nil }
        let related = (json["related"]?.array ?? []).compactMap { $0["prefect.resource.id"]?.string }
        self.init(id: json["id"]?.string, name: name, occurred: json["occurred"]?.string,
                  resourceID: json["resource"]?["prefect.resource.id"]?.string, relatedIDs: related,
                  payload: json["payload"] ?? .object([:]))
    }

    /// `POST /events/filter` (`{"events":[…],"total","next_page"}`), or a bare array of events.
    public static func list(prefect json: JSONValue) -> [RunEvent] {
        (json["events"]?.array ?? json.array ?? []).compactMap { RunEvent(prefect: $0) }
    }
}

extension String {
    var capitalizedFirst: String {
        guard let first else { return self }
        return first.uppercased() + dropFirst().lowercased()
    }
}
