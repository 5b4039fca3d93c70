/// The relay's counters and the event→APNs latency histogram, rendered as Prometheus text (exposition 0.0.4).
/// Pure: the relay owns one and bumps it; gauges it doesn't own (devices, RSS) are passed in when rendering.
public struct Metrics: Sendable {
    public var eventsReceived = 0
    public var announced = 0
    public var reminded = 0
    public var ended = 0
    public var reconnects = 0
    public var subscribed = false
    public var apnsConnectionsOpened = 0
    public var prefectConnectionsOpened = 0
    /// REST reads to Prefect unanswered for over a second (each counted once), and those whose caller timed out.
    public var prefectReadsStalled = 0
    public var prefectReadsAbandoned = 0
    /// REST requests open at Prefect now (a gauge the relay sets when rendering).
    public var prefectReadsInFlight = 0
    /// Stored pushes rescheduled after a 429/5xx, a timeout or a lost connection.
    public var pushRetries = 0
    /// Pushes that went out, got no answer, and are not sent again (`DeliveryTable`: a Live Activity start).
    public var pushesUnconfirmed = 0
    /// Pushes stored in the outbox, not yet answered (a gauge the relay sets when rendering).
    public var outboxPending = 0
    /// Seconds since the oldest push still in the outbox was stored; 0 when it is empty (set when rendering).
    public var oldestPendingSeconds = 0.0
    /// Store reads and writes that failed (every `store.failed` line).
    public var storeErrors = 0
    /// Gauges from the health verdict, set when rendering (`HealthVerdict`).
    public var healthy = true
    public var storeFailing = false
    public var credentialRejected = false
    public var apnsUnreachable = false
    /// Whether the relay was given an APNs key (a gauge set when rendering): 0 is a relay that sends nothing.
    public var apnsConfigured = true
    /// Devices registered for the first time (a refresh of a known one is not counted), and devices removed: by the
    /// app (`DELETE /devices/{id}`) or because APNs said the token is gone (410, `BadDeviceToken`).
    public var devicesRegistered = 0
    public var devicesUnregistered = 0
    public var devicesDroppedByAPNs = 0
    /// API answers by route and code (set when rendering, from the API servers' counts).
    public var httpRequests = RequestCounts()
    /// The standard process metrics, when /proc could be read.
    public var process: ProcessSample?
    /// Bytes in the store connection's SQLite page cache, part of the resident set: it grows with the store up to
    /// the cache's bound, so a trend in the rest of the resident set is what can leak.
    public var storeCacheBytes: Int?
    /// Bytes the allocator has handed out and not had back. The resident set also holds freed memory the allocator
    /// keeps for reuse (up to a megabyte per arena), so it creeps as the arenas fill; this does not, unless memory
    /// leaks (or a cache fills: the store's is `storeCacheBytes`).
    public var heapInUseBytes: Int?
    /// Announced pauses that timed out with nobody answering (`PauseOutcome.timedOut`).
    public private(set) var pausesTimedOut = 0
    /// Announced pauses a person resumed after their reminder went out.
    public private(set) var answeredAfterReminder = 0
    /// Seconds each announced pause waited, from its PAUSED state to the state that ended it, by outcome. The
    /// outcome is the only label: four values (`PauseOutcome`). No flow or run label: flow names are whatever the
    /// watched server's users call their flows, unbounded, and the `pause.end` log line names the run instead.
    public private(set) var pauseWaits: [PauseOutcome: Histogram] = [:]
    /// Pushes by kind ("alert", "liveactivity") and outcome ("200", "410 Unregistered", "failed timeout", …).
    public private(set) var pushes: [PushKey: Int] = [:]
    /// Seconds from the event's arrival to APNs' answer, per push.
    public private(set) var latency = Histogram(bounds: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10])

    public struct PushKey: Hashable, Sendable {
        public var kind: String
        public var status: String
        public var reason: String
    }

    /// The build that is running, for `prefect_push_build_info` (empty: the metric is left out).
    public var buildVersion = ""
    public var buildCommit = ""

    public init() {}

    public mutating func recordPush(kind: String, status: String, reason: String, seconds: Double?) {
        pushes[PushKey(kind: kind, status: status, reason: reason), default: 0] += 1
        if let seconds { latency.observe(seconds) }
    }

    /// A pause ended (`PauseWatcher.Action.end`): its wait by outcome, and whether it timed out or was answered after
    /// the reminder. Pauses recorded quietly (never announced: too old when first seen) waited on nobody we told,
    /// so they are left out.
    public mutating func recordPauseEnd(_ pause: PauseRecord) {
        guard pause.announcedAt != nil else { return }
        let outcome = PauseOutcome.of(pause)
        pauseWaits[outcome, default: Histogram(bounds: PauseOutcome.waitBuckets)]
            .observe(Double(PauseOutcome.waited(pause)))
        if outcome == .timedOut { pausesTimedOut += 1 }
        if PauseOutcome.answeredAfterReminder(pause) { answeredAfterReminder += 1 }
    }

    public func render(devices: Int, waiting: Int, residentBytes: Int?) -> String {
        var out = Exposition()
        renderPauses(into: &out)
        renderPushes(into: &out)
        renderPrefect(into: &out)
        renderState(into: &out, devices: devices, waiting: waiting)
        renderProcess(into: &out, residentBytes: residentBytes)
        return out.text
    }

    /// Events in, and what the relay did about pauses.
    private func renderPauses(into out: inout Exposition) {
        out.metric("prefect_push_events_received_total", "counter", "Events received from the Prefect events socket.",
                   [("", String(eventsReceived))])
        out.metric("prefect_push_pauses_announced_total", "counter", "Pauses announced to phones.",
                   [("", String(announced))])
        out.metric("prefect_push_pauses_reminded_total", "counter", "Reminders sent before a pause times out.",
                   [("", String(reminded))])
        out.metric("prefect_push_pauses_ended_total", "counter", "Pauses whose run moved on.", [("", String(ended))])
        renderPauseOutcomes(into: &out)
    }

    /// How announced pauses ended and how long they waited. Every outcome's series exists from the start, so a rate
    /// or a ratio over them has data at once.
    private func renderPauseOutcomes(into out: inout Exposition) {
        let name = "prefect_push_pause_wait_seconds"
        out.text += "# HELP \(name) Seconds an announced pause waited, from its Paused state to the state that ended "
            + "it, by outcome (resumed, cancelled, timed_out, other).\n# TYPE \(name) histogram\n"
        for outcome in PauseOutcome.allCases {
            let waits = pauseWaits[outcome] ?? Histogram(bounds: PauseOutcome.waitBuckets)
            out.text += waits.samples(name: name, labels: "outcome=\"\(outcome.rawValue)\"")
        }
        out.metric("prefect_push_pauses_timed_out_total", "counter",
                   "Announced pauses that timed out with nobody answering.", [("", String(pausesTimedOut))])
        out.metric("prefect_push_pauses_answered_after_reminder_total", "counter",
                   "Announced pauses resumed after their reminder was sent.", [("", String(answeredAfterReminder))])
    }

    /// Pushes by outcome, their latency, retries, the outbox and APNs connections.
    private func renderPushes(into out: inout Exposition) {
        // The delivered series exist from the start, so a rate over them (and the alerts on it) has data at once.
        var pushes = self.pushes
        for kind in ["alert", "liveactivity"] { pushes[PushKey(kind: kind, status: "200", reason: ""), default: 0] += 0 }
        let pushSamples = pushes.sorted { ($0.key.kind, $0.key.status, $0.key.reason) < ($1.key.kind, $1.key.status, $1.key.reason) }
            .map { ("{kind=\"\(escape($0.key.kind))\",status=\"\(escape($0.key.status))\",reason=\"\(escape($0.key.reason))\"}",
                    String($0.value)) }
        out.metric("prefect_push_pushes_total", "counter", "APNs pushes by kind and outcome.", pushSamples)
        out.text += latency.render(name: "prefect_push_event_to_apns_seconds",
                                   help: "Seconds from a pause event's arrival to APNs' answer, per push.")
        out.metric("prefect_push_push_retries_total", "counter", "Stored pushes scheduled again after no usable answer.",
                   [("", String(pushRetries))])
        out.metric("prefect_push_pushes_unconfirmed_total", "counter",
                   "Stored pushes that went out with no answer and are not sent again (Live Activity starts; past expiry).",
                   [("", String(pushesUnconfirmed))])
        out.metric("prefect_push_outbox_pending", "gauge", "Pushes stored in the outbox and not yet answered.",
                   [("", String(outboxPending))])
        out.metric("prefect_push_apns_connections_opened_total", "counter", "APNs HTTP/2 connections opened.",
                   [("", String(apnsConnectionsOpened))])
    }

    /// The REST reads and the events socket.
    private func renderPrefect(into out: inout Exposition) {
        out.metric("prefect_push_prefect_connections_opened_total", "counter", "Connections opened for REST calls to Prefect.",
                   [("", String(prefectConnectionsOpened))])
        out.metric("prefect_push_prefect_reads_stalled_total", "counter",
                   "REST reads to Prefect that went a second without an answer.", [("", String(prefectReadsStalled))])
        out.metric("prefect_push_prefect_reads_abandoned_total", "counter",
                   "REST reads to Prefect whose caller timed out while the request stayed open.",
                   [("", String(prefectReadsAbandoned))])
        out.metric("prefect_push_prefect_reads_in_flight", "gauge",
                   "REST requests open at Prefect, abandoned ones included.", [("", String(prefectReadsInFlight))])
        out.metric("prefect_push_socket_reconnects_total", "counter", "Times the events socket dropped.",
                   [("", String(reconnects))])
        out.metric("prefect_push_subscribed", "gauge", "1 while the events socket is authenticated and filtered.",
                   [("", subscribed ? "1" : "0")])
    }

    /// What the relay holds, and the health verdict's gauges.
    private func renderState(into out: inout Exposition, devices: Int, waiting: Int) {
        out.metric("prefect_push_devices", "gauge", "Registered devices.", [("", String(devices))])
        out.metric("prefect_push_devices_registered_total", "counter",
                   "Devices registered for the first time (refreshes of a known device not counted).",
                   [("", String(devicesRegistered))])
        out.metric("prefect_push_devices_removed_total", "counter",
                   "Devices removed: by the app (unregistered), or because APNs said the token is gone (apns).",
                   [("{reason=\"apns\"}", String(devicesDroppedByAPNs)),
                    ("{reason=\"unregistered\"}", String(devicesUnregistered))])
        out.metric("prefect_push_http_requests_total", "counter", "API requests answered, by route and status code.",
                   httpRequests.samples)
        out.metric("prefect_push_apns_configured", "gauge",
                   "1 when the relay has an APNs key; 0 when it runs without one and sends nothing.",
                   [("", apnsConfigured ? "1" : "0")])
        out.metric("prefect_push_waiting", "gauge", "Pauses still waiting on a person.", [("", String(waiting))])
        out.metric("prefect_push_outbox_oldest_pending_seconds", "gauge",
                   "Seconds since the oldest push still in the outbox was stored; 0 when it is empty.",
                   [("", Metrics.number(oldestPendingSeconds))])
        out.metric("prefect_push_store_errors_total", "counter", "Store reads and writes that failed.",
                   [("", String(storeErrors))])
        out.metric("prefect_push_store_failing", "gauge", "1 while store writes have failed past the health bound, or the file is lost.",
                   [("", storeFailing ? "1" : "0")])
        out.metric("prefect_push_credential_rejected", "gauge", "1 while Prefect refuses the relay's credential.",
                   [("", credentialRejected ? "1" : "0")])
        out.metric("prefect_push_apns_unreachable", "gauge", "1 while an APNs host has been unreachable past the health bound.",
                   [("", apnsUnreachable ? "1" : "0")])
        out.metric("prefect_push_healthy", "gauge", "1 when /health answers 200, 0 when it answers 503.",
                   [("", healthy ? "1" : "0")])
    }

    /// The build and the process.
    private func renderProcess(into out: inout Exposition, residentBytes: Int?) {
        if !buildVersion.isEmpty {
            out.metric("prefect_push_build_info", "gauge", "The running build: its version and commit (always 1).",
                       [("{version=\"\(escape(buildVersion))\",commit=\"\(escape(buildCommit))\"}", "1")])
        }
        if let residentBytes {
            out.metric("prefect_push_resident_memory_bytes", "gauge", "Resident set size of the relay.",
                       [("", String(residentBytes))])
        }
        if let storeCacheBytes {
            out.metric("prefect_push_store_cache_bytes", "gauge",
                       "Bytes in the store's SQLite page cache (bounded at 2 MiB), part of the resident set.",
                       [("", String(storeCacheBytes))])
        }
        if let heapInUseBytes {
            out.metric("prefect_push_heap_in_use_bytes", "gauge",
                       "Bytes malloc has handed out and not had back (the resident set also holds freed memory it keeps).",
                       [("", String(heapInUseBytes))])
        }
        if let process { out.text += process.render() }
    }

    /// The text being rendered, a metric (HELP, TYPE, samples) at a time.
    private struct Exposition {
        var text = ""

        mutating func metric(_ name: String, _ type: String, _ help: String, _ samples: [(String, String)]) {
            text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
            for (labels, value) in samples { text += "\(name)\(labels) \(value)\n" }
        }
    }

    /// A sample value: integers without a fraction, others as Swift prints a Double (which Prometheus reads).
    static func number(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }

    private func escape(_ s: String) -> String {
        var out = ""
        for ch in s.prefix(80) {
            switch ch {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(ch)
            }
        }
        return out
    }
}

