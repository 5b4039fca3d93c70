import Glibc
import Testing
@testable import FakeAPNs
@testable import Relay
@testable import RelayCore

/// `GET /metrics` after a scripted run: the relay binary, pointed at the scripted Prefect of `make bench`
/// (`bench/peer.py`, on its own port, so no other test's relay sees its pauses), announces one pause to two phones
/// on a fake APNs (one accepts, one answers 410 Unregistered); the run resumes. The exposition must parse and
/// count exactly that.
@Suite(.serialized) struct MetricsIntegrationTests {
    static let good = ScriptedPrefect.credential
    static let live = "aa" + String(repeating: "01", count: 31)
    static let gone = "bb" + String(repeating: "02", count: 31)

    @Test func exposesWhatAScriptedRunDid() async throws {
        let directory = TestFiles.temporaryDirectory()
        defer { TestFiles.removeTree(directory) }
        let (peerProcess, peer) = try ScriptedPrefect.start(directory: directory)
        defer { peerProcess.stop(signal: SIGKILL) }  // nothing to flush
        let apns = try FakeAPNs(name: "production")
        defer { apns.stop() }
        apns.script(Self.gone, .gone(timestampMs: 1_700_000_000_000))
        let relay = try RelayProcess(environment: ScriptedPrefect.relayEnvironment(peer: peer, apns: apns),
                                     directory: directory)
        let auth = ["Authorization": Self.good]
        try waitFor("the relay to subscribe") {
            try relay.http.request("GET", "/health").json?["subscribed"] == true
        }
        #expect(try relay.http.request("GET", "/metrics").status == 401)  // same credential rule as the other routes
        #expect(try relay.http.request("GET", "/no-such-route").status == 404)  // counted as unrouted
        for (id, token) in [("live-phone", Self.live), ("gone-phone", Self.gone)] {
            let body: JSONValue = ["id": .string(id), "token": .string(token), "environment": "production",
                                   "server_id": "metrics"]
            #expect(try relay.http.request("POST", "/devices", headers: auth, body: body.encoded()).status == 200)
        }

        // One pause, announced to both phones, then the run moves on.
        let paused = try peer.request("POST", "/control/pause", body: "")
        let runID = try #require(paused.json?["run"]?.string)
        try waitFor("both phones' alerts") { apns.requests.count >= 2 }
        #expect(try peer.request("POST", "/control/resume/\(runID)", body: "").status == 200)

        var exposition = Exposition()
        try waitFor("the pause to end in /metrics") {
            let reply = try relay.http.request("GET", "/metrics", headers: auth)
            guard reply.status == 200 else { return false }
            exposition = try Exposition(parsing: reply.body)
            return exposition.value("prefect_push_pauses_ended_total") == 1
        }

        // Every family is declared once, with help and a known type.
        for name in ["prefect_push_events_received_total", "prefect_push_pauses_announced_total",
                     "prefect_push_pauses_reminded_total", "prefect_push_pauses_ended_total", "prefect_push_pushes_total",
                     "prefect_push_event_to_apns_seconds", "prefect_push_apns_connections_opened_total",
                     "prefect_push_prefect_connections_opened_total", "prefect_push_prefect_reads_stalled_total",
                     "prefect_push_prefect_reads_abandoned_total", "prefect_push_prefect_reads_in_flight",
                     "prefect_push_socket_reconnects_total", "prefect_push_subscribed", "prefect_push_devices",
                     "prefect_push_waiting", "prefect_push_resident_memory_bytes", "prefect_push_store_cache_bytes",
                     "prefect_push_build_info",
                     "prefect_push_pause_wait_seconds", "prefect_push_pauses_timed_out_total",
                     "prefect_push_pauses_answered_after_reminder_total"] {
            #expect(exposition.types[name] != nil, "no # TYPE for \(name)")
            #expect(exposition.help[name]?.isEmpty == false, "no # HELP for \(name)")
        }
        #expect(exposition.types["prefect_push_event_to_apns_seconds"] == "histogram")
        #expect(exposition.types["prefect_push_subscribed"] == "gauge")
        #expect(exposition.types["prefect_push_prefect_reads_in_flight"] == "gauge")

        #expect(exposition.value("prefect_push_events_received_total") == 2)  // Paused, Running
        #expect(exposition.value("prefect_push_pauses_announced_total") == 1)
        #expect(exposition.value("prefect_push_pauses_reminded_total") == 0)
        // The pause ended Running: resumed, the only outcome with a count.
        #expect(exposition.types["prefect_push_pause_wait_seconds"] == "histogram")
        for outcome in PauseOutcome.allCases {
            #expect(exposition.value("prefect_push_pause_wait_seconds_count", ["outcome": outcome.rawValue])
                    == (outcome == .resumed ? 1 : 0), "\(outcome)")
        }
        #expect(exposition.value("prefect_push_pauses_timed_out_total") == 0)
        #expect(exposition.value("prefect_push_pauses_answered_after_reminder_total") == 0)
        #expect(exposition.value("prefect_push_pushes_total", ["kind": "alert", "status": "200", "reason": ""]) == 1)
        #expect(exposition.value("prefect_push_pushes_total", ["kind": "alert", "status": "410", "reason": "Unregistered"]) == 1)
        #expect(exposition.value("prefect_push_apns_connections_opened_total") == 1)
        #expect((exposition.value("prefect_push_prefect_connections_opened_total") ?? 0) >= 1)  // the scripted peer closes each
        #expect(exposition.value("prefect_push_socket_reconnects_total") == 0)
        #expect(exposition.value("prefect_push_subscribed") == 1)
        #expect(exposition.value("prefect_push_devices") == 1)  // the 410 removed the other phone
        #expect(exposition.value("prefect_push_devices_registered_total") == 2)
        #expect(exposition.value("prefect_push_devices_removed_total", ["reason": "apns"]) == 1)
        #expect(exposition.value("prefect_push_devices_removed_total", ["reason": "unregistered"]) == 0)
        #expect(exposition.value("prefect_push_apns_configured") == 1)
        // Answers by route and code: the two registrations, the refused scrape, and the health polls.
        #expect(exposition.value("prefect_push_http_requests_total", ["route": "register", "code": "200"]) == 2)
        #expect(exposition.value("prefect_push_http_requests_total", ["route": "metrics", "code": "401"]) == 1)
        #expect((exposition.value("prefect_push_http_requests_total", ["route": "health", "code": "200"]) ?? 0) >= 1)
        #expect(exposition.value("prefect_push_http_requests_total", ["route": "unrouted", "code": "404"]) == 1)
        #expect(exposition.value("prefect_push_waiting") == 0)
        #expect((exposition.value("prefect_push_resident_memory_bytes") ?? 0) > 1_000_000)
        // The store's page cache is part of the resident set: some (the store has been read), never all of it.
        let storeCache = exposition.value("prefect_push_store_cache_bytes") ?? 0
        #expect(storeCache > 0 && storeCache < (exposition.value("prefect_push_resident_memory_bytes") ?? 0))
        #expect(exposition.value("prefect_push_build_info", ["version": BuildInfo.version, "commit": BuildInfo.commit]) == 1)

