import Testing
@testable import RelayCore

/// Event and listing sequences → actions, with `now` injected (AHC state-machine style, no sockets).
@Suite struct WatcherTests {
    // The one-field run of the fixture capture: paused at 22:05:57.142583, timeout 15 min later.
    let paused: StateEvent
    let resumed: StateEvent
    let listing: [FlowRun]
    let t0: Double

    init() throws {
        paused = try WatcherFixture.stateEvent("ws-event-paused.json")
        resumed = try WatcherFixture.stateEvent("ws-event-running-after-resume.json")
        listing = FlowRun.list(json: try WatcherFixture.json("rest-flow-runs-filter-paused.json")["response"] ?? .null)
        t0 = paused.stateTimestamp
    }

    var pausedRecord: PauseRecord {
        PauseRecord(stateID: paused.stateID, runID: paused.runID, stateName: "Paused", pausedAt: 1_795_989_957)
    }

    // MARK: - Announce once

    @Test func aPauseIsAnnouncedOnce() {
        var watcher = PauseWatcher(pauses: [])
        var announced = pausedRecord
        announced.announcedAt = 1_795_989_957
        let step1 = watcher.handle(.event(paused), now: t0 + 0.05)
        #expect(step1 == [.record(announced), .announce(announced, .event(paused))])
        #expect(watcher.waitingCount == 1)
        let step2 = watcher.handle(.event(paused), now: t0 + 0.1)
        #expect(step2 == [])
    }

    /// Each run's state events end that run's pauses only, among many runs' pauses kept (waiting and ended), and a
    /// pruned pause is gone from its run too.
    @Test func aRunsEventsTouchOnlyItsOwnPauses() {
        var watcher = PauseWatcher(pauses: [])
        let t = t0
        func pause(_ run: Int, _ n: Int, at time: Double) -> StateEvent {
            StateEvent(stateID: "s\(run)-\(n)", runID: "run-\(run)", stateType: "PAUSED", stateName: "Paused",
                       stateTimestamp: time)
        }
        func running(_ run: Int, _ n: Int, at time: Double) -> StateEvent {
            StateEvent(stateID: "r\(run)-\(n)", runID: "run-\(run)", stateType: "RUNNING", stateName: "Running",
                       stateTimestamp: time)
        }
        for run in 0..<50 {
            _ = watcher.handle(.event(pause(run, 0, at: t + Double(run))), now: t + Double(run))
            if run % 2 == 0 { _ = watcher.handle(.event(running(run, 0, at: t + Double(run) + 0.5)), now: t + Double(run) + 0.5) }
        }
        #expect(watcher.waitingCount == 25)
        let ended = watcher.handle(.event(running(7, 0, at: t + 100)), now: t + 100)
        #expect(ended.compactMap { if case .end(let p) = $0 { p.stateID } else { nil } } == ["s7-0"])
        #expect(watcher.waitingCount == 24)
        // A second pause of run 9 ends its first; nobody else's.
        let again = watcher.handle(.event(pause(9, 1, at: t + 101)), now: t + 101)
        #expect(again.compactMap { if case .end(let p) = $0 { p.stateID } else { nil } } == ["s9-0"])
        #expect(again.announced == ["s9-1"])
        // Past the retention every ended pause goes, from its run too.
        _ = watcher.handle(.tick, now: t + 101 + watcher.rules.retention + 10)
        #expect(watcher.pauses.values.allSatisfy { $0.isWaiting })
        #expect(watcher.pauses["s0-0"] == nil)
    }

