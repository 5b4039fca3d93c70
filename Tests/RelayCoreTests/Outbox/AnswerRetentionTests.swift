import Testing
@testable import RelayCore

/// What the store forgets of APNs' answers once their pause has ended: a day after the end, or, over the row cap,
/// the pauses that ended first, whole.
@Suite struct AnswerRetentionTests {
    let day: Int64 = 86_400
    let now: Int64 = 10 * 86_400

    func ended(_ id: String, agoSeconds: Int64, rows: Int = 10) -> AnswerRetention.Ended {
        AnswerRetention.Ended(stateID: id, endedAt: now - agoSeconds, rows: rows)
    }

    @Test func answersGoADayAfterTheirPauseEnded() {
        let rule = AnswerRetention()
        let pauses = [ended("recent", agoSeconds: day - 1), ended("old", agoSeconds: day + 1), ended("edge", agoSeconds: day)]
        #expect(rule.pausesToForget(ended: pauses, totalRows: 30, now: now) == ["old", "edge"])
        #expect(rule.pausesToForget(ended: [ended("recent", agoSeconds: 60)], totalRows: 10, now: now).isEmpty)
    }

    @Test func overTheCapThePausesThatEndedFirstGoWhole() {
        let rule = AnswerRetention(keepFor: 86_400, maxRows: 100)
        // 40 rows belong to waiting pauses (never forgotten); 3 ended pauses of 30 rows each: 130 in all.
        let pauses = [ended("c", agoSeconds: 60, rows: 30), ended("a", agoSeconds: 3_600, rows: 30),
                      ended("b", agoSeconds: 600, rows: 30)]
        #expect(rule.pausesToForget(ended: pauses, totalRows: 130, now: now) == ["a"])
        #expect(rule.pausesToForget(ended: pauses, totalRows: 160, now: now) == ["a", "b"])
        // At the cap, nothing goes; waiting pauses' rows alone over it only take every ended pause.
        #expect(rule.pausesToForget(ended: pauses, totalRows: 100, now: now).isEmpty)
        #expect(rule.pausesToForget(ended: pauses, totalRows: 500, now: now) == ["a", "b", "c"])
    }

    @Test func tiesInEndTimeGoByStateID() {
        let rule = AnswerRetention(keepFor: 86_400, maxRows: 10)
        let pauses = [ended("y", agoSeconds: 60), ended("x", agoSeconds: 60)]
        #expect(rule.pausesToForget(ended: pauses, totalRows: 20, now: now) == ["x"])
        #expect(rule.pausesToForget(ended: pauses.reversed(), totalRows: 20, now: now) == ["x"])
    }
}
