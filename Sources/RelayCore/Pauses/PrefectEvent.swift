/// One event from Prefect's `/api/events/out` socket (`src/prefect/server/api/events.py`), read into plain values.
///
/// Every event has an id, a name, an `occurred` time and a primary resource. Flow-run state changes
/// (`prefect.flow-run.<state name>`) also carry the new state in the resource labels; those become a
/// `StateEvent`. Anything else, such as a flow's own `relay.approval.requested`, stays a `PrefectEvent`
/// for the context reader, with its payload kept as JSON.
public struct PrefectEvent: Sendable, Equatable {
    /// A resource the event names besides its primary one (`related`): the flow, deployment, tags, ...
    public struct Related: Sendable, Equatable {
        public var id: String
        public var role: String?
        public var name: String?

        public init(id: String, role: String?, name: String?) {
            self.id = id
            self.role = role
            self.name = name
        }
    }

    public var id: String
    public var name: String
    /// Unix seconds.
    public var occurred: Double
    /// `resource["prefect.resource.id"]`, e.g. `prefect.flow-run.<uuid>`.
    public var resourceID: String
    public var resourceName: String?
    /// Every primary-resource label as sent (all strings on Prefect's side).
    public var resource: [String: String]
    public var related: [Related]
    public var payload: JSONValue
    public var follows: String?

    public init(id: String, name: String, occurred: Double, resourceID: String, resourceName: String? = nil,
                resource: [String: String] = [:], related: [Related] = [], payload: JSONValue = [:],
                follows: String? = nil) {
        self.id = id
        self.name = name
        self.occurred = occurred
        self.resourceID = resourceID
        self.resourceName = resourceName
        self.resource = resource
        self.related = related
        self.payload = payload
        self.follows = follows
    }

    static let flowRunPrefix = "prefect.flow-run."

    /// The flow run this event is about, when its primary resource is one.
    public var runID: String? {
        guard resourceID.hasPrefix(Self.flowRunPrefix) else { return nil }
        let id = String(resourceID.dropFirst(Self.flowRunPrefix.count))
        return id.isEmpty ? nil : id
    }

    /// The first related resource with this role (`flow`, `deployment`, ...).
    public func related(role: String) -> Related? {
        related.first { $0.role == role }
    }

    /// The state change this event reports, if it is a flow-run state event.
    public var stateEvent: StateEvent? { StateEvent(self) }

    // MARK: - Parsing

    /// Reads one event object (as in the socket's `event`, or `/events/filter`'s `events[]`).
    public init?(json: JSONValue) {
        guard let id = json["id"]?.string, !id.isEmpty,
              let name = json["event"]?.string,
              let occurredText = json["occurred"]?.string, let occurred = Timestamp.parse(occurredText),
              let resourceObject = json["resource"]?.object,
              let resourceID = resourceObject["prefect.resource.id"]?.string
        else { return nil }

        var labels: [String: String] = [:]
        for (key, value) in resourceObject {
            if let text = value.string { labels[key] = text }
        }
        var related: [Related] = []
        for item in json["related"]?.array ?? [] {
            guard let relatedID = item["prefect.resource.id"]?.string else { continue }
            related.append(Related(id: relatedID, role: item["prefect.resource.role"]?.string,
                                   name: item["prefect.resource.name"]?.string))
        }
        self.init(id: id, name: name, occurred: occurred, resourceID: resourceID,
                  resourceName: labels["prefect.resource.name"], resource: labels, related: related,
                  payload: json["payload"] ?? .null, follows: json["follows"]?.string)
    }
}

/// A flow run entering a new state, as the PauseWatcher needs it. In Prefect 3 the event id is the new
/// state's id, so `stateID` is the key a pause is stored under.
public struct StateEvent: Sendable, Equatable {
    /// The event id, which is the new state's id.
    public var stateID: String
    public var runID: String
    public var runName: String?
    /// `prefect.state-type`: `PAUSED`, `RUNNING`, `SCHEDULED`, `CANCELLED`, ...
    public var stateType: String
    /// `prefect.state-name`: `Paused`, `Suspended`, `Running`, `Resuming`, a custom name, ...
    public var stateName: String
    /// `prefect.state-timestamp` (unix seconds); the same instant as `occurred` in practice.
    public var stateTimestamp: Double
    public var occurred: Double
    /// The previous state's id, when that state was under five minutes old (Prefect leaves it out otherwise).
    public var follows: String?
    public var flowID: String?
    public var flowName: String?
    public var deploymentID: String?

    public init(stateID: String, runID: String, runName: String? = nil, stateType: String, stateName: String,
                stateTimestamp: Double, occurred: Double? = nil, follows: String? = nil, flowID: String? = nil,
                flowName: String? = nil, deploymentID: String? = nil) {
        self.stateID = stateID
        self.runID = runID
        self.runName = runName
        self.stateType = stateType
        self.stateName = stateName
        self.stateTimestamp = stateTimestamp
        self.occurred = occurred ?? stateTimestamp
        self.follows = follows
        self.flowID = flowID
        self.flowName = flowName
        self.deploymentID = deploymentID
    }

    public var isPaused: Bool { stateType == "PAUSED" }

    /// A flow-run state event, or `nil` for other events (custom ones, heartbeats, other resources).
    public init?(_ event: PrefectEvent) {
        guard let runID = event.runID,
              let type = event.resource["prefect.state-type"], !type.isEmpty
        else { return nil }
        let name = event.resource["prefect.state-name"].flatMap { $0.isEmpty ? nil : $0 }
            ?? String(event.name.dropFirst(PrefectEvent.flowRunPrefix.count))
        let timestamp = event.resource["prefect.state-timestamp"].flatMap(Timestamp.parse) ?? event.occurred
        let flow = event.related(role: "flow")
        self.init(stateID: event.id, runID: runID, runName: event.resourceName, stateType: type, stateName: name,
                  stateTimestamp: timestamp, occurred: event.occurred, follows: event.follows,
                  flowID: flow.map { $0.id.removingPrefix("prefect.flow.") }, flowName: flow?.name,
                  deploymentID: event.related(role: "deployment").map { $0.id.removingPrefix("prefect.deployment.") })
    }
}

fileprivate extension String {
    /// The string without `prefix` when it starts with it, else unchanged.
    func removingPrefix(_ prefix: String) -> String {
        hasPrefix(prefix) ? String(dropFirst(prefix.count)) : self
    }
}