    /// Memory keeps the newest `memoryEndedLimit` ended pauses and none past `memoryRetention`; waiting pauses always
    /// stay.
    @Test func memoryKeepsABoundedTailOfEndedPauses() {
        var rules = PauseWatcher.Rules()
        rules.memoryEndedLimit = 10
        var watcher = PauseWatcher(pauses: [], rules: rules)
        let t = t0
        for run in 0..<40 {
            let at = t + Double(run)
            _ = watcher.handle(.event(StateEvent(stateID: "p\(run)", runID: "run-\(run)", stateType: "PAUSED",
                                                 stateName: "Paused", stateTimestamp: at)), now: at)
            if run < 35 {
                _ = watcher.handle(.event(StateEvent(stateID: "r\(run)", runID: "run-\(run)", stateType: "RUNNING",
                                                     stateName: "Running", stateTimestamp: at + 0.5)), now: at + 0.5)
            }
        }
        _ = watcher.handle(.tick, now: t + 50)
        #expect(watcher.waitingCount == 5)
        #expect(watcher.pauses.count == 15)  // 5 waiting + the 10 newest ended
        #expect(watcher.pauses["p34"]?.isWaiting == false && watcher.pauses["p25"] != nil)
        #expect(watcher.pauses["p24"] == nil && watcher.pauses["p0"] == nil)
        #expect(watcher.pauses["p39"]?.isWaiting == true)
        // Two hours on, every ended pause has left memory; the waiting ones are still there.
        _ = watcher.handle(.tick, now: t + 50 + rules.memoryRetention + 1)
        #expect(watcher.pauses.count == 5 && watcher.pauses.values.allSatisfy(\.isWaiting))
    }

    @Test func eventThenListingAnnouncesOnce() {
        var watcher = PauseWatcher(pauses: [])
        var actions = watcher.handle(.event(paused), now: t0 + 0.05)
        let later = watcher.handle(.listing(listing), now: t0 + 30)
        actions += later
        #expect(actions.announced == [paused.stateID, listing[0].stateID])  // the suspend is news, the pause is not
        #expect(later.contains(.setTimeout(stateID: paused.stateID, timeoutAt: 1_795_990_857)))
        #expect(watcher.waitingCount == 2)
    }

    @Test func listingThenEventAnnouncesOnce() {
        var watcher = PauseWatcher(pauses: [])
        let first = watcher.handle(.listing(listing), now: t0 + 20)
        #expect(first.announced == [listing[0].stateID, paused.stateID])
        #expect(first.contains { if case .announce(_, .run(listing[1])) = $0 { true } else { false } })
        let step3 = watcher.handle(.event(paused), now: t0 + 21)
        #expect(step3 == [])
        let step4 = watcher.handle(.listing(listing), now: t0 + 80)
        #expect(step4 == [])
    }

    @Test func aRestartNeverAnnouncesAgain() {
        var before = PauseWatcher(pauses: [])
        _ = before.handle(.event(paused), now: t0 + 0.05)
        _ = before.handle(.listing(listing), now: t0 + 30)

        var after = PauseWatcher(pauses: Array(before.pauses.values))
        #expect(after.waitingCount == 2)
        let step5 = after.handle(.event(paused), now: t0 + 40)
        #expect(step5 == [])  // the reconnect's backfill
        let step6 = after.handle(.listing(listing), now: t0 + 41)
        #expect(step6 == [])
    }

    @Test func aPauseWhileDownIsAnnouncedByTheListingOnce() {
        var watcher = PauseWatcher(pauses: [])
        let actions = watcher.handle(.listing([listing[1]]), now: t0 + 120)
        var record = pausedRecord
        record.timeoutAt = 1_795_990_857
        record.announcedAt = Int64(t0 + 120)
        #expect(actions == [.record(record), .announce(record, .run(listing[1]))])
        let step7 = watcher.handle(.event(paused), now: t0 + 121)
        #expect(step7 == [])  // backfill arrives after the listing
    }

    @Test func firstBootRecordsOldPausesQuietly() {
        var watcher = PauseWatcher(pauses: [])
        let actions = watcher.handle(.listing(listing), now: t0 + 16 * 60)
        #expect(actions.count == 2)
        #expect(actions.announced.isEmpty)
        #expect(watcher.pauses.values.allSatisfy { $0.announcedAt == nil && $0.isWaiting })
        let step8 = watcher.handle(.tick, now: 1_795_990_857 - 60)
        #expect(step8.isEmpty)  // never announced: no reminder either
    }

