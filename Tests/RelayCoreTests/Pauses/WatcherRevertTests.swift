import Testing
@testable import RelayCore

/// A store write that failed is undone in memory, so the same input decides the same step again.
@Suite struct WatcherRevertTests {
    let paused: StateEvent
    let resumed: StateEvent
    let t0: Double

    init() throws {
        paused = try WatcherFixture.stateEvent("ws-event-paused.json")
        resumed = try WatcherFixture.stateEvent("ws-event-running-after-resume.json")
        t0 = paused.stateTimestamp
    }

    private var pausedRun: FlowRun {
        FlowRun(id: paused.runID, stateID: paused.stateID, stateType: "PAUSED", stateName: "Paused",
                stateTimestamp: paused.stateTimestamp, pauseTimeout: paused.stateTimestamp + 900)
    }

    @Test func anUnrecordedPauseIsAnnouncedWhenSeenAgain() {
        var watcher = PauseWatcher(pauses: [])
        let first = watcher.handle(.event(paused), now: t0 + 0.05)
        guard case .record = first.first else { Issue.record("expected a record first, got \(first)"); return }
        watcher.revert(first[0])
        #expect(watcher.waitingCount == 0)
        // The run read the relay makes on its retry schedule finds the pause again and announces it.
        let again = watcher.handle(.run(pausedRun), now: t0 + 5)
        #expect(again.announced == [paused.stateID])
        // So would a replay of the same event (after a reconnect's backfill).
        var other = PauseWatcher(pauses: [])
        let once = other.handle(.event(paused), now: t0 + 0.05)
        other.revert(once[0])
        #expect(other.handle(.event(paused), now: t0 + 1).announced == [paused.stateID])
    }

    @Test func anUnrecordedEndIsDecidedAgain() {
        var watcher = PauseWatcher(pauses: [])
        _ = watcher.handle(.event(paused), now: t0 + 0.05)
        let ending = watcher.handle(.event(resumed), now: t0 + 10)
        guard let mark = ending.first(where: { if case .markEnded = $0 { true } else { false } }) else {
            Issue.record("expected markEnded in \(ending)")
            return
        }
        watcher.revert(mark)
        #expect(watcher.waitingCount == 1)
        let running = FlowRun(id: paused.runID, stateID: resumed.stateID, stateType: "RUNNING", stateName: "Running",
                              stateTimestamp: resumed.occurred)
        let again = watcher.handle(.run(running), now: t0 + 15)
        #expect(again.contains { if case .end = $0 { true } else { false } })
        #expect(watcher.waitingCount == 0)
    }

    @Test func anUnrecordedReminderIsDecidedOnTheNextTick() {
        var watcher = PauseWatcher(pauses: [])
        _ = watcher.handle(.run(pausedRun), now: t0 + 1)
        let remind = watcher.handle(.tick, now: t0 + 900 - 200)
        guard let mark = remind.first(where: { if case .markReminded = $0 { true } else { false } }) else {
            Issue.record("expected a reminder in \(remind)")
            return
        }
        watcher.revert(mark)
        #expect(watcher.handle(.tick, now: t0 + 900 - 199).contains { if case .remind = $0 { true } else { false } })
        #expect(!watcher.handle(.tick, now: t0 + 900 - 198).contains { if case .remind = $0 { true } else { false } })
    }
}
