/// The parts of Prefect's REST and event JSON that decide what a phone is told about a pause, as plain
/// values. Parsers from `JSONValue` live in `PrefectRecords+Parsing.swift`; `Tests/RelayTests/Fixtures/prefect`
/// holds the JSON they read, captured from a real server.

/// Which input rows belong to a pause: `state_details.run_input_keyset`, e.g. `paused-1-schema`.
public struct InputKeyset: Sendable, Equatable {
    public var schema: String?
    public var description: String?
    public var response: String?

    public init(schema: String?, description: String?, response: String?) {
        self.schema = schema
        self.description = description
        self.response = response
    }
}

/// A flow run's current state, with the pause details the relay needs.
public struct RunState: Sendable, Equatable {
    /// The state id; a pause is keyed by it, and it equals the Paused event's id.
    public var id: String
    /// `PAUSED`, `RUNNING`, …
    public var type: String
    /// `Paused`, `Suspended`, or a custom name.
    public var name: String
    /// ISO-8601, as Prefect wrote it.
    public var timestamp: String?
    /// `state_details.pause_timeout`: absolute ISO-8601 time, nil for a suspend without a timeout.
    public var pauseTimeout: String?
    /// `state_details.pause_reschedule`: true for a suspend.
    public var pauseReschedule: Bool
    /// nil when nothing is waited for.
    public var runInputKeyset: InputKeyset?

    public init(id: String, type: String, name: String, timestamp: String? = nil, pauseTimeout: String? = nil,
                pauseReschedule: Bool = false, runInputKeyset: InputKeyset? = nil) {
        self.id = id
        self.type = type
        self.name = name
        self.timestamp = timestamp
        self.pauseTimeout = pauseTimeout
        self.pauseReschedule = pauseReschedule
        self.runInputKeyset = runInputKeyset
    }

    public var isPaused: Bool { type == "PAUSED" }
    /// A suspend (the run's process exits and re-runs on resume) rather than a blocking pause.
    public var isSuspended: Bool { name == "Suspended" || pauseReschedule }
    public var waitingSince: Int64? { Timestamp.unixSeconds(timestamp) }
    public var timeoutAt: Int64? { Timestamp.unixSeconds(pauseTimeout) }
}

/// A flow run (`GET /flow_runs/{id}`, or one item of `POST /flow_runs/filter`).
public struct RunDetails: Sendable, Equatable {
    public var id: String
    public var name: String
    public var flowID: String?
    public var state: RunState?
    /// The run's parameters as Prefect stores them (an object; values of any JSON type).
    public var parameters: [String: JSONValue]

    public init(id: String, name: String, flowID: String? = nil, state: RunState?,
                parameters: [String: JSONValue] = [:]) {
        self.id = id
        self.name = name
        self.flowID = flowID
        self.state = state
        self.parameters = parameters
    }

    /// `prefect.flow-run.<id>`: how events name this run.
    public var resourceID: String { "prefect.flow-run." + id }
}

/// One row of `POST /flow_runs/{id}/input/filter`. `value` is JSON *text*: the schema row holds a JSON
/// schema object, the description row a JSON string literal of markdown. Rows may hold anything.
public struct InputRow: Sendable, Equatable {
    public var key: String
    public var value: String

    public init(key: String, value: String) {
        self.key = key
        self.value = value
    }
}

/// One artifact of the run (`POST /artifacts/filter`). `data` is a string for markdown and link artifacts,
/// JSON text for tables, a number for progress.
public struct RunArtifact: Sendable, Equatable {
    public var key: String?
    public var type: String?
    public var description: String?
    public var data: JSONValue
    public var created: String?

    public init(key: String?, type: String?, description: String?, data: JSONValue, created: String? = nil) {
        self.key = key
        self.type = type
        self.description = description
        self.data = data
        self.created = created
    }
}

/// One Prefect event (`/events/filter` item or the `event` of a websocket message).
public struct RunEvent: Sendable, Equatable {
    public var id: String?
    /// The event name, e.g. `prefect.flow-run.Paused`, `work.waiting`, `relay.approval.requested`.
    public var name: String
    public var occurred: String?
    /// The primary resource's `prefect.resource.id`.
    public var resourceID: String?
    /// Every related resource's `prefect.resource.id`.
    public var relatedIDs: [String]
    public var payload: JSONValue

    public init(id: String? = nil, name: String, occurred: String?, resourceID: String?, relatedIDs: [String] = [],
                payload: JSONValue = .object([:])) {
        self.id = id
        self.name = name
        self.occurred = occurred
        self.resourceID = resourceID
        self.relatedIDs = relatedIDs
        self.payload = payload
    }

    /// True when the event's primary or a related resource is `resourceID`.
    public func names(_ resourceID: String) -> Bool {
        self.resourceID == resourceID || relatedIDs.contains(resourceID)
    }
}

/// Everything gathered about one pause: what `AlertText` reads.
public struct PauseContext: Sendable, Equatable {
    public var run: RunDetails
    public var flowName: String?
    public var inputRows: [InputRow]
    public var artifacts: [RunArtifact]
    public var events: [RunEvent]

    public init(run: RunDetails, flowName: String?, inputRows: [InputRow] = [], artifacts: [RunArtifact] = [],
                events: [RunEvent] = []) {
        self.run = run
        self.flowName = flowName
        self.inputRows = inputRows
        self.artifacts = artifacts
        self.events = events
    }
}
