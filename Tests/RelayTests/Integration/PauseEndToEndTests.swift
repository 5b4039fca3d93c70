import Glibc
import Testing
@testable import FakeAPNs
@testable import Relay
@testable import RelayCore

extension SharedPrefect {
    /// The relay's main job against a real Prefect server and the fake APNs: every pause announced exactly once,
    /// the Live Activity ended when the run moves on, nothing missed or doubled across restarts and reconnects.
    @Suite(.serialized) struct PauseEndToEndTests {
        @Test func pauseThenResume() async throws {
            let e2e = try await EndToEnd()
            try e2e.startRelay()
            try e2e.registerDevice()
            let run = try e2e.runFlow("input")
            try waitUntil("the alert and the start", timeout: 60) {
                !e2e.pushes(to: EndToEnd.deviceToken, run: run).isEmpty && !e2e.pushes(to: EndToEnd.startToken, run: run).isEmpty
            }
            let alert = try #require(e2e.pushes(to: EndToEnd.deviceToken, run: run).first)
            #expect(alert.headers["apns-push-type"] == "alert")
            #expect(alert.headers["apns-topic"] == "io.zzstoatzz.prefect")
            #expect(alert.payload["aps"]?["alert"]?["title"] == "Approve the nightly deploy?")
            #expect(alert.payload["aps"]?["alert"]?["subtitle"] == "nightly-deploy")
            #expect(alert.payload["aps"]?["alert"]?["body"]?.string?.contains("billing-api") == true)
            #expect(alert.payload["aps"]?["category"] == "waiting-reply")
            #expect(alert.payload["aps"]?["thread-id"] == .string(run))
            #expect(alert.payload["body"]?["runId"] == .string(run))
            #expect(alert.payload["body"]?["serverId"] == "e2e")
            let start = try #require(e2e.pushes(to: EndToEnd.startToken, run: run).first)
            #expect(start.headers["apns-push-type"] == "liveactivity")
            #expect(start.headers["apns-topic"] == "io.zzstoatzz.prefect.push-type.liveactivity")
            #expect(start.payload["aps"]?["event"] == "start")
            #expect(activityProps(start.payload)?["stateName"] == "Paused")
            try expectStaleAtTheTimeout(start.payload, timeoutSeconds: 600)

            // `status` beside the running relay, on its store: the waiting run and what became of its pushes.
            // The answers are written a few ms after they arrive (a settle batch), so wait for them.
            var status: (code: Int32?, out: String) = (nil, "")
            try waitUntil("status to show the alert and the start delivered", timeout: 10) {
                status = try statusCommand(e2e, json: false)
                return status.out.contains("\n    phone: alert delivered ") && status.out.contains("; start delivered ")
            }
            #expect(status.code == 0, "\(status.out)")
            #expect(status.out.contains("  run \(run) (nightly-deploy"), "\(status.out)")
            #expect(status.out.contains("  phone: token "), "\(status.out)")
            #expect(!status.out.contains("last delivery none kept"), "\(status.out)")
            let statusJSON = try statusCommand(e2e, json: true)
            #expect(statusJSON.code == 0)
            let listed = try JSONParser.parse(statusJSON.out)["pauses"]?.array ?? []
            let mine = try #require(listed.first { $0["run_id"] == .string(run) }, "\(statusJSON.out)")
            let phone = try #require(mine["devices"]?.array?.first, "\(statusJSON.out)")
            #expect(phone["outcome"] == "delivered")
            #expect(phone["pushes"]?.array?.map { $0["purpose"] } == ["alert", "start"])
            #expect(phone["pushes"]?.array?.allSatisfy { $0["status"] == 200 && $0["answered_ms"]?.int != nil } == true)

            try e2e.registerActivity(runID: run)
            try e2e.resume(run, input: ["comment": "ship it"])
            try waitUntil("the end push", timeout: 30) { !e2e.pushes(to: EndToEnd.activityToken, run: run).isEmpty }
            try holds("one end push (anything doubled would arrive within 1 s)", for: 1) {
                e2e.pushes(to: EndToEnd.activityToken, run: run).count == 1
            }
            let end = try #require(e2e.pushes(to: EndToEnd.activityToken, run: run).first)
            #expect(end.payload["aps"]?["event"] == "end")
            #expect(activityProps(end.payload)?["ended"] == "Running")
            #expect(end.payload["aps"]?["dismissal-date"]?.int != nil)
            #expect(e2e.pushes(to: EndToEnd.deviceToken, run: run).count == 1)
            #expect(e2e.pushes(to: EndToEnd.startToken, run: run).count == 1)
            #expect(e2e.pushes(to: EndToEnd.activityToken, run: run).count == 1)
            // Other tests' runs may wait on the shared server too, so look at this run's pause, not the total.
            #expect(try Store(path: e2e.directory + "/relay.db").waitingPause(runID: run) == nil)

            // The wait histogram has this pause, resumed: a count of 1 on its own. A fresh relay's backfill can
            // replay another test's pause and resume on the shared server, so the count is held to the relay's own
            // pause.end lines, this run's among them.
            let metrics = try pauseMetrics(e2e)
            let resumed = try pauseEnds(e2e, outcome: "resumed")
            #expect(resumed.contains { $0.contains("run=\(run) ") })
            #expect(metrics.types["prefect_push_pause_wait_seconds"] == "histogram")
            #expect(metrics.value("prefect_push_pause_wait_seconds_count", ["outcome": "resumed"]) == Double(resumed.count))
            #expect(metrics.value("prefect_push_pause_wait_seconds_bucket", ["outcome": "resumed", "le": "+Inf"])
                    == Double(resumed.count))
            #expect((metrics.value("prefect_push_pause_wait_seconds_sum", ["outcome": "resumed"]) ?? -1) >= 0)
            #expect(metrics.value("prefect_push_pauses_answered_after_reminder_total") == 0)
        }

