/// The Live Activity's props and the one description of a waiting run that every push is built from
/// (`docs/payloads.md` §5 publishes it). The app declares the same shape. Optional fields are
/// omitted from the JSON, never `null`.
public struct WaitingProps: Sendable, Equatable {
    public var runId: String
    public var runName: String
    public var flowName: String
    /// The saved server on the phone this run belongs to: the device's `server_id`, so per device.
    public var serverId: String
    public var title: String
    public var body: String
    /// `waiting-reply`, `waiting-input` or `waiting` (the alert's `aps.category`).
    public var category: String
    /// `Paused` or `Suspended`.
    public var stateName: String
    /// When the pause began: the PAUSED state's timestamp, unix seconds.
    public var waitingSince: Int64
    /// When the pause times out (`pause_timeout`), unix seconds; nil for a suspend without a timeout.
    public var timeoutAt: Int64?
    /// The run in the Prefect UI: `<PREFECT_UI_URL>/runs/flow-run/<run id>`.
    public var url: String
    /// Set only on the end push: the name of the state the run moved to (`Running`, `Cancelled`, …).
    public var ended: String?

    public init(runId: String, runName: String, flowName: String, serverId: String, title: String, body: String,
                category: String, stateName: String, waitingSince: Int64, timeoutAt: Int64?, url: String,
                ended: String? = nil) {
        self.runId = runId
        self.runName = runName
        self.flowName = flowName
        self.serverId = serverId
        self.title = title
        self.body = body
        self.category = category
        self.stateName = stateName
        self.waitingSince = waitingSince
        self.timeoutAt = timeoutAt
        self.url = url
        self.ended = ended
    }

    /// The props for one pause: `text` (from `AlertText`) about `run`, for a device whose saved server is
    /// `serverId`. `uiRoot` is `Config.prefectUI`. Nil when the run is not in a PAUSED state.
    public init?(run: RunDetails, flowName: String?, text: AlertText, serverId: String, uiRoot: String) {
        guard let state = run.state, state.isPaused else { return nil }
        self.init(
            runId: run.id,
            runName: AlertText.line(run.name, AlertText.maxSubtitleCharacters) ?? "",
            flowName: AlertText.line(flowName, AlertText.maxSubtitleCharacters) ?? "",
            serverId: serverId, title: text.title, body: text.body, category: text.category.rawValue,
            stateName: state.isSuspended ? "Suspended" : "Paused",
            waitingSince: state.waitingSince ?? 0, timeoutAt: state.timeoutAt,
            url: WaitingProps.runURL(uiRoot: uiRoot, runId: run.id))
    }

    /// The same props for another device: only `serverId` differs between a pause's devices, so props can be
    /// built (or stored, via `encoded()` / `init?(json:)`) once per pause and specialised per device.
    public func forDevice(serverId: String) -> WaitingProps {
        var copy = self
        copy.serverId = serverId
        return copy
    }

    /// `<ui root>/runs/flow-run/<run id>`, with one slash between the parts.
    public static func runURL(uiRoot: String, runId: String) -> String {
        var root = uiRoot
        while root.hasSuffix("/") { root.removeLast() }
        return root + "/runs/flow-run/" + runId
    }

    // MARK: - JSON

    public var json: JSONValue {
        var members: [String: JSONValue] = [
            "runId": .string(runId), "runName": .string(runName), "flowName": .string(flowName),
            "serverId": .string(serverId), "title": .string(title), "body": .string(body),
            "category": .string(category), "stateName": .string(stateName), "waitingSince": .int(waitingSince),
            "url": .string(url),
        ]
        if let timeoutAt { members["timeoutAt"] = .int(timeoutAt) }
        if let ended { members["ended"] = .string(ended) }
        return .object(members)
    }

    /// The props as the JSON *string* the content state carries.
    public func encoded() -> String { json.encoded() }

    /// Reads props back (e.g. as stored for the end push); nil when a required field is missing.
    public init?(json: JSONValue) {
        guard let runId = json["runId"]?.string, let runName = json["runName"]?.string,
              let flowName = json["flowName"]?.string, let serverId = json["serverId"]?.string,
              let title = json["title"]?.string, let body = json["body"]?.string,
              let category = json["category"]?.string, let stateName = json["stateName"]?.string,
              let waitingSince = json["waitingSince"]?.int, let url = json["url"]?.string
        else { return nil }
        self.init(runId: runId, runName: runName, flowName: flowName, serverId: serverId, title: title, body: body,
                  category: category, stateName: stateName, waitingSince: waitingSince,
                  timeoutAt: json["timeoutAt"]?.int, url: url, ended: json["ended"]?.string)
    }
}
