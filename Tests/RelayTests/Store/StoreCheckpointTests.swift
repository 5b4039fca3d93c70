import CSQLite
import Glibc
import Testing
@testable import Relay
@testable import RelayCore

/// The write-ahead log is copied back into the file by `WALCheckpointer`'s thread, never inside a commit, and only once
/// the log has grown (or aged): each checkpoint that empties it costs the relay's next commit a sync.
@Suite struct StoreCheckpointTests {
    @Test func commitsNeverCheckpointAndTheBackgroundThreadDoesOnceTheLogHasGrown() async throws {
        let dir = try StoreScratch()
        let store = try dir.store(checkpoints: .init(frames: 100, maxAge: 3_600))
        #expect(try store.database.scalarInt("PRAGMA wal_autocheckpoint") == 0)
        // The checkpointer's first look copies the migration: the file itself then has the (empty) tables.
        #expect(await devicesInTheFile(dir, become: 0), "the migration was not copied into the file")
        // In WAL mode commits only append to the log. A few writes stay there (below 100 pages, an hour from the
        // age limit)...
        for n in 0..<5 { try store.upsertDevice(device(n), now: 1) }
        try await holds("a log of a few pages stays uncheckpointed", during: 2.5) { devicesInTheFile(dir) == 0 }
        // ...and many more are copied within a look or two of the checkpointer.
        for n in 5..<300 { try store.upsertDevice(device(n), now: 1) }
        #expect(await devicesInTheFile(dir, become: 300), "no checkpoint within \(Self.bound) s of the log passing 100 pages")
        #expect(try store.deviceCount() == 300)
    }

    @Test func aQuietLogIsCopiedOnceItIsOldEnough() async throws {
        let dir = try StoreScratch()
        let store = try dir.store(checkpoints: .init(frames: 100_000, maxAge: 1))
        #expect(await devicesInTheFile(dir, become: 0))
        for n in 0..<5 { try store.upsertDevice(device(n), now: 1) }
        #expect(await devicesInTheFile(dir, become: 5), "a log with new pages not copied within \(Self.bound) s of its age limit")
    }

    @Test func dueOnlyWithNewPagesPastTheThresholdOrTheAge() {
        let policy = WALCheckpointer.Policy(frames: 1_000, maxAge: 30)
        #expect(policy.isDue(frames: 0, atLast: -1, secondsSince: .infinity))  // at start: whatever the log holds
        #expect(!policy.isDue(frames: 400, atLast: 0, secondsSince: 5))
        #expect(policy.isDue(frames: 1_000, atLast: 0, secondsSince: 5))
        #expect(policy.isDue(frames: 400, atLast: 0, secondsSince: 30))
        // Nothing written since the last one: not again, however old or large the log.
        #expect(!policy.isDue(frames: 1_200, atLast: 1_200, secondsSince: 300))
    }

    /// The devices in the database file itself, without its write-ahead log (an `immutable` read ignores the log):
    /// what checkpoints have copied so far. -1 while the file has no devices table yet.
    private func devicesInTheFile(_ dir: StoreScratch) -> Int {
        var db: OpaquePointer?
        defer { sqlite3_close_v2(db) }
        guard sqlite3_open_v2("file:\(dir.file("relay.db"))?immutable=1", &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI,
                              nil) == SQLITE_OK else { return -1 }
        var statement: OpaquePointer?
        defer { sqlite3_finalize(statement) }
        guard sqlite3_prepare_v2(db, "SELECT count(*) FROM devices", -1, &statement, nil) == SQLITE_OK,
              sqlite3_step(statement) == SQLITE_ROW else { return -1 }
        return Int(sqlite3_column_int64(statement, 0))
    }

    /// How long, in seconds, the file may take to show a checkpoint: a bound for a stalled machine (it takes a look
    /// or two of the checkpointer).
    private static let bound = 30

    /// Whether the file itself holds `count` devices within `bound` seconds.
    private func devicesInTheFile(_ dir: StoreScratch, become count: Int) async -> Bool {
        await poll(within: Double(Self.bound), every: 0.1) { devicesInTheFile(dir) == count }
    }

    private func device(_ n: Int) -> DeviceRegistration {
        registration("phone-\(n)", token: String(repeating: "ab", count: 32))
    }
}
