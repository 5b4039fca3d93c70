/// A flow run as the PauseWatcher needs it: an item of `POST /flow_runs/filter` (the paused listing) or the body of
/// `GET /flow_runs/{id}` (the same object), with its state's times as unix seconds. Read through `RunDetails`,
/// the one parser of Prefect's flow-run JSON (the alert text wants more of it than the PauseWatcher does).
public struct FlowRun: Sendable, Equatable {
    public var id: String
    public var name: String?
    public var flowID: String?
    /// `state.id`; for a pause this equals the id of the event that reported it.
    public var stateID: String
    public var stateType: String
    public var stateName: String
    /// `state.timestamp`, unix seconds.
    public var stateTimestamp: Double
    /// `state.state_details.pause_timeout`, unix seconds; `nil` for a suspend without a timeout.
    public var pauseTimeout: Double?

    public init(id: String, name: String? = nil, flowID: String? = nil, stateID: String, stateType: String,
                stateName: String, stateTimestamp: Double, pauseTimeout: Double? = nil) {
        self.id = id
        self.name = name
        self.flowID = flowID
        self.stateID = stateID
        self.stateType = stateType
        self.stateName = stateName
        self.stateTimestamp = stateTimestamp
        self.pauseTimeout = pauseTimeout
    }

    public var isPaused: Bool { stateType == "PAUSED" }

    /// The PauseWatcher's view of a parsed run; `nil` when it lacks an id or a usable state.
    public init?(details: RunDetails) {
        guard !details.id.isEmpty, let state = details.state, !state.id.isEmpty,
              let timestamp = state.timestamp.flatMap(Timestamp.parse) else { return nil }
        self.init(id: details.id, name: details.name.isEmpty ? nil : details.name, flowID: details.flowID,
                  stateID: state.id, stateType: state.type, stateName: state.name, stateTimestamp: timestamp,
                  pauseTimeout: state.pauseTimeout.flatMap(Timestamp.parse))
    }

    /// Reads one flow run object.
    public init?(json: JSONValue) {
        guard let details = RunDetails(prefect: json) else { return nil }
        self.init(details: details)
    }

    /// Reads a `POST /flow_runs/filter` answer (a JSON array); items that cannot be read are skipped.
    public static func list(json: JSONValue) -> [FlowRun] {
        (json.array ?? []).compactMap { FlowRun(json: $0) }
    }
}
