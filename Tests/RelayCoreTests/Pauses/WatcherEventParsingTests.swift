import Testing
@testable import RelayCore

@Suite struct WatcherEventParsingTests {
    @Test func readsAPausedStateEvent() throws {
        let event = try #require(PrefectEvent(message: WatcherFixture.json("ws-event-paused.json")))
        #expect(event.id == "01a22957-ea16-7c7c-9515-2d8772a174b5")
        #expect(event.name == "prefect.flow-run.Paused")
        #expect(event.runID == "95d737c2-8dd4-4a0b-b4d5-e6d147c8ff6e")
        #expect(event.follows == "01a22957-e986-7989-ae1a-3c73102a14ae")
        #expect(event.related.count == 3)

        let state = try #require(event.stateEvent)
        #expect(state.stateID == event.id)
        #expect(state.isPaused)
        #expect(state.stateType == "PAUSED")
        #expect(state.stateName == "Paused")
        #expect(state.runName == "aquamarine-bonobo")
        #expect(state.flowName == "fixture-one-field")
        #expect(state.flowID == "7d845611-c5b7-4100-8803-0a79fd9a89c0")
        #expect(state.deploymentID == nil)
        #expect(abs(state.stateTimestamp - 1_795_989_957.142583) < 1e-6)
        #expect(state.occurred == state.stateTimestamp)
    }

    @Test func suspendIsAPauseByTypeAndCarriesItsDeployment() throws {
        let state = try WatcherFixture.stateEvent("ws-event-suspended.json")
        #expect(state.isPaused)
        #expect(state.stateName == "Suspended")
        #expect(state.deploymentID != nil)

        let resuming = try WatcherFixture.stateEvent("ws-event-resuming-after-suspend.json")
        #expect(!resuming.isPaused)
        #expect(resuming.stateType == "SCHEDULED")
        #expect(resuming.stateName == "Resuming")
        #expect(resuming.follows == state.stateID)
    }

    @Test func aCustomEventIsNotAStateEvent() throws {
        let event = try #require(PrefectEvent(message: WatcherFixture.json("ws-event-custom.json")))
        #expect(event.name == "relay.approval.requested")
        #expect(event.runID == "8c848c8b-7db3-4f2d-b242-c89c17d44b0f")
        #expect(event.payload["body"]?.string == "Deploy billing-api 1.4.2 to production?")
        #expect(event.related(role: "flow")?.name == "fixture-custom-event")
        #expect(event.stateEvent == nil)
    }

    @Test func refusesOtherMessages() throws {
        #expect(PrefectEvent(message: ["type": "auth_success"]) == nil)
        #expect(PrefectEvent(message: ["type": "event", "event": ["id": "x", "event": "y"]]) == nil)
        let noTime: JSONValue = ["type": "event", "event": [
            "id": "x", "event": "y", "occurred": "yesterday", "resource": ["prefect.resource.id": "a"]]]
        #expect(PrefectEvent(message: noTime) == nil)
        // An event about something other than a flow run has no run and no state.
        let other: JSONValue = ["id": "x", "event": "prefect.artifact.created", "occurred": "2026-01-01T00:00:00Z",
                                "resource": ["prefect.resource.id": "prefect.artifact.1"]]
        let event = try #require(PrefectEvent(json: other))
        #expect(event.runID == nil)
        #expect(event.stateEvent == nil)
    }

    @Test func readsThePausedListing() throws {
        let runs = FlowRun.list(json: try WatcherFixture.json("rest-flow-runs-filter-paused.json")["response"] ?? .null)
        #expect(runs.count == 2)
        let suspended = runs[0]
        #expect(suspended.id == "beecff60-4655-477d-978d-5527d9903059")
        #expect(suspended.stateID == "01a22958-2b5a-7f57-9141-72bde763fecb")
        #expect(suspended.stateName == "Suspended")
        #expect(suspended.isPaused)
        #expect(suspended.pauseTimeout == nil)

        let paused = runs[1]
        #expect(paused.stateID == "01a22957-ea16-7c7c-9515-2d8772a174b5")  // the Paused event's id
        #expect(paused.name == "aquamarine-bonobo")
        #expect(abs(paused.pauseTimeout! - 1_795_990_857.13391) < 1e-6)
    }

    @Test func readsSingleRuns() throws {
        let plain = try WatcherFixture.flowRun("rest-flow-run-paused-no-input.json")
        #expect(plain.isPaused)
        #expect(plain.pauseTimeout != nil)

        let failed = try WatcherFixture.flowRun("rest-flow-run-suspend-without-deployment.json")
        #expect(!failed.isPaused)
        #expect(failed.stateType == "FAILED")
        #expect(failed.stateName == "Failed")

        #expect(FlowRun(json: ["id": "x"]) == nil)
        #expect(FlowRun.list(json: ["not": "a list"]).isEmpty)
    }
}