        @Test func cancelEndsWithTheCancelledState() async throws {
            let e2e = try await EndToEnd()
            try e2e.startRelay()
            try e2e.registerDevice()
            let run = try e2e.runFlow("plain")
            try waitUntil("the alert", timeout: 60) { !e2e.pushes(to: EndToEnd.deviceToken, run: run).isEmpty }
            #expect(e2e.pushes(to: EndToEnd.deviceToken, run: run).first?.payload["aps"]?["category"] == "waiting")
            try e2e.registerActivity(runID: run)
            try e2e.cancel(run)
            try waitUntil("the end push", timeout: 30) { !e2e.pushes(to: EndToEnd.activityToken, run: run).isEmpty }
            #expect(activityProps(e2e.pushes(to: EndToEnd.activityToken, run: run)[0].payload)?["ended"] == "Cancelled")
            e2e.stopFlows()  // a blocking pause ignores the cancel; its late Failed must not send a second end
            try holds("one end push", for: 1) { e2e.pushes(to: EndToEnd.activityToken, run: run).count == 1 }
        }

        @Test func timeoutEndsThePause() async throws {
            let e2e = try await EndToEnd()
            try e2e.startRelay()
            try e2e.registerDevice()
            let run = try e2e.runFlow("plain", timeout: 8)
            try waitUntil("the alert and the start", timeout: 60) {
                !e2e.pushes(to: EndToEnd.deviceToken, run: run).isEmpty && !e2e.pushes(to: EndToEnd.startToken, run: run).isEmpty
            }
            try expectStaleAtTheTimeout(e2e.pushes(to: EndToEnd.startToken, run: run)[0].payload, timeoutSeconds: 8)
            try e2e.registerActivity(runID: run)
            try waitUntil("the end push after the timeout", timeout: 60) { !e2e.pushes(to: EndToEnd.activityToken, run: run).isEmpty }
            let end = e2e.pushes(to: EndToEnd.activityToken, run: run)[0].payload
            #expect(activityProps(end)?["ended"] == "Failed")
            #expect(end["aps"]?["dismissal-date"]?.int != nil && end["aps"]?["stale-date"] == nil)
            // Counted as timed out unanswered (held to the relay's own pause.end lines, as above).
            let metrics = try pauseMetrics(e2e)
            let timedOut = try pauseEnds(e2e, outcome: "timed_out")
            #expect(timedOut.contains { $0.contains("run=\(run) ") })
            #expect(metrics.value("prefect_push_pauses_timed_out_total") == Double(timedOut.count))
            #expect(metrics.value("prefect_push_pause_wait_seconds_count", ["outcome": "timed_out"]) == Double(timedOut.count))
            #expect(e2e.pushes(to: EndToEnd.deviceToken, run: run).count == 1)  // a 8 s pause never gets a reminder
        }