/// A cumulative Prometheus histogram with fixed bucket bounds.
public struct Histogram: Sendable {
    public let bounds: [Double]
    public private(set) var counts: [Int]
    public private(set) var sum = 0.0
    public private(set) var total = 0

    public init(bounds: [Double]) {
        self.bounds = bounds
        counts = Array(repeating: 0, count: bounds.count)
    }

    public mutating func observe(_ value: Double) {
        for (index, bound) in bounds.enumerated() where value <= bound { counts[index] += 1 }
        sum += value
        total += 1
    }

    func render(name: String, help: String) -> String {
        "# HELP \(name) \(help)\n# TYPE \(name) histogram\n" + samples(name: name, labels: "")
    }

    /// The bucket, sum and count lines of one series; `labels` (e.g. `outcome="resumed"`) go before `le`.
    func samples(name: String, labels: String) -> String {
        let prefix = labels.isEmpty ? "" : labels + ","
        let braced = labels.isEmpty ? "" : "{\(labels)}"
        var out = ""
        for (index, bound) in bounds.enumerated() {
            out += "\(name)_bucket{\(prefix)le=\"\(bound)\"} \(counts[index])\n"
        }
        out += "\(name)_bucket{\(prefix)le=\"+Inf\"} \(total)\n\(name)_sum\(braced) \(sum)\n"
        out += "\(name)_count\(braced) \(total)\n"
        return out
    }
}
