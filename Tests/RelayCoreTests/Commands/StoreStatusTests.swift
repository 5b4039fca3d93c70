import Testing
@testable import RelayCore

/// `StoreStatus`: what a device's pushes for a pause came to, and the durations `status` prints.
@Suite struct StoreStatusTests {
    static func device(_ id: String, createdAt: Int64 = 100) -> Device {
        Device(id: id, token: "a1b2c3d4e5f60718293a", startToken: nil, environment: .production, serverID: "s",
               createdAt: createdAt, updatedAt: createdAt)
    }

    @Test func outcomes() {
        let announced = PauseRecord(stateID: "s1", runID: "r", stateName: "Paused", pausedAt: 200, announcedAt: 201)
        let quiet = PauseRecord(stateID: "s2", runID: "r2", stateName: "Paused", pausedAt: 10)
        let push = StoreStatus.Pending(stateID: "s1", deviceID: "late", purpose: "alert", attempts: 3, dueMs: 5_000)
        let retried = PushAnswer(stateID: "s1", deviceID: "late", purpose: "alert", status: 429,
                                 reason: "TooManyRequests", answeredMs: 4_000)
        let started = PushAnswer(stateID: "s1", deviceID: "late", purpose: "start", status: 200, reason: "delivered",
                                 answeredMs: 4_100)
        let refused = PushAnswer(stateID: "s1", deviceID: "gone", purpose: "alert", status: 410,
                                 reason: "Unregistered", answeredMs: 4_200)
        let status = StoreStatus(schemaVersion: 8, pauses: [], devices: [], pending: [push],
                                 answers: [started, retried, refused], oldestPendingMs: 1)
        #expect(status.outcome(of: announced, for: Self.device("phone")) == .answered)
        #expect(status.outcome(of: announced, for: Self.device("new", createdAt: 300)) == .registeredLater)
        #expect(status.outcome(of: quiet, for: Self.device("phone")) == .notAnnounced)
        // A pending push wins over the registration time: something was queued for it. Its last answer goes with
        // it, and the pushes come in purpose order.
        let late = status.outcome(of: announced, for: Self.device("late", createdAt: 300))
        #expect(late == .pushes([.pending(push, last: retried), .delivered(started)]))
        #expect(late.label == "pending")
        let gone = status.outcome(of: announced, for: Self.device("gone"))
        #expect(gone == .pushes([.dropped(refused)]))
        #expect(gone.label == "dropped")
        #expect(StoreStatus.Outcome.pushes([.delivered(started)]).label == "delivered")
    }

    @Test func textAndJSON() throws {
        let pause = StoreStatus.Pause(record: PauseRecord(stateID: "s1", runID: "run-1", stateName: "Suspended",
                                                          pausedAt: 1_000, announcedAt: 1_000),
                                      flowName: "flow", runName: "")
        let status = StoreStatus(schemaVersion: 8, pauses: [pause], devices: [Self.device("phone")], pending: [],
                                 oldestPendingMs: nil)
        let text = status.text(path: "x.db", now: 1_125)
        #expect(text.contains("  run run-1 (flow), Suspended since 1970-01-01T00:16:40.000Z (2m 5s), no timeout"))
        #expect(text.contains("    phone: answered"))
        #expect(text.hasSuffix("outbox: 0 pending\n"))
        let json = try JSONParser.parse(status.json(path: "x.db", now: 1_125).encoded())
        #expect(json["pauses"]?.array?.first?["timeout_at"] == nil)  // omitted, never null
        #expect(json["pauses"]?.array?.first?["waiting_s"] == 125)
        #expect(json["devices"]?.array?.first?["token"] == "a1b2c3…93a")
        #expect(json["outbox"] == ["pending": 0])
    }

    @Test func durations() {
        #expect(StoreStatus.duration(-3) == "0s")
        #expect(StoreStatus.duration(59.9) == "59s")
        #expect(StoreStatus.duration(192) == "3m 12s")
        #expect(StoreStatus.duration(7_500) == "2h 5m")
        #expect(StoreStatus.duration(273_600) == "3d 4h")
    }
}