        @Test func restartWhileWaitingSendsNothingTwice() async throws {
            let e2e = try await EndToEnd()
            try e2e.startRelay()
            try e2e.registerDevice()
            let run = try e2e.runFlow("plain")
            try waitUntil("the alert", timeout: 60) { !e2e.pushes(to: EndToEnd.deviceToken, run: run).isEmpty }
            try e2e.registerActivity(runID: run)

            e2e.stopRelay()
            let before = e2e.development.requests.count
            let relay = try e2e.startRelay()  // same database: the listing and the backfill both see the pause again
            try holds("nothing at all re-sent, for any run", for: 2) { e2e.development.requests.count == before }
            #expect(e2e.pushes(to: EndToEnd.deviceToken, run: run).count == 1)
            #expect(e2e.pushes(to: EndToEnd.startToken, run: run).count == 1)
            #expect(try Store(path: e2e.directory + "/relay.db").waitingPause(runID: run) != nil)
            #expect((try relay.http.request("GET", "/health").json?["waiting"]?.int ?? 0) >= 1)

            try e2e.resume(run)
            try waitUntil("the end push from the new relay", timeout: 30) { !e2e.pushes(to: EndToEnd.activityToken, run: run).isEmpty }
            #expect(activityProps(e2e.pushes(to: EndToEnd.activityToken, run: run)[0].payload)?["ended"] == "Running")
        }

        @Test func pauseWhileTheRelayIsDownIsAnnouncedOnce() async throws {
            let e2e = try await EndToEnd()
            try e2e.startRelay()
            try e2e.registerDevice()
            e2e.stopRelay()
            let run = try e2e.runFlow("str")
            try e2e.waitForState(run, type: "PAUSED")
            try e2e.waitForInputRows(run)  // as they would be before anyone looks
            try e2e.startRelay()
            try waitUntil("the alert", timeout: 30) { !e2e.pushes(to: EndToEnd.deviceToken, run: run).isEmpty }
            try holds("one alert", for: 2) { e2e.pushes(to: EndToEnd.deviceToken, run: run).count == 1 }
            #expect(e2e.pushes(to: EndToEnd.deviceToken, run: run)[0].payload["aps"]?["category"] == "waiting-reply")
            try e2e.resume(run, input: ["value": "ok"])
        }

        @Test func customEventOnTheRunIsQuotedLive() async throws {
            let e2e = try await EndToEnd()
            try e2e.startRelay()
            try e2e.registerDevice()
            let run = try e2e.runFlow("event")
            try waitUntil("the alert", timeout: 60) { !e2e.pushes(to: EndToEnd.deviceToken, run: run).isEmpty }
            let alert = e2e.pushes(to: EndToEnd.deviceToken, run: run)[0]
            #expect(alert.payload["aps"]?["alert"]?["body"]?.string?.contains("Deploy billing-api 1.4.2 to production?") == true)
            try e2e.resume(run)
        }

