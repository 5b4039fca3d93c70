import Glibc
import Testing
@testable import Relay
@testable import RelayCore

/// The outbox in a real SQLite file: written in one transaction, survives a reopen, settled and rescheduled,
/// dropped with its device or its ended pause, pruned at expiry.
@Suite struct StoreOutboxTests {
    private func message(_ purpose: PushPurpose = .alert, state: String = "s1", expires: Int64 = 10_000) -> OutboxMessage {
        OutboxMessage(stateID: state, runID: "run-1", purpose: purpose, kind: purpose == .alert ? .alert : .liveactivity,
                      topic: "io.example", priority: 10, collapseID: state, expiresAt: expires, payload: #"{"aps":{}}"#)
    }

    private func devices(_ store: Store, _ count: Int) throws -> [Device] {
        try (0..<count).map { i in
            try store.upsertDevice(registration("d\(i)", token: String(repeating: "0", count: 15) + String(i, radix: 16).padding(5)),
                                   now: 1)
        }
    }

    @Test func aFanOutIsStoredAndSurvivesARestart() throws {
        let dir = try StoreScratch()
        do {
            let store = try dir.store()
            let phones = try devices(store, 3)
            try store.insertPause(PauseRecord(stateID: "s1", runID: "run-1", stateName: "Paused", pausedAt: 1, announcedAt: 1))
            let items = try store.enqueue([OutboxBatch(message: message(), recipients: phones.map { ($0, $0.token) })],
                                          dueMs: 5_000) { try store.setProps(stateID: "s1", props: "{}") }
            #expect(items.count == 3)
            #expect(items.map(\.push.deviceToken) == phones.map(\.token))
            #expect(items.allSatisfy { $0.push.collapseID == "s1" && $0.push.expiration == 10_000 })
            #expect(try store.unannouncedPauses().isEmpty)
        }
        let reopened = try dir.store()
        #expect(try reopened.duePushes(nowMs: 4_999, limit: 10).isEmpty)
        let due = try reopened.duePushes(nowMs: 5_000, limit: 10)
        #expect(due.count == 3)
        #expect(due.first?.device.id == "d0")
        #expect(try reopened.nextDueMs() == 5_000)
    }

    /// The props mark a pause announced: an announce that started before its pause was stored finds no record, and
    /// a second announce of one pause (or of one stored as not to be announced) writes nothing.
    @Test func propsAreWrittenOnceAndOnlyOnARecordedAnnouncedPause() throws {
        let dir = try StoreScratch()
        let store = try dir.store()
        #expect(try store.setProps(stateID: "s1", props: "{}") == .unrecorded)
        try store.insertPause(PauseRecord(stateID: "s1", runID: "run-1", stateName: "Paused", pausedAt: 1, announcedAt: 1))
        #expect(try store.setProps(stateID: "s1", props: #"{"a":1}"#) == .written)
        #expect(try store.setProps(stateID: "s1", props: #"{"a":2}"#) == .alreadyAnnounced)
        #expect(try store.props(stateID: "s1") == #"{"a":1}"#)
        try store.insertPause(PauseRecord(stateID: "s2", runID: "run-2", stateName: "Paused", pausedAt: 1))
        #expect(try store.setProps(stateID: "s2", props: "{}") == .alreadyAnnounced)
        #expect(try store.props(stateID: "s2") == nil)
    }

    @Test func settlingDeletesOrReschedulesInOneTransaction() throws {
        let dir = try StoreScratch()
        let store = try dir.store()
        let phones = try devices(store, 3)
        let items = try store.enqueue([OutboxBatch(message: message(), recipients: phones.map { ($0, $0.token) })], dueMs: 0)
        try store.settle([items[0].settlement(.settled), items[1].settlement(.retry(at: 20)),
                          items[2].settlement(.settled)])
        #expect(try store.outboxCount() == 1)
        #expect(try store.duePushes(nowMs: 19_999, limit: 10).isEmpty)
        let again = try store.duePushes(nowMs: 20_000, limit: 10)
        #expect(again.map(\.id) == [items[1].id])
        #expect(again.first?.attempts == 1)
    }

    /// A message's body goes in the transaction that settles its last row; one with a row still to send (settled
    /// or rescheduled in another batch) is kept.
    @Test func aMessageGoesWithItsLastRow() throws {
        let dir = try StoreScratch()
        let store = try dir.store()
        let phones = try devices(store, 3)
        let items = try store.enqueue([OutboxBatch(message: message(), recipients: phones.map { ($0, $0.token) }),
                                       OutboxBatch(message: message(.start), recipients: [(phones[0], "feed")])], dueMs: 0)
        let messages = { try store.database.scalarInt("SELECT count(*) FROM outbox_messages") }
        try store.settle([items[0].settlement(.settled), items[3].settlement(.settled)])
        #expect(try messages() == 1)
        try store.settle([items[1].settlement(.settled), items[2].settlement(.retry(at: 20))])
        #expect(try messages() == 1)
        #expect(try store.duePushes(nowMs: 20_000, limit: 10).map(\.id) == [items[2].id])
        try store.settle([items[2].settlement(.settled)])
        #expect(try messages() == 0)
        #expect(try store.outboxCount() == 0)
    }

    @Test func eachFanOutIsAMessageOfItsOwn() throws {
        let dir = try StoreScratch()
        let store = try dir.store()
        let phones = try devices(store, 2)
        let batch = OutboxBatch(message: message(), recipients: phones.map { ($0, $0.token) })
        let first = try store.enqueue([batch], dueMs: 0)
        #expect(first.count == 2)
        // A second fan-out of the same pause is a new message with rows of its own: the unique key is per message.
        #expect(try store.enqueue([batch], dueMs: 0).count == 2)
    }

    @Test func endingThePauseDropsItsAlertsButNotItsEnds() throws {
        let dir = try StoreScratch()
        let store = try dir.store()
        let phones = try devices(store, 2)
        try store.insertPause(PauseRecord(stateID: "s1", runID: "run-1", stateName: "Paused", pausedAt: 1, announcedAt: 1))
        _ = try store.enqueue([OutboxBatch(message: message(.alert), recipients: phones.map { ($0, $0.token) }),
                               OutboxBatch(message: message(.start), recipients: [(phones[0], "feed")]),
                               OutboxBatch(message: message(.end), recipients: [(phones[1], "beef")])], dueMs: 0)
        #expect(try store.markEnded(stateID: "s1", state: "Running", at: 5))
        #expect(try store.duePushes(nowMs: 0, limit: 10).map(\.purpose) == [.end])
        // The dropped pushes' bodies go with them: only the end's message is left.
        #expect(try store.database.scalarInt("SELECT count(*) FROM outbox_messages") == 1)
    }

    @Test func unregisteringADeviceDropsItsPushes() throws {
        let dir = try StoreScratch()
        let store = try dir.store()
        let phones = try devices(store, 2)
        _ = try store.enqueue([OutboxBatch(message: message(), recipients: phones.map { ($0, $0.token) })], dueMs: 0)
        #expect(try store.deleteDevice(id: "d0"))
        #expect(try store.duePushes(nowMs: 0, limit: 10).map(\.device.id) == ["d1"])
    }

    @Test func expiredPushesAndOrphanMessagesArePruned() throws {
        let dir = try StoreScratch()
        let store = try dir.store()
        let phones = try devices(store, 1)
        try store.insertPause(PauseRecord(stateID: "s1", runID: "run-1", stateName: "Paused", pausedAt: 1, announcedAt: 1))
        _ = try store.enqueue([OutboxBatch(message: message(expires: 100), recipients: [(phones[0], phones[0].token)]),
                               OutboxBatch(message: message(state: "s2", expires: 900), recipients: [(phones[0], phones[0].token)])],
                              dueMs: 0)
        #expect(try store.pruneOutbox(now: 100, wallMs: 7_000) == 1)
        #expect(try store.outboxCount() == 1)
        #expect(try store.database.scalarInt("SELECT count(*) FROM outbox_messages") == 1)
        // What `status` shows for it while its pause waits: dropped unsent at its expiry.
        #expect(try answers(store) == ["s1 d0 alert 0 expired 7000"])
    }

    private func answers(_ store: Store) throws -> [String] {
        try store.read("""
            SELECT state_id, device_id, purpose, status, reason, answered_ms FROM push_answers
            ORDER BY state_id, device_id, purpose
            """) { "\($0.string(0)) \($0.string(1)) \($0.string(2)) \($0.int64(3)) \($0.string(4)) \($0.int64(5))" }
    }

    /// APNs' last answer per pause, device and purpose is kept with the settle (the newest wins), goes when the
    /// device is unregistered, and stays when the pause ends, with its end push's answer kept too, until the pause
    /// goes (`prunePauses`, a day past the end): the answers go with it, and the row cap alone prunes none.
    @Test func answersAreKeptPastThePausesEndThenPruned() throws {
        let dir = try StoreScratch()
        let store = try dir.store()
        let phones = try devices(store, 2)
        try store.insertPause(PauseRecord(stateID: "s1", runID: "run-1", stateName: "Paused", pausedAt: 1, announcedAt: 1))
        let items = try store.enqueue([OutboxBatch(message: message(), recipients: phones.map { ($0, $0.token) })], dueMs: 0)
        func answer(_ device: String, _ status: Int, _ reason: String, _ ms: Int64) -> PushAnswer {
            PushAnswer(stateID: "s1", deviceID: device, purpose: "alert", status: status, reason: reason, answeredMs: ms)
        }
        try store.settle([items[0].settlement(.retry(at: 20)), items[1].settlement(.settled)],
                         answers: [answer("d0", 503, "ServiceUnavailable", 10), answer("d1", 200, "delivered", 11)])
        try store.settle([items[0].settlement(.settled)], answers: [answer("d0", 410, "Unregistered", 30)])
        #expect(try answers(store) == ["s1 d0 alert 410 Unregistered 30", "s1 d1 alert 200 delivered 11"])
        #expect(try store.outboxCount() == 0)

        #expect(try store.deleteDevice(id: "d0"))
        #expect(try answers(store) == ["s1 d1 alert 200 delivered 11"])
        #expect(try store.markEnded(stateID: "s1", state: "Running", at: 50))
        let ends = try store.enqueue([OutboxBatch(message: message(.end), recipients: [(phones[1], phones[1].token)])],
                                     dueMs: 0)
        try store.settle([ends[0].settlement(.settled)], answers: [PushAnswer(stateID: "s1", deviceID: "d1", purpose: "end",
                                                                        status: 200, reason: "delivered", answeredMs: 60)])
        #expect(try answers(store) == ["s1 d1 alert 200 delivered 11", "s1 d1 end 200 delivered 60"])
        #expect(try store.pruneAnswers() == 0)
        #expect(try store.prunePauses(endedBefore: 50) == 0)  // the caller passes now minus a day
        #expect(try answers(store).count == 2)
        #expect(try store.prunePauses(endedBefore: 51) == 1)
        #expect(try answers(store).isEmpty)
        #expect(try store.pause(stateID: "s1") == nil)
    }

    /// Over the row cap, the answers of the pause that ended first go, whole; a waiting pause's stay.
    @Test func overTheCapTheFirstEndedPausesAnswersGo() throws {
        let dir = try StoreScratch()
        let store = try dir.store()
        let phones = try devices(store, 3)
        for (state, ended) in [("first", Int64(100)), ("second", 200), ("waiting", nil)] as [(String, Int64?)] {
            try store.insertPause(PauseRecord(stateID: state, runID: "run-" + state, stateName: "Paused", pausedAt: 1,
                                              announcedAt: 1))
            try store.settle([], answers: phones.map {
                PushAnswer(stateID: state, deviceID: $0.id, purpose: "alert", status: 200, reason: "delivered",
                           answeredMs: 5_000)
            })
            if let ended { #expect(try store.markEnded(stateID: state, state: "Completed", at: ended)) }
        }
        #expect(try answers(store).count == 9)
        #expect(try store.pruneAnswers(retention: AnswerRetention(maxRows: 7)) == 3)
        #expect(try Set(answers(store).map { String($0.split(separator: " ")[0]) }) == ["second", "waiting"])
        #expect(try store.pruneAnswers(retention: AnswerRetention(maxRows: 1)) == 3)
        #expect(try Set(answers(store).map { String($0.split(separator: " ")[0]) }) == ["waiting"])
    }

    @Test func aFailedTransactionQueuesNothing() throws {
        let dir = try StoreScratch()
        let store = try dir.store()
        let phones = try devices(store, 2)
        struct Refused: Error {}
        #expect(throws: Refused.self) {
            try store.enqueue([OutboxBatch(message: message(), recipients: phones.map { ($0, $0.token) })], dueMs: 0) {
                throw Refused()
            }
        }
        #expect(try store.outboxCount() == 0)
    }

    @Test func theStoreNoticesItsFileWasDeleted() throws {
        let dir = try StoreScratch()
        let store = try dir.store()
        #expect(store.fileIsStillOurs)
        unlink(dir.file("relay.db"))
        #expect(!store.fileIsStillOurs)
    }
}

private extension String {
    func padding(_ width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