    @Test func fifteenMinutesIsTheAnnounceWindow() {
        var fresh = PauseWatcher(pauses: [])
        let step9 = fresh.handle(.event(paused), now: t0 + 899)
        #expect(step9.announced == [paused.stateID])
        var stale = PauseWatcher(pauses: [])
        let step10 = stale.handle(.event(paused), now: t0 + 900)
        #expect(step10.announced.isEmpty)
    }

    @Test func aPauseIsRecognisedByTypeNotName() {
        var custom = paused
        custom.stateID = "custom-state"
        custom.stateName = "AwaitingApproval"
        var notAPause = paused
        notAPause.stateID = "other-state"
        notAPause.stateType = "RUNNING"
        var watcher = PauseWatcher(pauses: [])
        let step11 = watcher.handle(.event(custom), now: t0)
        #expect(step11.announced == ["custom-state"])
        var other = PauseWatcher(pauses: [])
        let step12 = other.handle(.event(notAPause), now: t0)
        #expect(step12 == [])
    }

    // MARK: - Leave

    @Test func resumeEndsWithRunning() {
        var watcher = PauseWatcher(pauses: [])
        _ = watcher.handle(.event(paused), now: t0 + 0.05)
        let now = resumed.occurred + 0.02
        var ended = watcher.pauses[paused.stateID]!
        ended.endedAt = Int64(now)
        ended.endedState = "Running"
        let step13 = watcher.handle(.event(resumed), now: now)
        #expect(step13
            == [.markEnded(stateID: paused.stateID, at: Int64(now), state: "Running"), .end(ended)])
        #expect(watcher.waitingCount == 0)

