import Testing
@testable import RelayCore

/// Only flows that send context events (or have never been seen) make an alert wait for one.
@Suite struct FlowHabitsTests {
    @Test func anUnknownFlowWaitsAndIsLearnedFromItsFirstPause() {
        var habits = FlowHabits()
        #expect(habits.shouldWait(flowID: "f1"))
        #expect(habits.shouldWait(flowID: nil))
        #expect(habits.announcedWithoutContext(flowID: "f1")! == ("f1", .sendsNone))
        #expect(!habits.shouldWait(flowID: "f1"))
        #expect(habits.announcedWithoutContext(flowID: "f1") == nil)  // nothing new to store
    }

    @Test func aContextEventMarksItsFlowThroughTheRunsStateEvents() {
        var habits = FlowHabits(known: ["f1": .sendsNone])
        habits.sawRun("run-1", flowID: "f1")
        #expect(habits.sawContextEvent(runID: "run-1", flowID: nil)! == ("f1", .sendsContext))
        #expect(habits.shouldWait(flowID: "f1"))
        #expect(habits.sawContextEvent(runID: "run-1", flowID: nil) == nil)
        // A flow known to send context keeps waiting even after a pause of it found none.
        #expect(habits.announcedWithoutContext(flowID: "f1") == nil)
        #expect(habits.shouldWait(flowID: "f1"))
    }

    @Test func anEventNamingItsFlowNeedsNoRunMapping() {
        var habits = FlowHabits()
        #expect(habits.sawContextEvent(runID: "unknown-run", flowID: "f2")! == ("f2", .sendsContext))
        #expect(habits.sawContextEvent(runID: "other-unknown-run", flowID: nil) == nil)
    }

    @Test func runMappingsAreBounded() {
        var habits = FlowHabits(runCapacity: 2)
        habits.sawRun("r1", flowID: "f1")
        habits.sawRun("r2", flowID: "f2")
        habits.sawRun("r3", flowID: "f3")
        #expect(habits.sawContextEvent(runID: "r1", flowID: nil) == nil)  // forgotten
        #expect(habits.sawContextEvent(runID: "r3", flowID: nil)! == ("f3", .sendsContext))
    }
}
