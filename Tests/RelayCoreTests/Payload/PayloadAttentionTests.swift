import Testing
@testable import RelayCore

/// The fields that bring a waiting run to the person sooner: alerts that break through Focus, and Live Activities
/// ranked by how soon their pause times out.
@Suite struct PayloadAttentionTests {
    static let now: Int64 = 1_795_990_000

    static func props(timeoutIn seconds: Int64?, body: String = "Approve?") -> WaitingProps {
        WaitingProps(runId: "95d737c2-8dd4-4a0b-b4d5-e6d147c8ff6e", runName: "run", flowName: "flow",
                     serverId: "server-1", title: "Title", body: body, category: "waiting-reply",
                     stateName: seconds == nil ? "Suspended" : "Paused", waitingSince: now - 10,
                     timeoutAt: seconds.map { now + $0 },
                     url: "https://prefect.example.com/runs/flow-run/95d737c2-8dd4-4a0b-b4d5-e6d147c8ff6e")
    }

    @Test func alertsAndRemindersAreTimeSensitive() {
        let props = Self.props(timeoutIn: 600)
        for push in [Payloads.alert(props, stateID: "s"), Payloads.reminder(props, stateID: "s", minutesLeft: 4)] {
            #expect(push.payload["aps"]?["interruption-level"] == "time-sensitive")
        }
        // Live Activity pushes are not notifications of their own: no interruption level.
        for push in [Payloads.liveActivityStart(props, stateID: "s", now: Self.now),
                     Payloads.liveActivityUpdate(props, now: Self.now),
                     Payloads.liveActivityEnd(props, endedState: "Running", now: Self.now)] {
            #expect(push.payload["aps"]?["interruption-level"] == nil)
        }
    }

    @Test func theNearerTheTimeoutTheHigherTheActivityRanks() {
        func score(_ seconds: Int64?) -> JSONValue? {
            Payloads.liveActivityStart(Self.props(timeoutIn: seconds), stateID: "s", now: Self.now)
                .payload["aps"]?["relevance-score"]
        }
        #expect(score(0) == .int(100))
        #expect(score(3600) == .int(75))
        #expect(score(86_400) == .int(52))
        #expect(score(nil) == .int(25))  // a suspend without a timeout can wait
        #expect(score(-60) == .int(100))  // past its timeout: never above the top
        let ranked = [60, 600, 3600, 36_000, 360_000].map { score(Int64($0)) }
        let values = ranked.compactMap { value -> Int64? in if case .int(let n)? = value { return n } else { return nil } }
        #expect(values == values.sorted(by: >) && Set(values).count == values.count)
        #expect(values.allSatisfy { $0 > 25 })
    }

    /// The update carries the score as of its own sending: an hour on, the same pause ranks higher.
    @Test func anUpdateRanksByItsOwnTime() {
        let props = Self.props(timeoutIn: 7200)
        let start = Payloads.liveActivityStart(props, stateID: "s", now: Self.now)
        let update = Payloads.liveActivityUpdate(props, now: Self.now + 3600)
        let end = Payloads.liveActivityEnd(props, endedState: "Running", now: Self.now + 3600)
        #expect(start.payload["aps"]?["relevance-score"] == .int(67))
        #expect(update.payload["aps"]?["relevance-score"] == .int(75))
        #expect(end.payload["aps"]?["relevance-score"] == nil)
    }

    /// The new fields are data, never cut, and every payload still fits APNs' 4 KB.
    @Test func payloadsWithTheNewFieldsStillFit() {
        let props = Self.props(timeoutIn: 600, body: String(repeating: "x", count: 10_000))
        let pushes = [Payloads.alert(props, stateID: "s"), Payloads.reminder(props, stateID: "s", minutesLeft: 4),
                      Payloads.liveActivityStart(props, stateID: "s", now: Self.now),
                      Payloads.liveActivityUpdate(props, now: Self.now)]
        for push in pushes {
            #expect(push.json.utf8.count <= PushMessage.maxBytes)
            #expect(push.payload["aps"]?["interruption-level"] != nil || push.payload["aps"]?["relevance-score"] != nil)
        }
    }
}
