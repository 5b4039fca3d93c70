import Glibc
import Testing
@testable import Relay
@testable import RelayCore

extension SharedPrefect {
    /// A real Prometheus (Debian's `prometheus`, or PROMETHEUS_BIN) scrapes a running relay's metrics port, with
    /// deploy/prometheus/alerts.yaml loaded. Through Prometheus's HTTP API: the target is up, every metric the alert
    /// rules and the dashboard name has been scraped, and every rule evaluates without error.
    @Suite(.serialized) struct PrometheusScrapeTests {
        /// PROMETHEUS_BIN (set by `make test`: then it must be there), else /usr/bin/prometheus when installed.
        static var binary: String? {
            if let given = getenv("PROMETHEUS_BIN") { return String(cString: given) }
            return access("/usr/bin/prometheus", X_OK) == 0 ? "/usr/bin/prometheus" : nil
        }

        /// Metric names in a rules file or dashboard: the relay's own, the process ones, and `up`.
        static func metricNames(in text: String) throws -> Set<String> {
            let pattern = try Regex("\\b(prefect_push_[a-z0-9_]*[a-z0-9]|process_[a-z_]*[a-z]|up)\\b")
            return Set(text.matches(of: pattern).map { String(text[$0.range]) })
        }

        static func query(_ text: String) -> String {
            var out = ""
            for byte in text.utf8 {
                let c = Character(Unicode.Scalar(byte))
                if c.isASCII && (c.isLetter || c.isNumber || "-_.~".contains(c)) { out.append(c) } else {
                    out += "%" + String(byte, radix: 16, uppercase: true).leftPadded(2)
                }
            }
            return out
        }

        @Test(.enabled(if: binary != nil)) func everyMetricTheRulesAndDashboardUseIsScraped() async throws {
            let binary = try #require(Self.binary)
            #expect(access(binary, X_OK) == 0, "PROMETHEUS_BIN=\(binary) is not executable; make deps-prometheus")
            let root = TestFiles.packageRoot + "/deploy/prometheus"
            let alerts = try TestFiles.read(root + "/alerts.yaml")
            let used = try Self.metricNames(in: alerts)
                .union(Self.metricNames(in: TestFiles.read(root + "/dashboard.json")))
            #expect(used.count > 20, "\(used.sorted())")

            let api = try await PrefectServer.shared.apiURL()
            let metricsPort = TestSocket.freePort()
            let relay = try RelayProcess(environment: ["PREFECT_API_URL": api, "PREFECT_API_AUTH_STRING": PrefectServer.authString,
                                                       "METRICS_PORT": String(metricsPort), "METRICS_BIND": "127.0.0.1"])
            defer {
                relay.stop()  // before its files go: a relay whose database vanishes exits 1 (store.lost)
                TestFiles.removeTree(relay.directory)
            }
            try waitUntil("the relay subscribes", timeout: 30) {
                (try? relay.http.request("GET", "/health").json?["subscribed"]) == .bool(true)
            }
            // The scrape port needs no credential and serves nothing else.
            let scrape = TestHTTP(port: metricsPort)
            #expect(try scrape.request("GET", "/metrics").status == 200)
            #expect(try scrape.request("GET", "/health").status == 404)
            #expect(try relay.http.request("GET", "/metrics").status == 401)  // the API's own /metrics keeps its rule

            let directory = relay.directory + "/prometheus"
            mkdir(directory, 0o755)
            try TestFiles.write(directory + "/prometheus.yml", """
                global:
                  scrape_interval: 1s
                  evaluation_interval: 1s
                rule_files:
                  - \(root)/alerts.yaml
                scrape_configs:
                  - job_name: prefect-push
                    static_configs:
                      - targets: ["127.0.0.1:\(metricsPort)"]

                """)
            let port = TestSocket.freePort()
            let prometheus = try ChildProcess(binary, [
                "--config.file=\(directory)/prometheus.yml", "--storage.tsdb.path=\(directory)/data",
                "--web.listen-address=127.0.0.1:\(port)",
            ], environment: RelayMain.environment(), logPath: directory + "/prometheus.log")
            defer { prometheus.stop() }
            let http = TestHTTP(port: port)
            func get(_ path: String) throws -> JSONValue {
                let reply = try http.request("GET", path, timeout: 5)
                guard reply.status == 200, let json = reply.json, json["status"] == "success" else {
                    throw TestFailure("\(path): \(reply.status) \(reply.body.prefix(500))")
                }
                return json["data"] ?? .null
            }
            try waitUntil("Prometheus is ready", timeout: 30) {
                (try? http.request("GET", "/-/ready", timeout: 2).status) == 200
            }

            try waitUntil("up{job=\"prefect-push\"} is 1", timeout: 30) {
                let result = try get("/api/v1/query?query=" + Self.query("up{job=\"prefect-push\"}"))["result"]?.array
                return result?.first?["value"]?.array?.last?.string == "1"
            }
            var missing = used
            // Not `try`: on a timeout the expectation below names what is missing.
            try? waitUntil("every metric the rules and the dashboard use is scraped", timeout: 20) {
                let names = Set(try get("/api/v1/label/__name__/values").array?.compactMap(\.string) ?? [])
                missing = used.subtracting(names)
                return missing.isEmpty
            }
            #expect(missing.isEmpty, "not scraped: \(missing.sorted())")

            // The rules loaded, and each evaluated without error (none would if a metric's type were wrong).
            var rules: [JSONValue] = []
            try waitUntil("every rule evaluated", timeout: 20) {
                rules = try get("/api/v1/rules")["groups"]?.array?.flatMap { $0["rules"]?.array ?? [] } ?? []
                return !rules.isEmpty && rules.allSatisfy { $0["health"] != "unknown" }
            }
            // Every rule in the file loaded: as many as it has `- alert:` entries.
            let ruleCount = alerts.split(separator: "\n").filter { $0.drop(while: { $0 == " " }).hasPrefix("- alert:") }.count
            #expect(ruleCount > 0 && rules.count == ruleCount, "loaded \(rules.count) of the file's \(ruleCount) rules")
            for rule in rules { #expect(rule["health"] == "ok", "\(rule["name"]?.string ?? "?"): \(rule["lastError"]?.string ?? "")") }
            // A healthy, subscribed relay fires no alert.
            let firing = rules.filter { $0["state"] == "firing" }.compactMap { $0["name"]?.string }
            #expect(firing.isEmpty, "\(firing)")
            let target = try get("/api/v1/targets")["activeTargets"]?.array?.first
            #expect(target?["health"] == "up", "\(target?["lastError"]?.string ?? "")")
        }
    }
}

private extension String {
    func leftPadded(_ width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
