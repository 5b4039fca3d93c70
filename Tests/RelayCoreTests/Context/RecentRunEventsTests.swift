import Testing
@testable import RelayCore

/// What the socket told about recent runs, bounded, and the arrival count a waiting announce compares.
@Suite struct RecentRunEventsTests {
    private func event(_ id: String, body: String? = "Deploy?") -> RunEvent {
        RunEvent(id: id, name: "work.waiting", occurred: nil, resourceID: "prefect.flow-run.r1",
                 payload: body.map { ["body": .string($0)] } ?? [:])
    }

    @Test func arrivalsCountWhatIsKeptAndKeepGrowingPastTheBound() {
        var recent = RecentRunEvents(runs: 4, perRun: 2)
        #expect(recent.arrivals(for: "r1") == 0)
        let first = recent.add(event("e1"), runID: "r1")
        let again = recent.add(event("e1"), runID: "r1")  // the same event again
        let bodiless = recent.add(event("e2", body: nil), runID: "r1")  // nothing an alert could quote
        #expect(first && !again && !bodiless)
        #expect(recent.arrivals(for: "r1") == 1)
        recent.add(RunArtifact(key: "k", type: "markdown", description: nil, data: "x"), runID: "r1")
        let third = recent.add(event("e3"), runID: "r1")
        let fourth = recent.add(event("e4"), runID: "r1")
        #expect(third && fourth)
        // Two events kept (the bound), but four arrivals: a waiter that saw three still sees news.
        #expect(recent.events(for: "r1").map(\.id) == ["e3", "e4"])
        #expect(recent.arrivals(for: "r1") == 4)
    }

    @Test func aRunPushedOutForgetsItsArrivals() {
        var recent = RecentRunEvents(runs: 1, perRun: 2)
        recent.add(event("e1"), runID: "r1")
        recent.add(event("e2"), runID: "r2")
        #expect(recent.arrivals(for: "r1") == 0)
        #expect(recent.events(for: "r1").isEmpty)
        #expect(recent.arrivals(for: "r2") == 1)
    }
}
