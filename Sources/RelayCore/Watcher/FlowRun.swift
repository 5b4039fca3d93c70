/// A flow run as REST returns it: an item of `POST /flow_runs/filter` (the paused listing) or the body of
/// `GET /flow_runs/{id}` (the same object). Only what the Watcher and the alert need is kept.
public struct FlowRun: Sendable, Equatable {
    public var id: String
    public var name: String?
    public var flowID: String?
    public var deploymentID: String?
    /// `state.id`; for a pause this equals the id of the event that reported it.
    public var stateID: String
    public var stateType: String
    public var stateName: String
    /// `state.timestamp`, unix seconds.
    public var stateTimestamp: Double
    /// `state.state_details.pause_timeout`, unix seconds; `nil` for a suspend without a timeout.
    public var pauseTimeout: Double?
    public var pauseKey: String?
    /// `state.state_details.run_input_keyset` (`schema`, `description`, `response` → input keys), if any.
    public var runInputKeyset: [String: String]?

    public init(id: String, name: String? = nil, flowID: String? = nil, deploymentID: String? = nil,
                stateID: String, stateType: String, stateName: String, stateTimestamp: Double,
                pauseTimeout: Double? = nil, pauseKey: String? = nil, runInputKeyset: [String: String]? = nil) {
        self.id = id
        self.name = name
        self.flowID = flowID
        self.deploymentID = deploymentID
        self.stateID = stateID
        self.stateType = stateType
        self.stateName = stateName
        self.stateTimestamp = stateTimestamp
        self.pauseTimeout = pauseTimeout
        self.pauseKey = pauseKey
        self.runInputKeyset = runInputKeyset
    }

    public var isPaused: Bool { stateType == "PAUSED" }

    /// Reads one flow run object; `nil` when it lacks an id or a usable state.
    public init?(json: JSONValue) {
        guard let id = json["id"]?.string, !id.isEmpty,
              let state = json["state"], state.object != nil,
              let stateID = state["id"]?.string ?? json["state_id"]?.string, !stateID.isEmpty,
              let type = state["type"]?.string ?? json["state_type"]?.string,
              let timestampText = state["timestamp"]?.string, let timestamp = Timestamp.parse(timestampText)
        else { return nil }
        let details = state["state_details"]
        var keyset: [String: String]?
        if let object = details?["run_input_keyset"]?.object {
            keyset = object.compactMapValues { $0.string }
        }
        self.init(id: id, name: json["name"]?.string, flowID: json["flow_id"]?.string,
                  deploymentID: json["deployment_id"]?.string, stateID: stateID, stateType: type,
                  stateName: state["name"]?.string ?? json["state_name"]?.string ?? type.capitalizedState,
                  stateTimestamp: timestamp,
                  pauseTimeout: details?["pause_timeout"]?.string.flatMap(Timestamp.parse),
                  pauseKey: details?["pause_key"]?.string, runInputKeyset: keyset)
    }

    /// Reads a `POST /flow_runs/filter` answer (a JSON array); items that cannot be read are skipped.
    public static func list(json: JSONValue) -> [FlowRun] {
        (json.array ?? []).compactMap { FlowRun(json: $0) }
    }
}

/// The paused listing's items are plain flow runs; the name says which list they came from.
public typealias PausedRun = FlowRun

fileprivate extension String {
    /// `PAUSED` → `Paused`: a fallback name for a state that came without one.
    var capitalizedState: String { prefix(1).uppercased() + dropFirst().lowercased() }
}
