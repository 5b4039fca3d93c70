/// Custom events seen live on the socket that name a flow run (e.g. `work.waiting`, `relay.approval.requested`),
/// kept briefly so an alert can use one without waiting for Prefect to persist it (events reach `/events/filter`
/// only after the server's flush, seconds later). Bounded: the newest `perRun` events of the last `runs` runs.
public struct RecentRunEvents: Sendable {
    public let runs: Int
    public let perRun: Int
    private var events: [String: [RunEvent]] = [:]
    private var order: [String] = []

    public init(runs: Int = 256, perRun: Int = 8) {
        self.runs = runs
        self.perRun = perRun
    }

    /// Remembers `event` for `runID` (events without a string `payload.body` or title are not worth keeping).
    /// Returns whether it was kept: an event that can give an alert its context.
    @discardableResult
    public mutating func add(_ event: RunEvent, runID: String) -> Bool {
        guard event.payload["body"]?.string != nil || event.payload["title"]?.string != nil else { return false }
        if events[runID] == nil {
            order.append(runID)
            if order.count > runs { events[order.removeFirst()] = nil }
        }
        var list = events[runID, default: []]
        if let id = event.id, list.contains(where: { $0.id == id }) { return false }
        list.append(event)
        if list.count > perRun { list.removeFirst(list.count - perRun) }
        events[runID] = list
        return true
    }

    public func events(for runID: String) -> [RunEvent] { events[runID] ?? [] }
}
