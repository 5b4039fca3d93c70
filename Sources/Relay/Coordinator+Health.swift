import RelayCore

/// `/health`, `/health/live` and the health half of `/metrics`: the relay's live state judged by `HealthVerdict`,
/// and the store's failure streak it is judged on (every `store.failed` line counts; a write that works ends it).
extension Coordinator {
    /// While store writes fail, a write is tried this often on its own (`Store.probeWrite`): an idle relay has no
    /// writes of its own to show that the store works again.
    static let storeProbeInterval: Double = 5

    func healthSnapshot() -> HealthSnapshot {
        var snapshot = HealthSnapshot(now: SystemClock.monotonic(), socketDownSince: subscribed ? nil : socketDownSince)
        snapshot.credentialRefused = authRejected
        snapshot.storeLost = !store.fileIsStillOurs
        snapshot.store = storeStreak
        snapshot.apnsConfigured = apnsConfigured
        snapshot.apns = APNsConnection.reachability.withLock { $0 }
        return snapshot
    }

    func verdict() -> HealthVerdict { HealthVerdict(healthSnapshot(), bounds: healthBounds) }

    /// The readiness answer: the seed's fields, `ok` from the verdict (503 when false) and `problems`, one line each.
    func health() -> APIResponse {
        let verdict = verdict()
        let devices: Int
        do { devices = try store.deviceCount() } catch {
            storeFailed(["action": "health", "error": "\(error)"])
            devices = 0
        }
        let json: JSONValue = [
            "ok": .bool(verdict.ok), "subscribed": .bool(subscribed), "apns": .bool(apnsConfigured),
            "devices": .int(Int64(devices)), "waiting": .int(Int64(watcher.waitingCount)),
            // true while Prefect refuses the socket's credential (the log's events.auth_rejected says why)
            "auth_rejected": .bool(authRejected),
            "problems": .array(verdict.problems.map { .string("\($0.check.rawValue): \($0.reason)") }),
        ]
        return APIResponse(status: verdict.status, json: json)
    }

    /// Liveness: answering at all means the relay's one executor thread and this actor are not stuck.
    func live() -> APIResponse { APIResponse(status: 200, json: ["ok": true]) }

    /// Every tick: a store probe while writes fail, and one log line when the verdict changes.
    func watchHealth() {
        let time = SystemClock.monotonic()
        if storeStreak.isFailing, time - lastStoreProbe >= Coordinator.storeProbeInterval {
            lastStoreProbe = time
            do {
                try store.probeWrite()
                storeWrote()
            } catch {
                storeFailed(["action": "probe", "error": "\(error)"])
            }
        }
        let verdict = verdict()
        guard verdict.ok != wasHealthy else { return }
        wasHealthy = verdict.ok
        if verdict.ok {
            Log.info("health.recovered")
        } else {
            Log.warn("health.failing", ["checks": verdict.problems.map(\.check.rawValue).joined(separator: ","),
                                        "reason": verdict.problems.map(\.reason).joined(separator: "; ")])
        }
    }

    /// A store read or write failed: one `store.failed` line, counted, and the failure streak goes on.
    func storeFailed(level: Config.LogLevel = .error, _ fields: KeyValuePairs<String, String>) {
        Log.emit(level, "store.failed", fields)
        metrics.storeErrors += 1
        let error = fields.first { $0.key == "error" }?.value ?? "unknown"
        storeStreak.failed(at: SystemClock.monotonic(), error: error)
    }

    /// A store write committed: the streak, if any, is over.
    func storeWrote() {
        if storeStreak.isFailing { Log.info("store.recovered", ["failures": String(storeStreak.count)]) }
        storeStreak.succeeded()
    }

    func metricsText() -> String {
        var metrics = self.metrics
        metrics.apnsConnectionsOpened = APNsConnection.linksOpenedTotal
        metrics.prefectConnectionsOpened = HTTPPool.connectionsOpenedTotal
        metrics.prefectReadsStalled = HTTPPool.readsStalledTotal
        metrics.prefectReadsAbandoned = HTTPPool.readsAbandonedTotal
        metrics.prefectReadsInFlight = HTTPPool.readsInFlight
        (metrics.buildVersion, metrics.buildCommit) = (BuildInfo.version, BuildInfo.commit)
        do {
            metrics.outboxPending = try store.outboxCount()
            metrics.oldestPendingSeconds = try store.oldestPendingMs().map { max(0, now() - Double($0) / 1000) } ?? 0
        } catch {
            storeFailed(["action": "metrics", "error": "\(error)"])
        }
        let verdict = verdict()
        metrics.healthy = verdict.ok
        metrics.storeFailing = verdict.failing(.store)
        metrics.credentialRejected = authRejected
        metrics.apnsUnreachable = verdict.failing(.apns)
        metrics.process = ProcessStatus.sample()
        return metrics.render(devices: (try? store.deviceCount()) ?? 0, waiting: watcher.waitingCount,
                              residentBytes: ProcessStatus.residentBytes())
    }
}
