import Glibc
import Testing
@testable import FakeAPNs
@testable import Relay
@testable import RelayCore

extension SharedPrefect {
    /// Faults between deciding to send and APNs accepting: nothing the relay decided to send is forgotten.
    /// (`make chaos` runs the long versions: kill -9 mid fan-out, APNs killed, socket cuts, a 20 s lock.)
    @Suite(.serialized) struct DeliveryFaultTests {
        /// Accepted alerts for `run` on the test phone.
        private func accepted(_ e2e: EndToEnd, run: String) -> Int {
            e2e.development.requests(for: EndToEnd.deviceToken).count { request in
                guard case .accept? = request.answer else { return false }
                return (try? JSONParser.parse(request.body))?["body"]?["runId"] == .string(run)
            }
        }

        /// Alerts to the test phone by pause (their `apns-collapse-id` is the Paused state's id): how many APNs
        /// refused and how many it accepted.
        private func alertsByPause(_ e2e: EndToEnd) -> [String: (refused: Int, accepted: Int)] {
            var byPause: [String: (refused: Int, accepted: Int)] = [:]
            for request in e2e.development.requests(for: EndToEnd.deviceToken) where request.headers["apns-push-type"] == "alert" {
                let pause = request.headers["apns-collapse-id"] ?? ""
                switch request.answer {
                case .accept?: byPause[pause, default: (0, 0)].accepted += 1
                case .reject?: byPause[pause, default: (0, 0)].refused += 1
                default: break
                }
            }
            return byPause
        }

        /// The phone's token is refused three times (503, 429, 500), then accepted. The refusals go to whichever
        /// alerts come first: this test's run's, or those of runs other tests left paused on the shared server,
        /// which a relay that just started announces too. Every refused alert must still arrive, once.
        @Test func apnsTroubleIsRetriedFromTheOutbox() async throws {
            let e2e = try await EndToEnd()
            e2e.development.script(EndToEnd.deviceToken, .reject(503, "ServiceUnavailable"),
                                   .reject(429, "TooManyRequests"), .reject(500, "InternalServerError"), .accept)
            try e2e.startRelay()
            try e2e.registerDevice()
            let run = try e2e.runFlow("plain")
            try waitUntil("three refusals, and every refused alert and this run's alert accepted", timeout: 60) {
                let byPause = alertsByPause(e2e)
                return byPause.values.reduce(0) { $0 + $1.refused } == 3
                    && byPause.values.allSatisfy { $0.refused == 0 || $0.accepted > 0 } && accepted(e2e, run: run) > 0
            }
            try holds("a settled push is never sent again", for: 2) {
                alertsByPause(e2e).values.allSatisfy { $0.accepted <= 1 }
            }
            let byPause = alertsByPause(e2e)
            #expect(byPause.values.allSatisfy { $0.accepted == 1 }, "\(byPause)")
            #expect(byPause.values.reduce(0) { $0 + $1.refused } == 3)
            #expect(accepted(e2e, run: run) == 1)
            #expect(e2e.pushes(to: EndToEnd.startToken, run: run).count == 1)
            let metrics = try e2e.relay!.http.request("GET", "/metrics", headers: ["Authorization": PrefectServer.authorization])
            #expect(metrics.body.contains("prefect_push_outbox_pending 0"))
            e2e.stopFlows()
        }

        /// A push refused with 503 waits for its retry (the outbox's schedule: about a second). The relay's wall
        /// clock stepped an hour back, or forward, meanwhile moves the retry by nothing: it comes on schedule, once.
        /// Runs paused on the shared server before this test (other tests' leftovers) keep their plain answers.
        @Test(arguments: [Int64(-3600), 3600])
        func aRetryKeepsItsScheduleWhenTheWallClockSteps(by shift: Int64) async throws {
            let clock = try WallClockShift()
            let e2e = try await EndToEnd()
            let earlier = try pausedRuns(e2e)
            e2e.extraEnvironment = clock.environment
            e2e.development.script(EndToEnd.deviceToken, when: { request in
                guard request.headers["apns-push-type"] == "alert", let payload = try? JSONParser.parse(request.body),
                      case .string(let run)? = payload["body"]?["runId"] else { return false }
                return !earlier.contains(run)
            }, .reject(503, "ServiceUnavailable"), .accept)
            try e2e.startRelay()
            try e2e.registerDevice()
            let run = try e2e.runFlow("plain")
            func alerts() -> [FakeAPNs.Request] {
                e2e.development.requests(for: EndToEnd.deviceToken).filter { request in
                    request.headers["apns-push-type"] == "alert" && request.body.contains(run)
                }
            }
            try waitUntil("the alert is refused", timeout: 60) { !alerts().isEmpty }
            try clock.step(shift)
            try waitUntil("the alert is sent again", timeout: 30) { alerts().count >= 2 }
            let sent = alerts()
            let waited = Double(sent[1].arrivedAtNs - sent[0].arrivedAtNs) / 1e9
            // The schedule: the first retry 0.75-1 s after the refusal, taken by the outbox's next look (1 s tick).
            #expect(waited < 5, "retried \(waited) s after the refusal")
            try holds("a settled push is never sent again", for: 2) { alerts().count == 2 }
            #expect(alerts().last?.answer == .accept)
            e2e.stopFlows()
        }