        // The latency histogram: one delivered push, cumulative buckets, +Inf equal to the count.
        let count = exposition.value("prefect_push_event_to_apns_seconds_count")
        #expect(count == 1)
        #expect((exposition.value("prefect_push_event_to_apns_seconds_sum") ?? 0) > 0)
        let buckets = exposition.samples.filter { $0.name == "prefect_push_event_to_apns_seconds_bucket" }
        #expect(buckets.count >= 2)
        #expect(buckets.last?.labels["le"] == "+Inf")
        #expect(buckets.last?.value == count)
        #expect(zip(buckets, buckets.dropFirst()).allSatisfy { $0.value <= $1.value })
        let bounds = buckets.dropLast().compactMap { Double($0.labels["le"] ?? "") }
        #expect(bounds.count == buckets.count - 1 && bounds == bounds.sorted())
    }

    private func waitFor(_ what: String, seconds: Double = 30, _ condition: () throws -> Bool) throws {
        try waitUntil(what, timeout: seconds) { (try? condition()) == true }
    }
}

/// A strict reader of the Prometheus text exposition format (0.0.4): `# HELP` / `# TYPE` lines and samples
/// `name{label="value",...} number`. Anything else is an error, so the test also checks the syntax.
struct Exposition {
    struct Sample: Equatable {
        var name: String
        var labels: [String: String]
        var value: Double
    }

