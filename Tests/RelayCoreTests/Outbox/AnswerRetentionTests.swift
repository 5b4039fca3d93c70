import Testing
@testable import RelayCore

/// What the store forgets of APNs' answers before their pause goes: over the row cap, the pauses that ended first,
/// whole.
@Suite struct AnswerRetentionTests {
    let now: Int64 = 10 * 86_400

    func ended(_ id: String, agoSeconds: Int64, rows: Int = 10) -> AnswerRetention.Ended {
        AnswerRetention.Ended(stateID: id, endedAt: now - agoSeconds, rows: rows)
    }

    @Test func underTheCapEveryAnswerIsKept() {
        let pauses = [ended("recent", agoSeconds: 60), ended("old", agoSeconds: 2 * 86_400)]
        #expect(AnswerRetention().pausesToForget(ended: pauses, totalRows: 50_000).isEmpty)
    }

    @Test func overTheCapThePausesThatEndedFirstGoWhole() {
        let rule = AnswerRetention(maxRows: 100)
        // 40 rows belong to waiting pauses (never forgotten); 3 ended pauses of 30 rows each: 130 in all.
        let pauses = [ended("c", agoSeconds: 60, rows: 30), ended("a", agoSeconds: 3_600, rows: 30),
                      ended("b", agoSeconds: 600, rows: 30)]
        #expect(rule.pausesToForget(ended: pauses, totalRows: 130) == ["a"])
        #expect(rule.pausesToForget(ended: pauses, totalRows: 160) == ["a", "b"])
        // At the cap, nothing goes; waiting pauses' rows alone over it only take every ended pause.
        #expect(rule.pausesToForget(ended: pauses, totalRows: 100).isEmpty)
        #expect(rule.pausesToForget(ended: pauses, totalRows: 500) == ["a", "b", "c"])
    }

    @Test func tiesInEndTimeGoByStateID() {
        let rule = AnswerRetention(maxRows: 10)
        let pauses = [ended("y", agoSeconds: 60), ended("x", agoSeconds: 60)]
        #expect(rule.pausesToForget(ended: pauses, totalRows: 20) == ["x"])
        #expect(rule.pausesToForget(ended: pauses.reversed(), totalRows: 20) == ["x"])
    }
}
