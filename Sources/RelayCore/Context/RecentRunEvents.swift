/// What the events socket tells about recent flow runs, so an alert need not wait for Prefect to persist it (events
/// reach `/events/filter` only after the server's flush, seconds later) or ask for it at all:
/// - custom events that name a run (e.g. `work.waiting`, `relay.approval.requested`) with a string body or title;
/// - keyed artifacts created for a run (Prefect's `prefect.artifact-collection.*` events carry key, type, data and
///   description);
/// - which runs it has *followed*: runs seen in an earlier state (scheduled, pending, running) during the current
///   subscription. For those, everything the socket could say about the run since has been said, so the alert's
///   history reads (`/events/filter`, `/artifacts/filter`) add nothing and are skipped.
/// Bounded: the newest `perRun` events and artifacts of the last `runs` runs; a run forgotten is no longer followed.
public struct RecentRunEvents: Sendable {
    public let runs: Int
    public let perRun: Int
    private var events: [String: [RunEvent]] = [:]
    private var artifacts: [String: [RunArtifact]] = [:]
    private var followed: Set<String> = []
    /// How many events and artifacts each run has been given, so a waiter can tell that something came.
    private var arrivals: [String: Int] = [:]
    /// Runs with an entry (in `events`, possibly empty), oldest first, for eviction.
    private var order: [String] = []

    public init(runs: Int = 1024, perRun: Int = 8) {
        self.runs = runs
        self.perRun = perRun
    }

    /// Remembers `event` for `runID` (events without a string `payload.body` or title are not worth keeping).
    /// Returns whether it was kept: an event that can give an alert its context.
    @discardableResult
    public mutating func add(_ event: RunEvent, runID: String) -> Bool {
        guard event.payload["body"]?.string != nil || event.payload["title"]?.string != nil else { return false }
        enter(runID)
        var list = events[runID, default: []]
        if let id = event.id, list.contains(where: { $0.id == id }) { return false }
        list.append(event)
        if list.count > perRun { list.removeFirst(list.count - perRun) }
        events[runID] = list
        arrivals[runID, default: 0] += 1
        return true
    }

    /// Remembers an artifact created for `runID` (newest last).
    public mutating func add(_ artifact: RunArtifact, runID: String) {
        enter(runID)
        var list = artifacts[runID, default: []]
        list.append(artifact)
        if list.count > perRun { list.removeFirst(list.count - perRun) }
        artifacts[runID] = list
        arrivals[runID, default: 0] += 1
    }

    /// The run was seen in a state before any pause, on this subscription: from here on the socket tells all.
    public mutating func follow(_ runID: String) {
        enter(runID)
        followed.insert(runID)
    }

    /// The socket dropped: what happens until the next subscribe's backfill may be missed, so no run is followed.
    public mutating func stopFollowing() { followed.removeAll() }

    /// Whether the socket has told everything about the run's history (see the type's comment).
    public func follows(_ runID: String) -> Bool { followed.contains(runID) }

    public func events(for runID: String) -> [RunEvent] { events[runID] ?? [] }

    /// How many events and artifacts have been kept for the run so far (it only grows while the run is kept, even
    /// once its oldest entries are dropped), so a change says that something new came.
    public func arrivals(for runID: String) -> Int { arrivals[runID] ?? 0 }

    /// Newest first, as `/artifacts/filter` answers.
    public func artifacts(for runID: String) -> [RunArtifact] { (artifacts[runID] ?? []).reversed() }

    private mutating func enter(_ runID: String) {
        guard events[runID] == nil else { return }
        events[runID] = []
        order.append(runID)
        guard order.count > runs else { return }
        let evicted = order.removeFirst()
        events[evicted] = nil
        artifacts[evicted] = nil
        arrivals[evicted] = nil
        followed.remove(evicted)
    }
}