        /// Runs waiting in PAUSED on the shared server now.
        private func pausedRuns(_ e2e: EndToEnd) throws -> Set<String> {
            let reply = try e2e.prefect.call("POST", "/flow_runs/filter",
                                             body: ["flow_runs": ["state": ["type": ["any_": ["PAUSED"]]]], "limit": 200])
            guard case .array(let runs)? = reply.json else { throw TestFailure("flow_runs/filter: \(reply.status)") }
            return Set(runs.compactMap { $0["id"]?.string })
        }

        @Test func aPushStillPendingAtStopIsSentAfterTheRestart() async throws {
            let e2e = try await EndToEnd()
            e2e.development.script(EndToEnd.deviceToken, .reject(503, "ServiceUnavailable"))  // repeats
            try e2e.startRelay()
            try e2e.registerDevice()
            let run = try e2e.runFlow("plain")
            try waitUntil("the first refusal", timeout: 60) { !e2e.pushes(to: EndToEnd.deviceToken, run: run).isEmpty }
            e2e.stopRelay()
            #expect(try Store(path: e2e.directory + "/relay.db").outboxCount() >= 1)
            e2e.development.script(EndToEnd.deviceToken, .accept)
            let refused = e2e.pushes(to: EndToEnd.deviceToken, run: run).count
            try e2e.startRelay()
            try waitUntil("the stored alert is sent", timeout: 30) { e2e.pushes(to: EndToEnd.deviceToken, run: run).count > refused }
            try holds("the stored alert is sent once", for: 2) {
                e2e.pushes(to: EndToEnd.deviceToken, run: run).count == refused + 1
            }
            #expect(try Store(path: e2e.directory + "/relay.db").outboxCount() == 0)
            e2e.stopFlows()
        }

        @Test func aPauseDuringADatabaseLockIsAnnouncedAfterIt() async throws {
            let e2e = try await EndToEnd()
            try e2e.startRelay()
            try e2e.registerDevice()
            // Another process (a backup, an operator's shell) holds the write lock while the run pauses.
            let blocker = try Database(path: e2e.directory + "/relay.db")
            try waitUntil("the write lock is taken", timeout: 10) { (try? blocker.execute("BEGIN IMMEDIATE")) != nil }
            let run = try e2e.runFlow("plain")
            try e2e.waitForState(run, type: "PAUSED")
            try holds("no alert while the store is locked", for: 3) { e2e.pushes(to: EndToEnd.deviceToken, run: run).isEmpty }
            let health = try e2e.relay!.http.request("GET", "/health")
            #expect(health.status == 200)  // the API still answers while the store is locked
            #expect(e2e.pushes(to: EndToEnd.deviceToken, run: run).isEmpty)
            try blocker.execute("COMMIT")
            try waitUntil("the alert after the lock", timeout: 45) { !e2e.pushes(to: EndToEnd.deviceToken, run: run).isEmpty }
            try holds("one alert", for: 2) { e2e.pushes(to: EndToEnd.deviceToken, run: run).count == 1 }
            #expect(e2e.pushes(to: EndToEnd.startToken, run: run).count == 1)
            e2e.stopFlows()
        }

        @Test func aDeletedDatabaseStopsTheRelay() async throws {
            let e2e = try await EndToEnd()
            let relay = try e2e.startRelay()
            unlink(e2e.directory + "/relay.db")
            #expect(relay.process.waitForExit(timeout: 10) == 1)
            #expect(relay.process.log.contains("store.lost"))
        }
    }
}
