import Testing
@testable import Relay
@testable import RelayCore

/// An announce with no context waits for a late custom event on the pause tracker, which wakes it when one comes for
/// the run (not on a poll) and at its deadline otherwise.
@Suite struct LateContextWaitTests {
    private let runID = "8c848c8b-7db3-4f2d-b242-c89c17d44b0f"  // the run ws-event-custom.json names

    private func tracker() throws -> (PauseTracker, StoreScratch) {
        let dir = try StoreScratch()
        let config = try Config(environment: ["PREFECT_API_URL": "http://127.0.0.1:1/api"])
        let owners = try RelayOwners(store: try Store(path: dir.file("relay.db")),
                                     prefect: PrefectClient(config: config, http: try HTTPPool()), apns: nil, uiRoot: "",
                                     topic: "io.example")
        return (owners.tracker, dir)
    }

    private var customEvent: JSONValue { ContextFixtures.json("prefect/ws-event-custom.json")["event"]! }

    @Test func anEventForTheRunWakesItsWaiterLongBeforeTheDeadline() async throws {
        let (relay, _) = try tracker()
        // Far off, so that only the event can end the wait in time: a 2-core machine starting every suite at once
        // has starved this test of its executor for 30 s.
        let deadline = SystemClock.monotonic() + 600
        let runID = self.runID
        let waiting = Task { await relay.liveEvents(runID: runID, after: 0, until: deadline) }
        // Bounded: the waiter registers within a few hops.
        await poll(within: 30, every: 0.001) { await relay.liveWaiters[runID] != nil }
        #expect(await relay.liveWaiters[runID]?.count == 1)

        // Another run's event leaves it waiting.
        guard case .object(var other) = customEvent else { Issue.record("the fixture is not an object"); return }
        other["resource"] = ["prefect.resource.id": "prefect.flow-run.00000000-0000-0000-0000-000000000001"]
        await relay.received(.event(.object(other)))
        #expect(await relay.liveWaiters[runID]?.count == 1)

        await relay.received(.event(customEvent))
        let live = await waiting.value
        #expect(SystemClock.monotonic() < deadline - 480)  // woken by the event, not by its deadline
        #expect(live.arrivals == 1)
        #expect(live.events.map(\.name) == ["relay.approval.requested"])
        #expect(await relay.liveWaiters.isEmpty)
    }

    @Test func withNothingComingItGoesOnAtItsDeadline() async throws {
        let (relay, _) = try tracker()
        let live = await relay.liveEvents(runID: runID, after: 0, until: SystemClock.monotonic() + 0.02)
        #expect(live.arrivals == 0 && live.events.isEmpty)
        #expect(await relay.liveWaiters.isEmpty)
    }

    @Test func somethingAlreadyNewIsAnsweredAtOnce() async throws {
        let (relay, _) = try tracker()
        await relay.received(.event(customEvent))
        // Seen 0 and there is 1: no wait at all, even with a deadline an hour away.
        let live = await relay.liveEvents(runID: runID, after: 0, until: SystemClock.monotonic() + 3_600)
        #expect(live.arrivals == 1)
        #expect(await relay.liveWaiters.isEmpty)
    }

    @Test func aLateEventAfterARestartRefreshesAPauseAnnouncedBeforeIt() async throws {
        let dir = try StoreScratch()
        let store = try dir.store()
        // Announced before the stop (props stored); another announced pause that has ended; one never announced.
        try store.insertPause(PauseRecord(stateID: "s1", runID: runID, stateName: "Paused", pausedAt: 1, announcedAt: 1))
        try store.setProps(stateID: "s1", props: #"{"runId":"r"}"#)
        try store.insertPause(PauseRecord(stateID: "s2", runID: runID, stateName: "Paused", pausedAt: 1, announcedAt: 1))
        try store.setProps(stateID: "s2", props: #"{"runId":"r"}"#)
        try store.markEnded(stateID: "s2", state: "Running", at: 5)
        try store.insertPause(PauseRecord(stateID: "s3", runID: runID, stateName: "Paused", pausedAt: 1))
        let config = try Config(environment: ["PREFECT_API_URL": "http://127.0.0.1:1/api"])
        let relay = try RelayOwners(store: try dir.store(), prefect: PrefectClient(config: config, http: try HTTPPool()),
                                    apns: nil, uiRoot: "", topic: "io.example").tracker
        #expect(await relay.propsArrivals == ["s1": 0])

        await relay.received(.event(customEvent))
        let refreshes = await relay.jobs.values.filter { $0.kind == .refresh }
        #expect(refreshes.map(\.pause.stateID) == ["s1"])
    }

    /// Props a refresh can't build again (here: stored props this version doesn't read) end the refreshing: the
    /// refresh is done and no event starts another. Counted as still behind, it started itself again as soon as it
    /// was done, a core busy for as long as the pause waited.
    @Test func aRefreshWithNothingToRebuildIsNotStartedAgain() async throws {
        let dir = try StoreScratch()
        let store = try dir.store()
        try store.insertPause(PauseRecord(stateID: "s1", runID: runID, stateName: "Paused", pausedAt: 1, announcedAt: 1))
        try store.setProps(stateID: "s1", props: #"{"runId":"r"}"#)
        let config = try Config(environment: ["PREFECT_API_URL": "http://127.0.0.1:1/api"])
        let relay = try RelayOwners(store: try dir.store(), prefect: PrefectClient(config: config, http: try HTTPPool()),
                                    apns: nil, uiRoot: "", topic: "io.example").tracker
        func settled() async -> Bool {
            let (running, queued, behind) = await (relay.runningJobs, relay.jobs, relay.propsArrivals)
            return running.isEmpty && queued.isEmpty && behind.isEmpty
        }
        await relay.received(.event(customEvent))
        // Bounded: the refresh reads the store once and is done within a few hops.
        await poll(within: 30, every: 0.001) { await settled() }
        #expect(await settled())
        await relay.received(.event(customEvent))  // a later event for the run starts nothing
        #expect(await relay.runningJobs.isEmpty)
    }
}
