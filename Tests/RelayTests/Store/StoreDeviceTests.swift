import CSQLite
import Testing
@testable import Relay
@testable import RelayCore

/// Phones and their live-activity tokens.
@Suite struct StoreDeviceTests {
    @Test func registersAndRefreshesKeepingCreatedAt() throws {
        let dir = try StoreScratch()
        let store = try dir.store()
        let first = try store.upsertDevice(registration("phone", token: "aa11", start: "bb22"), now: 1000)
        #expect(first == Device(id: "phone", token: "aa11", startToken: "bb22", environment: .production,
                                serverID: "srv-1", createdAt: 1000, updatedAt: 1000))
        #expect(try store.device(id: "phone") == first)

        // Registering again is a full refresh: new token, no start token, other host, other server.
        let second = try store.upsertDevice(
            registration("phone", token: "cc33", start: nil, environment: .development, server: "srv-2"), now: 2000)
        #expect(second == Device(id: "phone", token: "cc33", startToken: nil, environment: .development,
                                 serverID: "srv-2", createdAt: 1000, updatedAt: 2000))
        #expect(try store.device(id: "phone") == second)
        #expect(try store.deviceCount() == 1)
    }

    @Test func listsCountsAndDeletes() throws {
        let dir = try StoreScratch()
        let store = try dir.store()
        #expect(try store.allDevices().isEmpty)
        #expect(try store.device(id: "nobody") == nil)
        for id in ["b", "a", "c"] { try store.upsertDevice(registration(id), now: 5) }
        #expect(try store.allDevices().map(\.id) == ["a", "b", "c"])
        #expect(try store.deviceCount() == 3)
        #expect(try store.deleteDevice(id: "b"))
        #expect(try !store.deleteDevice(id: "b"))
        #expect(try store.allDevices().map(\.id) == ["a", "c"])
    }

    @Test func deletingADeviceCascadesToItsActivities() throws {
        let dir = try StoreScratch()
        let store = try dir.store()
        try store.upsertDevice(registration("a"), now: 1)
        try store.upsertDevice(registration("b"), now: 1)
        #expect(try store.setActivityToken(deviceID: "a", runID: "run-1", token: "t-a1"))
        #expect(try store.setActivityToken(deviceID: "a", runID: "run-2", token: "t-a2"))
        #expect(try store.setActivityToken(deviceID: "b", runID: "run-1", token: "t-b1"))
        #expect(try store.deleteDevice(id: "a"))
        #expect(try store.activityTokens(runID: "run-1").map(\.deviceID) == ["b"])
        #expect(try store.activityTokens(runID: "run-2").isEmpty)
        #expect(try store.count("SELECT count(*) FROM activities") == 1)
    }

    @Test func activityTokens() throws {
        let dir = try StoreScratch()
        let store = try dir.store()
        #expect(try !store.setActivityToken(deviceID: "ghost", runID: "run-1", token: "t"))
        try store.upsertDevice(registration("a"), now: 1)
        try store.upsertDevice(registration("b"), now: 1)
        #expect(try store.setActivityToken(deviceID: "b", runID: "run-1", token: "old"))
        #expect(try store.setActivityToken(deviceID: "b", runID: "run-1", token: "new"))  // replaces
        #expect(try store.setActivityToken(deviceID: "a", runID: "run-1", token: "t-a"))
        #expect(try store.setActivityToken(deviceID: "a", runID: "run-2", token: "t-a2"))
        let tokens = try store.activityTokens(runID: "run-1")
        #expect(tokens.map(\.deviceID) == ["a", "b"])
        #expect(tokens.map(\.token) == ["t-a", "new"])

        #expect(try store.deleteActivity(deviceID: "a", runID: "run-1"))
        #expect(try !store.deleteActivity(deviceID: "a", runID: "run-1"))
        #expect(try store.activityTokens(runID: "run-1").map(\.deviceID) == ["b"])
        #expect(try store.deleteActivities(runID: "run-1") == 1)
        #expect(try store.activityTokens(runID: "run-1").isEmpty)
        #expect(try store.activityTokens(runID: "run-2").map(\.token) == ["t-a2"])  // other runs untouched
        #expect(try store.count("SELECT count(*) FROM activities WHERE device_id = 'ghost'") == 0)
    }

    @Test func activitiesPerDeviceAreCapped() throws {
        let dir = try StoreScratch()
        let store = try dir.store()
        try store.upsertDevice(registration("a"), now: 1)
        let cap = Store.maxActivitiesPerDevice
        for i in 0..<(cap + 6) { try store.setActivityToken(deviceID: "a", runID: "run-\(i)", token: "t\(i)") }
        // Refreshing run-0 just before the cap was hit would have kept it; here the six oldest go.
        #expect(try store.count("SELECT count(*) FROM activities") == cap)
        #expect(try store.activityTokens(runID: "run-0").isEmpty)
        #expect(try store.activityTokens(runID: "run-5").isEmpty)
        #expect(try store.activityTokens(runID: "run-6").map(\.token) == ["t6"])
        #expect(try store.activityTokens(runID: "run-\(cap + 5)").count == 1)
    }

    @Test func dropsStartTokenAndMovesEnvironment() throws {
        let dir = try StoreScratch()
        let store = try dir.store()
        try store.upsertDevice(registration("a", start: "5555", environment: .production), now: 1)
        #expect(try store.dropStartToken(deviceID: "a"))
        #expect(try !store.dropStartToken(deviceID: "a"))
        #expect(try !store.dropStartToken(deviceID: "ghost"))
        #expect(try store.device(id: "a")?.startToken == nil)
        #expect(try store.device(id: "a")?.token == "aabbccddeeff00112233")  // the alert token stays

        #expect(try store.updateEnvironment(deviceID: "a", to: .development))
        #expect(try !store.updateEnvironment(deviceID: "a", to: .development))
        #expect(try !store.updateEnvironment(deviceID: "ghost", to: .production))
        #expect(try store.device(id: "a")?.environment == .development)
    }

    @Test func keepsTextExactly() throws {
        let dir = try StoreScratch()
        let store = try dir.store()
        let odd = registration("é😀 id\u{0}nul", token: "", start: "", server: "server \"quoted\" 'single'")
        let stored = try store.upsertDevice(odd, now: 1)
        #expect(stored.id == odd.id)
        #expect(stored.token == "")
        #expect(stored.startToken == "")  // an empty start token is a value, not NULL
        #expect(try store.device(id: odd.id)?.serverID == odd.serverID)
    }

    @Test func refusesOversizedValuesWithoutWriting() throws {
        let dir = try StoreScratch()
        let store = try dir.store()
        let before = try store.upsertDevice(registration("a", token: "1234"), now: 1)
        let huge = String(repeating: "f", count: Int(Database.maxValueBytes) + 1)
        let error = #expect(throws: SQLiteError.self) {
            try store.upsertDevice(registration("a", token: huge), now: 2)
        }
        #expect(error?.code == SQLITE_TOOBIG)
        #expect(try store.device(id: "a") == before)
        #expect(throws: SQLiteError.self) { try store.setActivityToken(deviceID: "a", runID: "r", token: huge) }
        #expect(try store.activityTokens(runID: "r").isEmpty)
        // The connection is still usable afterwards.
        #expect(try store.upsertDevice(registration("b"), now: 3).id == "b")
    }
}