        /// An approval artifact made before the pause: the socket's artifact event carries it (the run was followed
        /// from its start, so the relay reads no history), and the alert quotes it.
        @Test func approvalArtifactIsQuoted() async throws {
            let e2e = try await EndToEnd()
            try e2e.startRelay()
            try e2e.registerDevice()
            let run = try e2e.runFlow("artifact")
            try waitUntil("the alert", timeout: 60) { !e2e.pushes(to: EndToEnd.deviceToken, run: run).isEmpty }
            let alert = e2e.pushes(to: EndToEnd.deviceToken, run: run)[0]
            #expect(alert.payload["aps"]?["alert"]?["title"] == "Approval request for the nightly deploy")
            #expect(alert.payload["aps"]?["alert"]?["body"]?.string?.contains("billing-api") == true)
            try e2e.resume(run)
        }

        /// `work.waiting` emitted right before the pause, by a flow the relay has never seen: it waits (bounded) for
        /// the event, quotes it, and remembers that this flow sends one.
        @Test func workWaitingRightBeforeThePauseIsQuoted() async throws {
            let e2e = try await EndToEnd()
            try e2e.startRelay()
            try e2e.registerDevice()
            let run = try e2e.runFlow("waiting")
            try waitUntil("the alert", timeout: 60) { !e2e.pushes(to: EndToEnd.deviceToken, run: run).isEmpty }
            let alert = e2e.pushes(to: EndToEnd.deviceToken, run: run)[0]
            #expect(alert.payload["aps"]?["alert"]?["title"] == "Ship billing-api 1.4.2?")
            #expect(alert.payload["aps"]?["alert"]?["body"]?.string?.contains("faster invoices") == true)
            try e2e.resume(run)
            try holds("one alert", for: 1) { e2e.pushes(to: EndToEnd.deviceToken, run: run).count == 1 }
            #expect(e2e.relay?.process.log.contains("flow.habit") == true)
        }

        /// A `work.waiting` event that comes 2 s after the pause was announced: no second alert, but the stored props
        /// take its text, the Live Activity is updated silently with it, and its end carries it.
        @Test func aLateEventRefreshesWhatTheEndCarries() async throws {
            let e2e = try await EndToEnd()
            let relay = try e2e.startRelay()
            try e2e.registerDevice()
            let run = try e2e.runFlow("late")
            try waitUntil("the alert", timeout: 60) { !e2e.pushes(to: EndToEnd.deviceToken, run: run).isEmpty }
            let alert = e2e.pushes(to: EndToEnd.deviceToken, run: run)[0]
            #expect(alert.payload["aps"]?["alert"]?["title"] != "Ship billing-api 1.4.3?")  // announced before it came
            try e2e.registerActivity(runID: run)
            try waitUntil("the update", timeout: 30) { !e2e.pushes(to: EndToEnd.activityToken, run: run).isEmpty }
            let update = e2e.pushes(to: EndToEnd.activityToken, run: run)[0]
            #expect(update.payload["aps"]?["event"] == "update" && update.payload["aps"]?["alert"] == nil)
            #expect(update.headers["apns-priority"] == "5")
            #expect(activityProps(update.payload)?["title"] == "Ship billing-api 1.4.3?")
            // Logged once the update is sent: the fake APNs can have it before the line is written.
            try waitUntil("pause.refreshed logged", timeout: 10) { relay.process.log.contains("event=pause.refreshed run=\(run)") }
            try e2e.resume(run)
            try waitUntil("the end push", timeout: 30) { e2e.pushes(to: EndToEnd.activityToken, run: run).count == 2 }
            let end = e2e.pushes(to: EndToEnd.activityToken, run: run)[1]
            #expect(end.payload["aps"]?["event"] == "end")
            #expect(activityProps(end.payload)?["title"] == "Ship billing-api 1.4.3?")
            #expect(activityProps(end.payload)?["body"]?.string?.contains("retries on timeouts") == true)
            #expect(e2e.pushes(to: EndToEnd.deviceToken, run: run).count == 1)  // the refresh pushed nothing
        }