        var completed = resumed
        completed.stateID = "completed"
        completed.stateName = "Completed"
        completed.occurred += 3
        let step14 = watcher.handle(.event(completed), now: now + 3)
        #expect(step14 == [])
    }

    @Test func resumingASuspendEndsWithResuming() throws {
        var watcher = PauseWatcher(pauses: [])
        _ = watcher.handle(.event(try WatcherFixture.stateEvent("ws-event-suspended.json")), now: t0 + 17)
        let resuming = try WatcherFixture.stateEvent("ws-event-resuming-after-suspend.json")
        let step15 = watcher.handle(.event(resuming), now: resuming.occurred)
        #expect(step15.ended == ["Resuming"])
    }

    @Test func cancelEndsWithThatStateAndTheLateFailureIsIgnored() throws {
        let cancelled = try WatcherFixture.stateEvent("ws-event-cancelled.json")
        let lateFailure = try WatcherFixture.stateEvent("ws-event-failed-after-cancelled.json")
        var watcher = PauseWatcher(pauses: [])
        _ = watcher.handle(.event(pause(run: cancelled.runID, id: "01a22959-5770-786a-a636-e778f74725d9",
                                        at: "2026-11-29T22:07:30.672734Z")), now: cancelled.occurred - 5)
        let step16 = watcher.handle(.event(cancelled), now: cancelled.occurred)
        #expect(step16.ended == ["Cancelled"])
        let step17 = watcher.handle(.event(lateFailure), now: lateFailure.occurred)
        #expect(step17 == [])
    }

    @Test func cancellingThenCrashedEndsOnce() throws {
        let cancelling = try WatcherFixture.stateEvent("ws-event-cancelling.json")
        let crashed = try WatcherFixture.stateEvent("ws-event-crashed-after-cancelling.json")
        var watcher = PauseWatcher(pauses: [])
        _ = watcher.handle(.event(pause(run: cancelling.runID, id: "01a22957-e922-7ab4-8cf0-8766dc365cc8",
                                        at: "2026-11-29T22:05:56.898824Z")), now: t0)
        let step18 = watcher.handle(.event(cancelling), now: cancelling.occurred)
        #expect(step18.ended == ["Cancelling"])
        let step19 = watcher.handle(.event(crashed), now: crashed.occurred)
        #expect(step19 == [])
    }

    @Test func duplicateTerminalEventsEndOnce() throws {
        let messages = try WatcherFixture.json("ws-events-failed-timeout-duplicate.json")["messages"]?.array ?? []
        let failures = messages.compactMap { PrefectEvent(message: $0)?.stateEvent }
        #expect(failures.count == 2)
        var watcher = PauseWatcher(pauses: [])
        _ = watcher.handle(.event(pause(run: failures[0].runID, id: "01a22957-e802-7f98-a8d4-ad68e6c36b22",
                                        at: "2026-11-29T22:05:56.610645Z")), now: t0)
        var actions: [PauseWatcher.Action] = []
        for failure in failures + failures { actions += watcher.handle(.event(failure), now: failure.occurred) }
        #expect(actions.ended == ["Failed"])
    }

    @Test func backfillReplaysOfOlderStatesNeverEndAPause() throws {
        let timeline = try timelineEvents().filter { $0.runID == "one-field" }
        let (pending, running, pause) = (timeline[0], timeline[1], timeline[2])
        #expect(pause.stateID == paused.stateID)

        var live = PauseWatcher(pauses: [])
        for event in [pending, running, pause] { _ = live.handle(.event(event), now: event.occurred + 0.02) }
        // A reconnect replays the run's earlier states, in this session and after a restart.
        var sameSecond = running
        sameSecond.stateID = "running-same-second"
        sameSecond.occurred = 1_795_989_957.0  // the pause's own second, before it
        sameSecond.follows = nil
        var restarted = PauseWatcher(pauses: Array(live.pauses.values))
        for event in [pending, running, sameSecond] {
            let step20 = live.handle(.event(event), now: t0 + 60)
            #expect(step20 == [])
            let step21 = restarted.handle(.event(event), now: t0 + 60)
            #expect(step21 == [])
        }
        #expect(restarted.waitingCount == 1)
        let resume = timeline[3]  // the real resume: later, and follows the pause
        let step22 = restarted.handle(.event(resume), now: resume.occurred)
        #expect(step22.ended == ["Running"])
    }

    @Test func aRestoredPauseEndsOnAFollowingEventInItsOwnSecond() {
        var watcher = PauseWatcher(pauses: [pausedRecord])
        var quick = resumed
        quick.occurred = 1_795_989_957.5  // same whole second as the stored pause; follows names it
        let step23 = watcher.handle(.event(quick), now: quick.occurred)
        #expect(step23.ended == ["Running"])
    }

    @Test func theWholeCapturedTimelineAnnouncesAndEndsEachPauseOnce() throws {
        let events = try timelineEvents()
        var watcher = PauseWatcher(pauses: [])
        var actions: [PauseWatcher.Action] = []
        for event in events { actions += watcher.handle(.event(event), now: event.occurred + 0.05) }
        #expect(actions.announced.count == 11)
        let endings = Dictionary(uniqueKeysWithValues: actions.compactMap { action -> (String, String?)? in
            if case .end(let record) = action { (record.runID, record.endedState) } else { nil }
        })
        #expect(endings == [
            "artifact": "Running", "cancel": "Failed", "custom-event": "Running", "multi-field": "Cancelling",
            "one-field": "Running", "plain": "Running", "str": "Running", "suspend-deployment": "Resuming",
            "timeout": "Failed", "timeout-orphan": "Failed", "?": "Cancelled",
        ])
        #expect(watcher.waitingCount == 0)

        // The same stream again: in this session (ids deduped) and after a restart (records only).
        var restarted = PauseWatcher(pauses: Array(watcher.pauses.values))
        let last = events.last!.occurred + 1
        for event in events {
            let step24 = watcher.handle(.event(event), now: last)
            #expect(step24 == [])
            let step25 = restarted.handle(.event(event), now: last)
            #expect(step25 == [])
        }
    }

    @Test func theServersTimeoutFailureEndsThePause() throws {
        let failed = try WatcherFixture.stateEvent("ws-event-failed-timeout-server.json")
        let pausedNoInput = try WatcherFixture.stateEvent("ws-event-paused-no-input.json")
        var watcher = PauseWatcher(pauses: [])
        let orphan = pause(run: failed.runID, id: "01a22958-1a52-73bf-81f5-fbddeb76b3f8",
                           at: "2026-11-29T22:06:09.490947Z")
        _ = watcher.handle(.event(orphan), now: orphan.occurred)
        _ = watcher.handle(.event(pausedNoInput), now: pausedNoInput.occurred)
        let ending = watcher.handle(.event(failed), now: failed.occurred)
        #expect(ending.ended == ["Failed"])
        #expect(watcher.waiting.map(\.stateID) == [pausedNoInput.stateID])  // another run's pause is untouched
    }

    @Test func aCapturedBackfillIsAnnouncedOnceAcrossReconnectsAndRestarts() throws {
        let capture = try WatcherFixture.json("ws-backfill.json")
        let first = try #require(PrefectEvent(message: capture["first_backfilled_message"] ?? .null)?.stateEvent)
        let replay: [StateEvent] = (capture["backfilled"]?.array ?? []).compactMap { item in
            guard let id = item["id"]?.string, let name = item["event"]?.string,
                  let occurred = item["occurred"]?.string.flatMap(Timestamp.parse) else { return nil }
            let state = String(name.dropFirst("prefect.flow-run.".count))
            // The summary keeps no run id; each of these pauses belongs to a different run.
            return StateEvent(stateID: id, runID: id == first.stateID ? first.runID : "run-\(id)",
                              stateType: "PAUSED", stateName: state, stateTimestamp: occurred)
        }
        #expect(replay.count == 11)
        let connectedAt = Timestamp.parse("2026-11-29T22:08:20.837Z")!

        var watcher = PauseWatcher(pauses: [])
        var announced: [String] = []
        for _ in 0..<2 {  // the same backfill after a reconnect
            for event in replay { announced += watcher.handle(.event(event), now: connectedAt).announced }
        }
        #expect(announced.count == 11)
        #expect(Set(announced).count == 11)
        var restarted = PauseWatcher(pauses: Array(watcher.pauses.values))
        for event in replay {
            let again = restarted.handle(.event(event), now: connectedAt + 30)
            #expect(again.isEmpty)
        }
    }

    // MARK: - Another pause of the same run

    @Test func aNewerPauseOfTheRunEndsTheOldOneAndIsAnnounced() {
        var watcher = PauseWatcher(pauses: [])
        _ = watcher.handle(.event(paused), now: t0 + 0.05)
        var again = paused
        again.stateID = "second-pause"
        again.stateName = "Suspended"
        again.stateTimestamp = t0 + 100
        again.occurred = t0 + 100
        let actions = watcher.handle(.event(again), now: t0 + 100.05)
        #expect(actions.ended == ["Suspended"])
        #expect(actions.announced == ["second-pause"])
        #expect(watcher.waiting.map(\.stateID) == ["second-pause"])
    }

    @Test func anOlderPauseReplayedForTheRunIsRecordedEnded() {
        var later = pausedRecord
        later.announcedAt = later.pausedAt
        var watcher = PauseWatcher(pauses: [later])
        var earlier = paused
        earlier.stateID = "earlier-pause"
        earlier.stateTimestamp = t0 - 120
        earlier.occurred = t0 - 120
        let actions = watcher.handle(.event(earlier), now: t0 + 5)
        #expect(actions.count == 1)
        #expect(actions.announced.isEmpty && actions.ended.isEmpty)
        #expect(watcher.pauses["earlier-pause"]?.isWaiting == false)
        #expect(watcher.waiting.map(\.stateID) == [paused.stateID])
    }

    @Test func aListingWithANewerPauseOfTheRunSupersedesTheOldOne() {
        var watcher = PauseWatcher(pauses: [])
        _ = watcher.handle(.event(paused), now: t0 + 0.05)
        var run = listing[1]
        run.stateID = "listed-newer"
        run.stateTimestamp = t0 + 200
        let actions = watcher.handle(.listing([run]), now: t0 + 230)
        #expect(actions.ended == ["Paused"])
        #expect(actions.announced == ["listed-newer"])
    }

    // MARK: - Listing drops a run

    @Test func aRunMissingFromTheListingIsReadThenEnded() {
        var watcher = PauseWatcher(pauses: [])
        _ = watcher.handle(.event(paused), now: t0 + 0.05)
        let step26 = watcher.handle(.listing([]), now: t0 + 60)
        #expect(step26 == [.fetchRun(runID: paused.runID)])
        #expect(watcher.waitingCount == 1)

        var run = listing[1]
        run.stateID = "running-state"
        run.stateType = "RUNNING"
        run.stateName = "Running"
        run.stateTimestamp = t0 - 0.2  // the run lagging its own event: not an end
        let step27 = watcher.handle(.run(run), now: t0 + 61)
        #expect(step27 == [])
        run.stateTimestamp = t0 + 50
        let step28 = watcher.handle(.run(run), now: t0 + 62)
        #expect(step28.ended == ["Running"])
    }

    @Test func aDeletedRunEndsItsPauseWithoutAName() {
        var watcher = PauseWatcher(pauses: [pausedRecord])
        let actions = watcher.handle(.runNotFound(runID: paused.runID), now: t0 + 60)
        #expect(actions.first == .markEnded(stateID: paused.stateID, at: Int64(t0 + 60), state: nil))
        #expect(watcher.waitingCount == 0)
    }

    // MARK: - Reminder

    @Test func oneReminderWithFiveMinutesOrLessLeft() throws {
        var watcher = PauseWatcher(pauses: [])
        _ = watcher.handle(.event(paused), now: t0 + 0.05)
        let run = try WatcherFixture.flowRun("rest-flow-run-paused-with-input.json")
        let step29 = watcher.handle(.run(run), now: t0 + 0.3)
        #expect(step29 == [.setTimeout(stateID: paused.stateID, timeoutAt: 1_795_990_857)])

        let timeout = 1_795_990_857.0
        let step30 = watcher.handle(.tick, now: timeout - 301)
        #expect(step30 == [])
        let actions = watcher.handle(.tick, now: timeout - 270)
        var reminded = watcher.pauses[paused.stateID]!
        #expect(reminded.remindedAt == Int64(timeout - 270))
        #expect(actions == [.markReminded(stateID: paused.stateID, at: Int64(timeout - 270)),
                            .remind(reminded, minutesLeft: 4)])
        let step31 = watcher.handle(.tick, now: timeout - 200)
        #expect(step31 == [])
        let step32 = watcher.handle(.listing([listing[1]]), now: timeout - 100)
        #expect(step32 == [])

        reminded.remindedAt = Int64(timeout - 270)
        var restarted = PauseWatcher(pauses: [reminded])
        let step33 = restarted.handle(.tick, now: timeout - 60)
        #expect(step33 == [])
    }

    @Test func reminderMinutesRoundDown() {
        for (left, minutes) in [(300.0, 5), (299.0, 4), (270.0, 4), (61.0, 1), (30.0, 1)] {
            var record = pausedRecord
            record.timeoutAt = record.pausedAt + 900
            record.announcedAt = record.pausedAt
            var watcher = PauseWatcher(pauses: [record])
            let actions = watcher.handle(.tick, now: Double(record.timeoutAt!) - left)
            #expect(actions.reminded == [minutes], "\(left) s left")
        }
        var record = pausedRecord
        record.timeoutAt = record.pausedAt + 900
        record.announcedAt = record.pausedAt
        var expired = PauseWatcher(pauses: [record])
        let step34 = expired.handle(.tick, now: Double(record.timeoutAt!) + 1)
        #expect(step34 == [])
    }

    @Test func aTenMinutePauseGetsOneEvenThoughItsTimeoutIsAHairShort() throws {
        // pause_flow_run(timeout=600): pause_timeout is 599.993 s after the state's timestamp.
        let run = try WatcherFixture.flowRun("rest-flow-run-paused-no-input.json")
        var watcher = PauseWatcher(pauses: [])
        _ = watcher.handle(.listing([run]), now: run.stateTimestamp + 1)
        let step35 = watcher.handle(.tick, now: run.pauseTimeout! - 250)
        #expect(step35.reminded == [4])
    }

    @Test func aShortPauseGetsNoReminder() {
        var run = listing[1]
        run.pauseTimeout = run.stateTimestamp + 540  // 9 minutes
        var watcher = PauseWatcher(pauses: [])
        _ = watcher.handle(.listing([run]), now: run.stateTimestamp + 1)
        for left in stride(from: 300.0, through: 1, by: -10) {
            let step36 = watcher.handle(.tick, now: run.pauseTimeout! - left)
            #expect(step36 == [])
        }
    }

    @Test func aSuspendWithoutATimeoutNeverGetsOne() throws {
        let suspend = try WatcherFixture.stateEvent("ws-event-suspended.json")
        let run = try WatcherFixture.flowRun("rest-flow-run-suspended.json")
        var watcher = PauseWatcher(pauses: [])
        _ = watcher.handle(.event(suspend), now: suspend.occurred + 0.05)
        let step37 = watcher.handle(.run(run), now: suspend.occurred + 0.3)
        #expect(step37 == [])
        for hours in 0..<48 {
            let step38 = watcher.handle(.tick, now: suspend.occurred + Double(hours) * 3600)
            #expect(step38 == [])
        }
        #expect(watcher.waitingCount == 1)
    }

    // MARK: - Prune and memory

    @Test func endedPausesLeaveMemoryAfterTwoHours() {
        var ended = pausedRecord
        ended.stateID = "old"
        ended.endedAt = 1_000_000
        ended.endedState = "Completed"
        var waiting = pausedRecord
        waiting.pausedAt = 900_000
        var watcher = PauseWatcher(pauses: [ended, waiting])
        let before = watcher.handle(.tick, now: 1_000_000 + watcher.rules.memoryRetention - 1)
        #expect(before == [])
        #expect(watcher.pauses.count == 2)
        let after = watcher.handle(.tick, now: 1_000_000 + watcher.rules.memoryRetention + 1)
        #expect(after == [])  // the store keeps it for the day (PauseTracker.prune)
        #expect(watcher.pauses.keys.sorted() == [paused.stateID])
    }

    @Test func seenEventIDsAreBounded() {
        var ids = RecentIDs(capacity: 3)
        let fresh = ["a", "b", "c", "d"].map { ids.insert($0) }
        #expect(fresh == [true, true, true, true])
        let again = ids.insert("d")
        #expect(!again)
        #expect(!ids.contains("a"))
        #expect(ids.contains("b") && ids.count == 3)
        let readded = ids.insert("a")
        #expect(readded)
        #expect(!ids.contains("b"))
    }

    // MARK: - Helpers

    func pause(run: String, id: String, at timestamp: String) -> StateEvent {
        let time = Timestamp.parse(timestamp)!
        return StateEvent(stateID: id, runID: run, stateType: "PAUSED", stateName: "Paused", stateTimestamp: time)
    }

    /// `ws-timeline-run1.json`'s flow-run state events, in arrival order, with the scenario as the run id.
    func timelineEvents() throws -> [StateEvent] {
        let items = try WatcherFixture.json("ws-timeline-run1.json")["events"]?.array ?? []
        return items.compactMap { item in
            guard let type = item["state_type"]?.string, let name = item["event"]?.string,
                  let id = item["id"]?.string, let time = item["occurred"]?.string,
                  let occurred = Timestamp.parse("2026-11-29T\(time)Z")
            else { return nil }
            return StateEvent(stateID: id, runID: item["scenario"]?.string ?? "?", stateType: type,
                              stateName: String(name.dropFirst("prefect.flow-run.".count)),
                              stateTimestamp: occurred, follows: item["follows"]?.string)
        }
    }
}

extension [PauseWatcher.Action] {
    /// State ids announced, in order.
    var announced: [String] {
        compactMap { if case .announce(let record, _) = $0 { record.stateID } else { nil } }
    }

    /// The state names pauses ended with, in order.
    var ended: [String?] {
        compactMap { if case .end(let record) = $0 { record.endedState } else { nil } }
    }

    /// Minutes left in each reminder, in order.
    var reminded: [Int] {
        compactMap { if case .remind(_, let minutes) = $0 { minutes } else { nil } }
    }
}
