import RelayCore

/// `/health`, `/health/live` and `/metrics`: the owners' live state gathered (one hop to each), judged by
/// `HealthVerdict`; and, every tick, one log line when the verdict changes.
final class RelayStatus: Sendable {
    let tracker: PauseTracker
    let ledger: Ledger
    let outbox: OutboxSender
    let apnsConfigured: Bool
    let bounds: HealthBounds
    /// The relay's REST pools (Prefect's reads, the API's credential checks), whose counts `/metrics` adds up.
    let restPools: [HTTPPool]
    /// When the relay started (monotonic seconds): made with the owners, before the events socket can connect.
    let startedAt = SystemClock.monotonic()
    /// The last verdict `watch` logged; the relay starts healthy.
    private let wasHealthy = Locked(true)
    /// API answers by route and code, counted by the API's servers (on their loop threads) as each answer goes out.
    let requests = Locked(RequestCounts())

    init(tracker: PauseTracker, ledger: Ledger, outbox: OutboxSender, apnsConfigured: Bool,
         bounds: HealthBounds = HealthBounds(), restPools: [HTTPPool] = []) {
        (self.tracker, self.ledger, self.outbox) = (tracker, ledger, outbox)
        self.restPools = restPools
        self.apnsConfigured = apnsConfigured
        self.bounds = bounds
    }

    private struct Gathered {
        var verdict: HealthVerdict
        var events: PauseTracker.Status
        var store: Ledger.Health
    }

    private func gather(countingDevices: Bool = true) async -> Gathered {
        let events = await tracker.status()
        let store = await ledger.health(countingDevices: countingDevices)
        var snapshot = HealthSnapshot(now: SystemClock.monotonic(), socketDownSince: events.subscribed ? nil : events.socketDownSince)
        // The tracker moves `socketDownSince` only when a subscribed socket drops, so a value from before this
        // status existed means the socket has never been subscribed.
        let everSubscribed = events.subscribed || events.socketDownSince > startedAt
        snapshot.neverSubscribedSince = everSubscribed ? nil : startedAt
        snapshot.credentialRefused = events.authRejected
        snapshot.storeLost = !store.fileIsStillOurs
        snapshot.store = store.streak
        snapshot.apnsConfigured = apnsConfigured
        snapshot.apns = outbox.apns?.reachability() ?? [:]
        return Gathered(verdict: HealthVerdict(snapshot, bounds: bounds), events: events, store: store)
    }

    /// The readiness answer: the seed's fields, `ok` from the verdict (503 when false) and `problems`, one line each.
    func health() async -> APIResponse {
        let now = await gather()
        let json: JSONValue = [
            "ok": .bool(now.verdict.ok), "subscribed": .bool(now.events.subscribed), "apns": .bool(apnsConfigured),
            "devices": .int(Int64(now.store.devices ?? 0)), "waiting": .int(Int64(now.events.waiting)),
            // true while Prefect refuses the socket's credential (the log's events.auth_rejected says why)
            "auth_rejected": .bool(now.events.authRejected),
            "problems": .array(now.verdict.problems.map { .string("\($0.check.rawValue): \($0.reason)") }),
        ]
        return APIResponse(status: now.verdict.status, json: json)
    }

    /// Liveness: the relay's executor thread ran a job for it, so the pause path is not stuck.
    func live() async -> APIResponse {
        _ = await tracker.status()
        return APIResponse(status: 200, json: ["ok": true])
    }

    /// Every tick: a store probe while writes fail, and one log line when the verdict changes.
    func watch() async {
        await ledger.probeIfFailing()
        let verdict = await gather(countingDevices: false).verdict
        let changed = wasHealthy.withLock { was in
            defer { was = verdict.ok }
            return was != verdict.ok
        }
        guard changed else { return }
        if verdict.ok {
            Log.info("health.recovered")
        } else {
            Log.warn("health.failing", ["checks": verdict.problems.map(\.check.rawValue).joined(separator: ","),
                                        "reason": verdict.problems.map(\.reason).joined(separator: "; ")])
        }
    }

    func metricsText() async -> String {
        let now = await gather()
        let pending = await outbox.pending()
        var metrics = now.events.counts
        metrics.apnsConnectionsOpened = outbox.apns?.linksOpened ?? 0
        let rest = restPools.map(\.counts.snapshot)
        metrics.prefectConnectionsOpened = rest.reduce(0) { $0 + $1.opened }
        metrics.prefectReadsStalled = rest.reduce(0) { $0 + $1.stalled }
        metrics.prefectReadsAbandoned = rest.reduce(0) { $0 + $1.abandoned }
        metrics.prefectReadsInFlight = rest.reduce(0) { $0 + $1.inFlight }
        (metrics.buildVersion, metrics.buildCommit) = (BuildInfo.version, BuildInfo.commit)
        if let pending { (metrics.outboxPending, metrics.oldestPendingSeconds) = pending }
        metrics.healthy = now.verdict.ok
        metrics.apnsConfigured = apnsConfigured
        metrics.httpRequests = requests.withLock { $0 }
        metrics.storeFailing = now.verdict.failing(.store)
        metrics.credentialRejected = now.events.authRejected
        metrics.apnsUnreachable = now.verdict.failing(.apns)
        metrics.process = ProcessStatus.sample()
        metrics.storeCacheBytes = now.store.cacheBytes
        metrics.heapInUseBytes = Allocator.inUseBytes()
        return metrics.render(devices: now.store.devices ?? 0, waiting: now.events.waiting,
                              residentBytes: ProcessStatus.residentBytes())
    }
}
