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
                (try? JSONParser.parse(request.body))?["body"]?["runId"] == .string(run)
            }
        }

        @Test func apnsTroubleIsRetriedFromTheOutbox() async throws {
            let e2e = try await EndToEnd()
            e2e.development.script(EndToEnd.deviceToken, .reject(503, "ServiceUnavailable"),
                                   .reject(429, "TooManyRequests"), .reject(500, "InternalServerError"), .accept)
            try e2e.startRelay()
            try e2e.registerDevice()
            let run = try e2e.runFlow("plain")
            try waitUntil("the alert after three refusals", timeout: 60) { e2e.pushes(to: EndToEnd.deviceToken, run: run).count >= 4 }
            sleepSeconds(2)  // a settled push is never sent again
            #expect(e2e.pushes(to: EndToEnd.deviceToken, run: run).count == 4)
            #expect(e2e.pushes(to: EndToEnd.startToken, run: run).count == 1)
            let metrics = try e2e.relay!.http.request("GET", "/metrics", headers: ["Authorization": PrefectServer.authorization])
            #expect(metrics.body.contains("prefect_push_outbox_pending 0"))
            e2e.stopFlows()
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
            sleepSeconds(2)
            #expect(e2e.pushes(to: EndToEnd.deviceToken, run: run).count == refused + 1)
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
            sleepSeconds(3)
            let health = try e2e.relay!.http.request("GET", "/health")
            #expect(health.status == 200)  // the API still answers while the store is locked
            #expect(e2e.pushes(to: EndToEnd.deviceToken, run: run).isEmpty)
            try blocker.execute("COMMIT")
            try waitUntil("the alert after the lock", timeout: 45) { !e2e.pushes(to: EndToEnd.deviceToken, run: run).isEmpty }
            sleepSeconds(2)
            #expect(e2e.pushes(to: EndToEnd.deviceToken, run: run).count == 1)
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
