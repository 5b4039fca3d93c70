import Testing
@testable import RelayCore

@Suite struct ContextPrefectParsingTests {
    @Test func flowRunWithInput() {
        let run = RunDetails(prefect: Fixtures.response("rest-flow-run-paused-with-input"))!
        #expect(run.id == "95d737c2-8dd4-4a0b-b4d5-e6d147c8ff6e")
        #expect(run.name == "aquamarine-bonobo")
        #expect(run.flowID == "7d845611-c5b7-4100-8803-0a79fd9a89c0")
        #expect(run.parameters.isEmpty)
        let state = run.state!
        #expect(state.id == "01a22957-ea16-7c7c-9515-2d8772a174b5")
        #expect(state.type == "PAUSED" && state.name == "Paused" && state.isPaused && !state.isSuspended)
        #expect(state.timestamp == "2026-11-29T22:05:57.142583Z")
        #expect(state.pauseTimeout == "2026-11-29T22:20:57.133910Z")
        #expect(state.runInputKeyset == InputKeyset(schema: "paused-1-schema", description: "paused-1-description",
                                                   response: "paused-1-response"))
        #expect(state.waitingSince == 1_795_989_957)
        #expect(state.timeoutAt == 1_795_990_857)
    }

    @Test func flowRunWithoutInputAndSuspended() {
        let plain = RunDetails(prefect: Fixtures.response("rest-flow-run-paused-no-input"))!
        #expect(plain.state?.runInputKeyset == nil)
        #expect(plain.state?.timeoutAt != nil)
        let suspended = RunDetails(prefect: Fixtures.response("rest-flow-run-suspended"))!
        #expect(suspended.state?.name == "Suspended")
        #expect(suspended.state?.isSuspended == true)
        #expect(suspended.state?.pauseTimeout == nil && suspended.state?.timeoutAt == nil)
        #expect(suspended.state?.runInputKeyset?.schema == "suspended-1-schema")
        let failed = RunDetails(prefect: Fixtures.response("rest-flow-run-suspend-without-deployment"))!
        #expect(failed.state?.isPaused == false)
    }

    @Test func flowRunListing() {
        let runs = RunDetails.list(prefect: Fixtures.response("rest-flow-runs-filter-paused"))
        #expect(!runs.isEmpty)
        #expect(runs.allSatisfy { $0.state?.isPaused == true })
    }

    @Test func inputRowsKeepValueAsText() {
        let rows = InputRow.list(prefect: Fixtures.response("rest-input-filter-one-field"))
        #expect(rows.map(\.key) == ["paused-1-schema", "paused-1-description"])
        #expect(rows[1].value.hasPrefix("\"## Approve the nightly deploy?\\n"))
        let after = InputRow.list(prefect: Fixtures.response("rest-input-filter-after-resume"))
        #expect(after.map(\.key).last == "paused-1-response")
    }

    @Test func artifacts() {
        let artifacts = RunArtifact.list(prefect: Fixtures.response("rest-artifacts-filter"))
        #expect(artifacts.count == 1)
        #expect(artifacts[0].key == "approval-request" && artifacts[0].type == "markdown")
        #expect(artifacts[0].description == "Approval request for the nightly deploy")
        #expect(artifacts[0].data.string?.hasPrefix("## Approve the nightly deploy?") == true)
    }

    @Test func eventsFromRESTAndWebsocket() {
        let listed = RunEvent.list(prefect: Fixtures.response("rest-events-filter-custom-event"))
        let pushed = RunEvent(prefect: Fixtures.json("prefect/ws-event-custom.json"))!
        #expect(listed == [pushed])
        #expect(pushed.name == "relay.approval.requested")
        #expect(pushed.payload["body"]?.string == "Deploy billing-api 1.4.2 to production?")
        #expect(pushed.names("prefect.flow-run.8c848c8b-7db3-4f2d-b242-c89c17d44b0f"))
        #expect(pushed.relatedIDs == ["prefect.flow.a4c4271d-f78a-4f9e-a762-9c894220b85c"])
        let paused = RunEvent(prefect: Fixtures.json("prefect/ws-event-paused.json"))!
        #expect(paused.name == "prefect.flow-run.Paused" && paused.id == "01a22957-ea16-7c7c-9515-2d8772a174b5")
    }

    @Test func junkGivesNothingRatherThanACrash() {
        #expect(RunDetails(prefect: .null) == nil)
        #expect(RunDetails(prefect: ["id": 5]) == nil)
        #expect(RunDetails(prefect: ["id": "x", "state": "PAUSED"])?.state == nil)
        #expect(InputRow.list(prefect: ["not": "a list"]).isEmpty)
        #expect(InputRow.list(prefect: [["key": "k", "value": 3], ["key": "k2", "value": "1"]]).map(\.key) == ["k2"])
        #expect(RunEvent.list(prefect: [1, "x", ["event": "a"]]).map(\.name) == ["a"])
        #expect(RunArtifact.list(prefect: .string("x")).isEmpty)
    }

    @Test(arguments: [
        ("2026-11-29T22:05:57.142583Z", 1_795_989_957.142583),
        ("2026-11-29T22:05:57.142583+00:00", 1_795_989_957.142583),
        ("2026-01-01T00:00:00Z", 1_767_225_600.0),
        ("1970-01-01T00:00:00Z", 0.0),
        ("2026-01-01T02:00:00+02:00", 1_767_225_600.0),
        ("2024-02-29T12:00:00.5z", 1_709_208_000.5),
    ])
    func timestamps(text: String, seconds: Double) {
        let parsed = Timestamp.parse(text)
        #expect(parsed != nil && abs(parsed! - seconds) < 0.000_01)
    }

    @Test(arguments: ["", "2026-11-29", "2026-11-29T22:05:57", "2026-13-01T00:00:00Z", "2026-11-29T22:05:57.Z",
                      "2026-11-29T22:05:57Zjunk", "x026-11-29T22:05:57Z", String(repeating: "9", count: 100)])
    func badTimestamps(text: String) {
        #expect(Timestamp.parse(text) == nil)
    }
}
