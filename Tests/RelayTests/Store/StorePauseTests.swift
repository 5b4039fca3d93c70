import CSQLite
import Testing
@testable import Relay
@testable import RelayCore

/// Pauses: recorded once, reminded once, ended once, pruned after they end.
@Suite struct StorePauseTests {
    private func pause(_ state: String, run: String = "run-1", at: Int64 = 1000, timeout: Int64? = nil,
                       announced: Int64? = nil) -> PauseRecord {
        PauseRecord(stateID: state, runID: run, stateName: "Paused", pausedAt: at, timeoutAt: timeout,
                    announcedAt: announced)
    }

    @Test func insertsOnceAcrossRestarts() throws {
        let dir = try StoreScratch()
        do {
            let store = try dir.store()
            #expect(try store.pause(stateID: "s1") == nil)
            #expect(try store.insertPause(pause("s1", timeout: 4600, announced: 1001)))
            // The same state seen again (listing after the event) changes nothing.
            #expect(try !store.insertPause(pause("s1", run: "other", at: 9, announced: 9)))
            #expect(try store.pause(stateID: "s1") == pause("s1", timeout: 4600, announced: 1001))
        }
        let reopened = try dir.store()
        #expect(try !reopened.insertPause(pause("s1")))
    }

    @Test func remindsOnceAndNeverAfterEnding() throws {
        let dir = try StoreScratch()
        let store = try dir.store()
        try store.insertPause(pause("s1", timeout: 2000))
        try store.insertPause(pause("s2", run: "run-2", timeout: 2000))
        #expect(try store.markReminded(stateID: "s1", at: 1700))
        #expect(try !store.markReminded(stateID: "s1", at: 1750))
        #expect(try store.pause(stateID: "s1")?.remindedAt == 1700)
        #expect(try store.markEnded(stateID: "s2", state: "Running", at: 1500))
        #expect(try !store.markReminded(stateID: "s2", at: 1700))
        #expect(try !store.markReminded(stateID: "ghost", at: 1700))
    }

    /// A late event's props replace the announced ones while the pause waits; never before the announce stored
    /// its own, never once it ended.
    @Test func propsAreReplacedOnlyWhileAnAnnouncedPauseWaits() throws {
        let dir = try StoreScratch()
        let store = try dir.store()
        try store.insertPause(pause("s1", announced: 1001))
        #expect(try !store.replaceProps(stateID: "s1", props: "late"))  // not announced yet
        #expect(try store.setProps(stateID: "s1", props: "announced") == .written)
        #expect(try !store.replaceProps(stateID: "s1", props: "announced"))  // the same text: nothing changes
        #expect(try store.replaceProps(stateID: "s1", props: "late"))
        #expect(try store.props(stateID: "s1") == "late")
        try store.markEnded(stateID: "s1", state: "Running", at: 2000)
        #expect(try !store.replaceProps(stateID: "s1", props: "later"))
        #expect(try store.props(stateID: "s1") == "late")
    }

    @Test func endsOnce() throws {
        let dir = try StoreScratch()
        let store = try dir.store()
        try store.insertPause(pause("s1"))
        #expect(try store.markEnded(stateID: "s1", state: "Running", at: 1500))
        #expect(try !store.markEnded(stateID: "s1", state: "Cancelled", at: 1600))
        let ended = try store.pause(stateID: "s1")
        #expect(ended?.endedAt == 1500)
        #expect(ended?.endedState == "Running")
        #expect(ended?.isWaiting == false)
        #expect(try !store.markEnded(stateID: "ghost", state: "Running", at: 1))
    }

    @Test func countsAndFindsWaitingPauses() throws {
        let dir = try StoreScratch()
        let store = try dir.store()
        #expect(try store.waitingCount() == 0)
        #expect(try store.waitingPauses().isEmpty)
        try store.insertPause(pause("s3", run: "run-3", at: 3000))
        try store.insertPause(pause("s1", run: "run-1", at: 1000))
        try store.insertPause(pause("s2", run: "run-2", at: 2000))
        #expect(try store.waitingCount() == 3)
        #expect(try store.waitingPauses().map(\.stateID) == ["s1", "s2", "s3"])
        #expect(try store.waitingPause(runID: "run-2")?.stateID == "s2")

        try store.markEnded(stateID: "s2", state: "Completed", at: 2500)
        #expect(try store.waitingCount() == 2)
        #expect(try store.waitingPauses().map(\.stateID) == ["s1", "s3"])
        #expect(try store.waitingPause(runID: "run-2") == nil)

        // A run paused again after resuming: the new pause is the waiting one.
        try store.insertPause(pause("s2b", run: "run-2", at: 2600))
        #expect(try store.waitingPause(runID: "run-2")?.stateID == "s2b")
        #expect(try store.waitingPause(runID: "nothing") == nil)
    }

    @Test func prunesOnlyPausesEndedBeforeTheCutoff() throws {
        let dir = try StoreScratch()
        let store = try dir.store()
        let day: Int64 = 86_400
        let now: Int64 = 10 * day
        try store.insertPause(pause("old", run: "r1", at: 1))
        try store.insertPause(pause("recent", run: "r2", at: 1))
        try store.insertPause(pause("waiting", run: "r3", at: 1))
        try store.markEnded(stateID: "old", state: "Completed", at: now - day - 1)
        try store.markEnded(stateID: "recent", state: "Completed", at: now - day + 1)
        #expect(try store.prunePauses(endedBefore: now - day) == 1)
        #expect(try store.pause(stateID: "old") == nil)
        #expect(try store.pause(stateID: "recent") != nil)
        #expect(try store.pause(stateID: "waiting") != nil)
        #expect(try store.prunePauses(endedBefore: now - day) == 0)
    }
}