        @Test func aLateEventAfterARestartStillRefreshes() async throws {
            let e2e = try await EndToEnd()
            try e2e.startRelay()
            try e2e.registerDevice()
            // The event comes 8 s into the pause: after the announce and the restart below.
            let run = try e2e.runFlow("late", environment: ["EVENT_LAG": "8"])
            try waitUntil("the alert", timeout: 60) { !e2e.pushes(to: EndToEnd.deviceToken, run: run).isEmpty }
            try e2e.registerActivity(runID: run)
            let restarted = try e2e.startRelay()
            try waitUntil("the update", timeout: 30) { !e2e.pushes(to: EndToEnd.activityToken, run: run).isEmpty }
            let update = e2e.pushes(to: EndToEnd.activityToken, run: run)[0]
            #expect(update.payload["aps"]?["event"] == "update")
            #expect(activityProps(update.payload)?["title"] == "Ship billing-api 1.4.3?")
            try waitUntil("pause.refreshed logged", timeout: 10) { restarted.process.log.contains("event=pause.refreshed run=\(run)") }
            #expect(e2e.pushes(to: EndToEnd.deviceToken, run: run).count == 1)  // announced once, across the restart
        }

        @Test func refusedSocketCredentialIsPlainInTheLog() async throws {
            let api = try await PrefectServer.shared.apiURL()
            let relay = try RelayProcess(environment: ["PREFECT_API_URL": api, "PREFECT_API_AUTH_STRING": "admin:wrong"])
            try waitUntil("the refusal is logged", timeout: 20) { relay.process.log.contains("events.auth_rejected") }
            #expect(relay.process.log.contains("PREFECT_API_AUTH_STRING"))
            #expect(!relay.process.log.contains("admin:wrong"))  // never the credential itself
            #expect(try relay.http.request("GET", "/health").json?["subscribed"] == false)
        }

        @Test func testPushRoute() async throws {
            let e2e = try await EndToEnd()
            let relay = try e2e.startRelay()
            try e2e.registerDevice()
            #expect(try relay.http.request("GET", "/health").json?["apns"] == true)
            let reply = try relay.http.request("POST", "/devices/phone/test", headers: ["Authorization": PrefectServer.authorization])
            #expect(reply.status == 200)
            #expect(reply.json?["sent"] == true)
            #expect(reply.json?["status"] == 200)
            #expect(reply.json?["apns_id"]?.string?.isEmpty == false)
            // Only the test alert (pauses of other tests on the shared server carry a run in "body").
            let received = e2e.development.requests(for: EndToEnd.deviceToken).filter {
                (try? JSONParser.parse($0.body))?["body"] == nil
            }
            #expect(received.count == 1)
            #expect(received.first?.headers["apns-push-type"] == "alert")
            // A dead token: APNs says Unregistered, the relay drops the phone and says so. Only the test alert is
            // refused: an alert for another test's pause must not drop the phone first.
            e2e.development.script(EndToEnd.deviceToken, when: { (try? JSONParser.parse($0.body))?["body"] == nil },
                                   .reject(410, "Unregistered"))
            let dead = try relay.http.request("POST", "/devices/phone/test", headers: ["Authorization": PrefectServer.authorization])
            #expect(dead.json?["sent"] == false)
            #expect(dead.json?["reason"] == "Unregistered")
            #expect(try relay.http.request("GET", "/health").json?["devices"] == 0)
        }

