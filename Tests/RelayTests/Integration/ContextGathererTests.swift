import Testing
@testable import Relay
@testable import RelayCore

extension SharedPrefect {
    /// The REST reads behind an alert (run, flow, input rows with the retry, artifacts, events) against a real
    /// Prefect server, each with a run made for it by tools/flows.py, and the alert text they produce.
    @Suite(.serialized) struct ContextGathererTests {
        /// A Prefect client with a connection pool of its own, as the relay has.
        final class Client: @unchecked Sendable {
            let http: HTTPPool
            let gatherer: ContextGatherer

            init(api: String) throws {
                let config = try Config(environment: ["PREFECT_API_URL": api, "PREFECT_API_AUTH_STRING": PrefectServer.authString])
                http = try HTTPPool()
                gatherer = ContextGatherer(prefect: PrefectClient(config: config, http: http))
            }

            deinit { http.close() }
        }

        /// `waitForStoredEvent`: Prefect stores events a few seconds after they happen; this read tests /events/filter,
        /// so it waits for the store (the relay itself also takes custom events live from the socket).
        func gather(_ kind: String, waitForStoredEvent: String? = nil) async throws -> (ContextGatherer.Gathered, AlertText) {
            let e2e = try await EndToEnd()
            defer { e2e.stopFlows() }
            let client = try Client(api: e2e.api)
            let runID = try e2e.runFlow(kind)
            try e2e.waitForState(runID, type: "PAUSED")
            let run = try e2e.prefect.call("GET", "/flow_runs/\(runID)").json
            let stateID = try #require(run?["state"]?["id"]?.string)
            let pausedAt = try #require(run?["state"]?["timestamp"]?.string.flatMap(Timestamp.parse))
            if let name = waitForStoredEvent {
                try waitUntil("Prefect stores \(name)", timeout: 30) {
                    let found = try? e2e.prefect.call("POST", "/events/filter", body: [
                        "filter": ["any_resource": ["id": [.string("prefect.flow-run." + runID)]], "event": ["name": [.string(name)]]],
                    ])
                    return (found?.json?["events"]?.array?.count ?? 0) > 0
                }
            }
            // Straight after the pause, as the relay would: the reads must wait out the late input rows themselves.
            let gathered = try #require(await client.gatherer.gather(runID: runID, stateID: stateID, pausedAt: pausedAt,
                                                                     flowID: nil, onRun: { _ in })?.gathered)
            #expect(gathered.movedOn == false)
            #expect(gathered.context.run.state?.id == stateID)
            return (gathered, AlertText(context: gathered.context, readers: .live))
        }

        @Test func inputWithADescription() async throws {
            let (gathered, text) = try await gather("input")
            #expect(gathered.context.flowName == "nightly-deploy")
            #expect(gathered.context.inputRows.contains { $0.key.hasSuffix("-description") })
            #expect(gathered.context.inputRows.contains { $0.key.hasSuffix("-schema") })
            #expect(text.title == "Approve the nightly deploy?")
            #expect(text.contextSource == .inputDescription)
            #expect(text.category == .reply)
        }

        @Test func strInput() async throws {
            let (gathered, text) = try await gather("str")
            #expect(gathered.context.inputRows.contains { $0.key.hasSuffix("-schema") })
            #expect(text.category == .reply)
        }

        @Test func approvalArtifact() async throws {
            let (gathered, text) = try await gather("artifact")
            #expect(gathered.context.artifacts.contains { $0.key == "approval-request" })
            #expect(text.contextSource == .approvalArtifact)
            #expect(text.title == "Approval request for the nightly deploy")
            #expect(text.category == .plain)
        }

        @Test func customEvent() async throws {
            let (gathered, text) = try await gather("event", waitForStoredEvent: "relay.approval.requested")
            #expect(gathered.context.events.contains { $0.name == "relay.approval.requested" })
            #expect(text.body.contains("Deploy billing-api 1.4.2 to production?"))
        }

        @Test func movedOnRunIsRecognised() async throws {
            let e2e = try await EndToEnd()
            defer { e2e.stopFlows() }
            let client = try Client(api: e2e.api)
            let runID = try e2e.runFlow("plain")
            try e2e.waitForState(runID, type: "PAUSED")
            let run = try e2e.prefect.call("GET", "/flow_runs/\(runID)").json
            let stateID = try #require(run?["state"]?["id"]?.string)
            let pausedAt = try #require(run?["state"]?["timestamp"]?.string.flatMap(Timestamp.parse))
            try e2e.resume(runID)
            try e2e.waitForState(runID, type: "RUNNING", timeout: 30)
            let gathered = try #require(await client.gatherer.gather(runID: runID, stateID: stateID, pausedAt: pausedAt,
                                                                     flowID: nil, onRun: { _ in })?.gathered)
            #expect(gathered.movedOn)
        }
    }
}
