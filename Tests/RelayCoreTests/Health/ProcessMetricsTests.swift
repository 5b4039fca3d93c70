import Testing
@testable import RelayCore

/// The standard process metrics and the metrics added for operations, rendered without a process.
@Suite struct ProcessMetricsTests {
    /// A real /proc/self/stat line, with a command name holding a space and a parenthesis.
    static let stat = "4242 (prefect) push) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 50 0 0 20 0 9 0 "
        + "100000 123456789 2560 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0"

    @Test func readsProcSelfStat() throws {
        let sample = try #require(ProcessSample(stat: Self.stat, clockTicks: 100, pageSize: 4096, bootTime: 1_700_000_000,
                                                openFDs: 12, maxFDs: 1024))
        #expect(sample.cpuSeconds == 3)  // (250 + 50) / 100
        #expect(sample.startTime == 1_700_001_000)  // boot + 100000 / 100
        #expect(sample.virtualBytes == 123_456_789)
        #expect(sample.residentBytes == 2560 * 4096)
    }

    @Test func refusesATruncatedLine() {
        #expect(ProcessSample(stat: "4242 (x) S 1 2", clockTicks: 100, pageSize: 4096, bootTime: 0, openFDs: 0, maxFDs: 0) == nil)
        #expect(ProcessSample.bootTime(procStat: "cpu 1 2 3\nbtime 1700000000\nprocesses 5\n") == 1_700_000_000)
        #expect(ProcessSample.bootTime(procStat: "cpu 1\n") == nil)
    }

    @Test func rendersUnderTheUsualNames() throws {
        var metrics = Metrics()
        (metrics.buildVersion, metrics.buildCommit) = ("0.1.0", "abc1234")
        metrics.storeErrors = 3
        metrics.storeFailing = true
        metrics.healthy = false
        metrics.oldestPendingSeconds = 12.5
        metrics.process = ProcessSample(cpuSeconds: 1.25, residentBytes: 10, virtualBytes: 20, openFDs: 7, maxFDs: 1024,
                                        startTime: 1_700_000_000)
        let text = metrics.render(devices: 0, waiting: 0, residentBytes: nil)
        for line in ["prefect_push_build_info{version=\"0.1.0\",commit=\"abc1234\"} 1", "prefect_push_store_errors_total 3",
                     "prefect_push_store_failing 1", "prefect_push_healthy 0", "prefect_push_credential_rejected 0",
                     "prefect_push_outbox_oldest_pending_seconds 12.5", "process_cpu_seconds_total 1.25",
                     "process_resident_memory_bytes 10", "process_open_fds 7", "process_max_fds 1024",
                     "process_start_time_seconds 1700000000",
                     "prefect_push_pushes_total{kind=\"alert\",status=\"200\",reason=\"\"} 0",
                     "prefect_push_pushes_total{kind=\"liveactivity\",status=\"200\",reason=\"\"} 0",
                     "# TYPE process_cpu_seconds_total counter", "# TYPE prefect_push_store_errors_total counter"] {
            #expect(text.split(separator: "\n").contains(Substring(line)), "missing: \(line)")
        }
    }

    @Test func configReadsTheListenerAndTheGrace() throws {
        let base = ["PREFECT_API_URL": "http://127.0.0.1:4200/api"]
        let plain = try Config(environment: base)
        #expect(plain.metricsPort == nil && plain.metricsBind == "0.0.0.0" && plain.healthGrace == 300)
        let set = try Config(environment: base.merging(["METRICS_PORT": "9747", "METRICS_BIND": "127.0.0.1",
                                                        "HEALTH_GRACE_SECONDS": "60"]) { $1 })
        #expect(set.metricsPort == 9747 && set.metricsBind == "127.0.0.1" && set.healthGrace == 60)
        for (name, value) in [("METRICS_BIND", "localhost"), ("METRICS_BIND", "1.2.3.256"), ("METRICS_PORT", "70000"),
                              ("HEALTH_GRACE_SECONDS", "0")] {
            #expect(throws: ConfigError.self) { try Config(environment: base.merging([name: value]) { $1 }) }
        }
    }
}