        @Test func suspendedRunSaysSuspended() async throws {
            let e2e = try await EndToEnd()
            try e2e.startRelay()
            try e2e.registerDevice()
            let run = try e2e.runSuspendedDeployment()
            try waitUntil("the alert", timeout: 90) { !e2e.pushes(to: EndToEnd.startToken, run: run).isEmpty }
            let start = e2e.pushes(to: EndToEnd.startToken, run: run)[0]
            #expect(activityProps(start.payload)?["stateName"] == "Suspended")
            #expect(activityProps(start.payload)?["timeoutAt"] == nil)  // a suspend without a timeout
            #expect(e2e.pushes(to: EndToEnd.deviceToken, run: run)[0].payload["aps"]?["category"] == "waiting-reply")
            try e2e.registerActivity(runID: run)
            try e2e.resume(run, input: ["value": "go"])
            try waitUntil("the end push", timeout: 30) { !e2e.pushes(to: EndToEnd.activityToken, run: run).isEmpty }
            #expect(activityProps(e2e.pushes(to: EndToEnd.activityToken, run: run)[0].payload)?["ended"] == "Resuming")
        }

        @Test func prefectRestartReconnectsAndCatchesUp() async throws {
            let server = PrefectServer()
            let e2e = try await EndToEnd(prefect: server)
            let relay = try e2e.startRelay()
            try e2e.registerDevice()
            await server.stop()
            try waitUntil("the relay notices", timeout: 30) {
                (try? relay.http.request("GET", "/health").json?["subscribed"]) == .bool(false)
            }
            _ = try await server.apiURL()
            try waitUntil("the relay resubscribes", timeout: 90) {
                (try? relay.http.request("GET", "/health").json?["subscribed"]) == .bool(true)
            }
            let run = try e2e.runFlow("plain")
            try waitUntil("the alert", timeout: 60) { !e2e.pushes(to: EndToEnd.deviceToken, run: run).isEmpty }
            try e2e.resume(run)
            await server.stop()
        }
    }
}

/// The start goes stale when the pause times out: `aps.stale-date` is the props' `timeoutAt`, and that is the
/// pause's state timestamp plus the flow's `pause_timeout` (±5 s: Prefect computes the expiry on the flow's side).
func expectStaleAtTheTimeout(_ start: JSONValue, timeoutSeconds: Int64) throws {
    let props = try #require(activityProps(start))
    let stale = try #require(start["aps"]?["stale-date"]?.int)
    let since = try #require(props["waitingSince"]?.int)
    #expect(props["timeoutAt"]?.int == stale)
    #expect(abs(stale - (since + timeoutSeconds)) <= 5, "stale-date \(stale), waiting since \(since)")
}

/// The relay's `/metrics` once the pause's end is counted there (the end push can reach the fake APNs before the
/// relay's counters are read).
func pauseMetrics(_ e2e: EndToEnd) throws -> Exposition {
    let relay = try #require(e2e.relay)
    var exposition = Exposition()
    try waitUntil("the pause's end in /metrics", timeout: 10) {
        let reply = try relay.http.request("GET", "/metrics", headers: ["Authorization": PrefectServer.authorization])
        guard reply.status == 200 else { return false }
        exposition = try Exposition(parsing: reply.body)
        return (exposition.value("prefect_push_pauses_ended_total") ?? 0) >= 1
    }
    return exposition
}

/// The relay's `pause.end` log lines with `outcome`.
func pauseEnds(_ e2e: EndToEnd, outcome: String) throws -> [Substring] {
    try #require(e2e.relay).process.log.split(separator: "\n")
        .filter { $0.contains("event=pause.end ") && $0.contains(" outcome=\(outcome) ") }
}

/// `prefect-push status` on the end-to-end relay's store, while that relay runs.
func statusCommand(_ e2e: EndToEnd, json: Bool) throws -> (code: Int32?, out: String) {
    // A log of its own per run: a child's output is appended to its log.
    let log = e2e.directory + "/status-\(json ? "json" : "text")-\(SystemClock.monotonic()).log"
    let process = try ChildProcess(RelayProcess.binary, json ? ["status", "--json"] : ["status"],
                                   environment: ["DB_PATH": e2e.directory + "/relay.db"], logPath: log)
    let code = process.waitForExit(timeout: 30)
    return (code, (try? TestFiles.read(log)) ?? "")
}
