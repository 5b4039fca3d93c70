import Testing
@testable import Relay
@testable import RelayCore

/// A fan-out to the registry written as its audience: one row before the first push, answers noted as they come,
/// and after a kill exactly the members with no answer written become rows (a device deleted meanwhile, or
/// registered after, is not among them).
@Suite struct FanOutStoreTests {
    private func message(_ purpose: PushPurpose = .alert, expires: Int64 = 10_000) -> OutboxMessage {
        OutboxMessage(stateID: "s1", runID: "run-1", purpose: purpose, kind: purpose == .alert ? .alert : .liveactivity,
                      topic: "io.example", priority: 10, collapseID: "s1", expiresAt: expires, payload: #"{"aps":{}}"#)
    }

    private func phones(_ store: Store, _ count: Int, at registered: Int64 = 100, server: String = "srv-1") throws -> [Device] {
        try (0..<count).map { i in
            try store.upsertDevice(registration("d\(i)-\(server)", token: "\(server)-token-\(i)", start: "\(server)-start-\(i)",
                                                server: server), now: registered)
        }
    }

    private func fanOut(_ devices: [Device], _ purpose: PushPurpose = .alert, expires: Int64 = 10_000,
                        server: String = "srv-1") -> OutboxBatch {
        OutboxBatch(message: message(purpose, expires: expires),
                    recipients: devices.map { ($0, purpose == .start ? $0.startToken! : $0.token) },
                    audience: FanOutAudience(token: purpose == .start ? .pushToStart : .device, serverID: server,
                                             registeredBy: devices.map(\.createdAt).max()!))
    }

    @Test func aFanOutWritesOneRowWhateverTheDevices() throws {
        let dir = try StoreScratch()
        let store = try dir.store()
        let devices = try phones(store, 50)
        let items = try store.enqueue([fanOut(devices)], dueMs: 7)
        #expect(items.count == 50)
        #expect(items.allSatisfy { $0.id == 0 && $0.messageID == items[0].messageID })
        #expect(try store.count("SELECT count(*) FROM outbox") == 0)
        #expect(try store.count("SELECT count(*) FROM outbox_messages WHERE open = 1") == 1)
        // Not yet answered, so pending: what status and /metrics say.
        #expect(try store.outboxCount() == 50)
        #expect(try store.oldestPendingMs() == 7)
    }

    @Test func answersAreNotedAndTheLastClosesTheFanOut() throws {
        let dir = try StoreScratch()
        let store = try dir.store()
        let devices = try phones(store, 4)
        let items = try store.enqueue([fanOut(devices)], dueMs: 0)
        try store.settle([items[0].settlement(.settled), items[1].settlement(.retry(at: 60))])
        #expect(try store.outboxCount() == 3)  // two unanswered members and the row to try again
        let row = try #require(try store.duePushes(nowMs: 60_000, limit: 10).first)
        #expect(row.device.id == devices[1].id && row.attempts == 1 && row.messageID == items[0].messageID)
        try store.settle([items[2].settlement(.settled), items[3].settlement(.settled)], closing: [items[0].messageID])
        #expect(try store.count("SELECT count(*) FROM fanout_sent") == 0)
        #expect(try store.count("SELECT count(*) FROM outbox_messages WHERE open = 0") == 1)  // kept for its row
        #expect(try store.outboxCount() == 1)
        try store.settle([row.settlement(.settled)])
        #expect(try store.count("SELECT count(*) FROM outbox_messages") == 0)
    }

    /// The kill: an open fan-out with some answers written. At the next start its unanswered members, as the
    /// registry holds them now, become rows due at once; answered, deleted and later-registered devices do not.
    @Test func aKilledFanOutIsReopenedForItsUnansweredMembersOnly() throws {
        let dir = try StoreScratch()
        do {
            let store = try dir.store()
            let devices = try phones(store, 6)
            _ = try phones(store, 2, server: "srv-2")  // another server's devices: not this fan-out's
            let items = try store.enqueue([fanOut(devices), fanOut(devices, .start)], dueMs: 0)
            #expect(items.count == 12)
            try store.settle(items.prefix(3).map { $0.settlement(.settled) })  // three alerts answered before the kill
            #expect(try store.deleteDevice(id: devices[5].id))
            _ = try store.upsertDevice(registration("late", token: "late-token"), now: 101)
        }
        let store = try dir.store()
        let reopened = try store.reopenFanOuts()
        #expect(reopened.fanOuts == 2)
        let due = try store.duePushes(nowMs: 0, limit: 100)
        let alerts = due.filter { $0.purpose == .alert }.map(\.device.id).sorted()
        let starts = due.filter { $0.purpose == .start }.map(\.device.id).sorted()
        #expect(alerts == ["d3-srv-1", "d4-srv-1"])
        #expect(starts == ["d0-srv-1", "d1-srv-1", "d2-srv-1", "d3-srv-1", "d4-srv-1"])
        #expect(due.filter { $0.purpose == .start }.allSatisfy { $0.push.deviceToken.hasPrefix("srv-1-start-") })
        #expect(try store.count("SELECT count(*) FROM outbox_messages WHERE open = 1") == 0)
        #expect(try store.count("SELECT count(*) FROM fanout_sent") == 0)
        #expect(try store.reopenFanOuts() == (0, 0))  // once
    }

    /// The same token under two device ids is sent once, live and after a kill.
    @Test func oneTokenUnderTwoDevicesIsOneMember() throws {
        let dir = try StoreScratch()
        let store = try dir.store()
        let a = try store.upsertDevice(registration("a", token: "shared"), now: 100)
        let b = try store.upsertDevice(registration("b", token: "shared"), now: 100)
        let items = try store.enqueue([fanOut([a, b])], dueMs: 0)
        #expect(items.count == 1)
        try store.reopenFanOuts()
        #expect(try store.duePushes(nowMs: 0, limit: 10).count == 1)
    }

    /// A token answered through one device id is answered for the other too: after a kill it is not sent again
    /// (twice would be a second Live Activity for a start).
    @Test func aSharedTokenAnsweredBeforeAKillIsNotSentAgain() throws {
        let dir = try StoreScratch()
        do {
            let store = try dir.store()
            let a = try store.upsertDevice(registration("a", token: "shared", start: "shared-start"), now: 100)
            let b = try store.upsertDevice(registration("b", token: "shared", start: "shared-start"), now: 100)
            let items = try store.enqueue([fanOut([a, b]), fanOut([a, b], .start)], dueMs: 0)
            #expect(items.count == 2)
            try store.settle(items.map { $0.settlement(.settled) })
            #expect(try store.outboxCount() == 0)
        }
        let store = try dir.store()
        try store.reopenFanOuts()
        #expect(try store.duePushes(nowMs: 0, limit: 10).isEmpty)
    }

    /// A shared token's member is its first device id whatever order the recipients come in, since its answer is
    /// noted by that id and the reopen looks for it there.
    @Test func aSharedTokensMemberIsItsFirstDeviceID() throws {
        let dir = try StoreScratch()
        do {
            let store = try dir.store()
            let a = try store.upsertDevice(registration("a", token: "shared"), now: 100)
            let b = try store.upsertDevice(registration("b", token: "shared"), now: 100)
            let items = try store.enqueue([fanOut([b, a])], dueMs: 0)
            #expect(items.map(\.device.id) == ["a"])
            try store.settle(items.map { $0.settlement(.settled) })
        }
        let store = try dir.store()
        try store.reopenFanOuts()
        #expect(try store.duePushes(nowMs: 0, limit: 10).isEmpty)
    }

    /// Past its expiry an open fan-out nobody is answering is dropped, its members recorded as expired unsent; one
    /// being answered now is left alone.
    @Test func anExpiredFanOutIsPrunedUnlessLive() throws {
        let dir = try StoreScratch()
        let store = try dir.store()
        try store.insertPause(PauseRecord(stateID: "s1", runID: "run-1", stateName: "Paused", pausedAt: 1, announcedAt: 1))
        let devices = try phones(store, 3)
        let items = try store.enqueue([fanOut(devices, expires: 50)], dueMs: 0)
        #expect(try store.pruneOutbox(now: 60, live: [items[0].messageID]) == 0)
        #expect(try store.outboxCount() == 3)
        #expect(try store.pruneOutbox(now: 60) == 3)
        #expect(try store.outboxCount() == 0)
        #expect(try store.count("SELECT count(*) FROM outbox_messages") == 0)
        #expect(try store.count("SELECT count(*) FROM push_answers WHERE reason = ?1", [.text(PushAnswer.expired)]) == 3)
    }
}
