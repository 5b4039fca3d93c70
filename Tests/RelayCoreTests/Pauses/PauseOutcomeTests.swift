import Testing
@testable import RelayCore

/// How a pause's end is classified for `prefect_push_pause_wait_seconds`, and how the metrics render it.
@Suite struct PauseOutcomeTests {
    static func ended(_ state: String?, at endedAt: Int64 = 1_000, timeout: Int64? = 1_600,
                      reminded: Int64? = nil, announced: Int64? = 100) -> PauseRecord {
        PauseRecord(stateID: "s", runID: "r", stateName: "Paused", pausedAt: 100, timeoutAt: timeout,
                    announcedAt: announced, remindedAt: reminded, endedAt: endedAt, endedState: state)
    }

    @Test(arguments: [
        ("Running", PauseOutcome.resumed), ("Resuming", .resumed), ("Paused", .resumed), ("Suspended", .resumed),
        ("Cancelling", .cancelled), ("Cancelled", .cancelled),
        ("Failed", .other), ("Crashed", .other), ("Completed", .other), ("Scheduled", .other),
    ])
    func beforeTheTimeout(state: String, outcome: PauseOutcome) {
        #expect(PauseOutcome.of(Self.ended(state)) == outcome)
    }

    @Test func atOrAfterTheTimeout() {
        // Prefect fails a blocking pause that times out; the relay sees it a moment later, or a little early.
        #expect(PauseOutcome.of(Self.ended("Failed", at: 1_600)) == .timedOut)
        #expect(PauseOutcome.of(Self.ended("Failed", at: 1_700)) == .timedOut)
        #expect(PauseOutcome.of(Self.ended("Crashed", at: 1_600 - PauseOutcome.timeoutSlack)) == .timedOut)
        #expect(PauseOutcome.of(Self.ended("Failed", at: 1_600 - PauseOutcome.timeoutSlack - 1)) == .other)
        // A resume or a cancel is what it says, whenever it comes.
        #expect(PauseOutcome.of(Self.ended("Running", at: 1_700)) == .resumed)
        #expect(PauseOutcome.of(Self.ended("Cancelled", at: 1_700)) == .cancelled)
        // No timeout: nothing times out; a run gone from Prefect is other.
        #expect(PauseOutcome.of(Self.ended("Failed", at: 99_999, timeout: nil)) == .other)
        #expect(PauseOutcome.of(Self.ended(nil, at: 1_700)) == .other)
    }

    @Test func waitAndReminder() {
        #expect(PauseOutcome.waited(Self.ended("Running", at: 1_000)) == 900)
        #expect(PauseOutcome.waited(Self.ended("Running", at: 50)) == 0)  // clocks apart: never negative
        #expect(PauseOutcome.answeredAfterReminder(Self.ended("Running", reminded: 900)))
        #expect(!PauseOutcome.answeredAfterReminder(Self.ended("Running")))
        #expect(!PauseOutcome.answeredAfterReminder(Self.ended("Failed", at: 1_600, reminded: 900)))
        #expect(PauseOutcome.waitBuckets == PauseOutcome.waitBuckets.sorted())
        #expect(PauseOutcome.waitBuckets.first == 10 && PauseOutcome.waitBuckets.last == 86_400)
    }

    @Test func metricsCountAnnouncedPausesByOutcome() {
        var metrics = Metrics()
        metrics.recordPauseEnd(Self.ended("Running", at: 145, reminded: 120))  // 45 s, after the reminder
        metrics.recordPauseEnd(Self.ended("Failed", at: 1_601))                 // 1501 s, timed out
        metrics.recordPauseEnd(Self.ended("Running", at: 500, announced: nil))  // recorded quietly: not counted
        #expect(metrics.pausesTimedOut == 1 && metrics.answeredAfterReminder == 1)
        let text = metrics.render(devices: 0, waiting: 0, residentBytes: nil)
        let lines = Set(text.split(separator: "\n").map(String.init))
        for expected in [
            "# TYPE prefect_push_pause_wait_seconds histogram",
            "prefect_push_pause_wait_seconds_bucket{outcome=\"resumed\",le=\"30.0\"} 0",
            "prefect_push_pause_wait_seconds_bucket{outcome=\"resumed\",le=\"60.0\"} 1",
            "prefect_push_pause_wait_seconds_bucket{outcome=\"resumed\",le=\"+Inf\"} 1",
            "prefect_push_pause_wait_seconds_sum{outcome=\"resumed\"} 45.0",
            "prefect_push_pause_wait_seconds_count{outcome=\"resumed\"} 1",
            "prefect_push_pause_wait_seconds_bucket{outcome=\"timed_out\",le=\"900.0\"} 0",
            "prefect_push_pause_wait_seconds_bucket{outcome=\"timed_out\",le=\"1800.0\"} 1",
            "prefect_push_pause_wait_seconds_count{outcome=\"timed_out\"} 1",
            // every outcome's series is there from the start
            "prefect_push_pause_wait_seconds_count{outcome=\"cancelled\"} 0",
            "prefect_push_pause_wait_seconds_count{outcome=\"other\"} 0",
            "prefect_push_pauses_timed_out_total 1",
            "prefect_push_pauses_answered_after_reminder_total 1",
        ] {
            #expect(lines.contains(expected), "\(expected)")
        }
        // The outcome is the only label: 4 series of (13 buckets + +Inf + sum + count).
        #expect(lines.filter { $0.hasPrefix("prefect_push_pause_wait_seconds") }.count == 4 * 16)
        // The unlabelled histogram keeps its old shape.
        #expect(lines.contains("prefect_push_event_to_apns_seconds_count 0"))
        #expect(lines.contains("prefect_push_event_to_apns_seconds_bucket{le=\"0.001\"} 0"))
    }
}