    var help: [String: String] = [:]
    var types: [String: String] = [:]
    var samples: [Sample] = []

    init() {}

    init(parsing text: String) throws {
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            if line.hasPrefix("# HELP ") || line.hasPrefix("# TYPE ") {
                let parts = line.dropFirst(7).split(separator: " ", maxSplits: 1)
                guard parts.count == 2, Exposition.isName(parts[0]) else { throw TestFailure("bad line: \(line)") }
                let name = String(parts[0])
                if line.hasPrefix("# HELP ") {
                    guard help[name] == nil else { throw TestFailure("HELP twice for \(name)") }
                    help[name] = String(parts[1])
                } else {
                    guard types[name] == nil, ["counter", "gauge", "histogram", "summary", "untyped"].contains(parts[1])
                    else { throw TestFailure("bad TYPE line: \(line)") }
                    types[name] = String(parts[1])
                }
                continue
            }
            guard !line.hasPrefix("#") else { continue }
            samples.append(try Exposition.sample(String(line)))
        }
        for sample in samples {
            let family = ["_bucket", "_sum", "_count"].reduce(sample.name) { name, suffix in
                types[name] == nil && name.hasSuffix(suffix) ? String(name.dropLast(suffix.count)) : name
            }
            guard types[family] != nil else { throw TestFailure("sample \(sample.name) has no # TYPE") }
        }
    }

    /// The value of the one sample with exactly these labels.
    func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
        samples.first { $0.name == name && $0.labels == labels }?.value
    }

    private static func isName(_ name: Substring) -> Bool {
        guard let first = name.first, first.isLetter || first == "_" || first == ":" else { return false }
        return name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == ":") }
    }

    private static func sample(_ line: String) throws -> Sample {
        var rest = Substring(line)
        let name = rest.prefix { $0 != "{" && $0 != " " }
        guard isName(name) else { throw TestFailure("bad metric name in: \(line)") }
        rest = rest.dropFirst(name.count)
        var labels: [String: String] = [:]
        if rest.first == "{" {
            rest = rest.dropFirst()
            while rest.first != "}" {
                let key = rest.prefix { $0 != "=" }
                guard isName(key) else { throw TestFailure("bad label name in: \(line)") }
                rest = rest.dropFirst(key.count)
                guard rest.hasPrefix("=\"") else { throw TestFailure("bad label in: \(line)") }
                rest = rest.dropFirst(2)
                var value = ""
                while let ch = rest.first, ch != "\"" {
                    rest = rest.dropFirst()
                    if ch == "\\" {
                        guard let escaped = rest.first else { throw TestFailure("bad escape in: \(line)") }
                        rest = rest.dropFirst()
                        switch escaped {
                        case "\\": value.append("\\")
                        case "\"": value.append("\"")
                        case "n": value.append("\n")
                        default: throw TestFailure("bad escape in: \(line)")
                        }
                    } else {
                        value.append(ch)
                    }
                }
                guard rest.first == "\"" else { throw TestFailure("unterminated label in: \(line)") }
                rest = rest.dropFirst()
                guard labels.updateValue(value, forKey: String(key)) == nil else {
                    throw TestFailure("label \(key) twice in: \(line)")
                }
                if rest.first == "," { rest = rest.dropFirst() }
            }
            rest = rest.dropFirst()
        }
        guard rest.first == " " else { throw TestFailure("no value in: \(line)") }
        let text = rest.dropFirst()
        let value: Double? = switch text {
        case "+Inf": .infinity
        case "-Inf": -.infinity
        case "NaN": .nan
        default: Double(text)
        }
        guard let value else { throw TestFailure("bad value in: \(line)") }
        return Sample(name: String(name), labels: labels, value: value)
    }
}
