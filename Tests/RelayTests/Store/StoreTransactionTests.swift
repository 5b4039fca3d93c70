import CSQLite
import Testing
@testable import Relay
@testable import RelayCore

/// Every write is all or nothing: a failure part-way leaves no half-written row.
// Extended result codes are C macros the importer drops: SQLITE_CONSTRAINT_FOREIGNKEY and _CHECK.
@Suite struct StoreTransactionTests {
    @Test func aConstraintFailureRollsBackEarlierWrites() throws {
        let dir = try StoreScratch()
        let store = try dir.store()
        let error = #expect(throws: SQLiteError.self) {
            try store.database.transaction {
                try store.database.execute("""
                    INSERT INTO devices (id, token, environment, server_id, created_at, updated_at)
                    VALUES ('half', 'aa', 'production', 's', 1, 1)
                    """)
                // No such device: the foreign key fails after the device row was written.
                try store.database.execute("INSERT INTO activities (device_id, run_id, token) VALUES ('ghost', 'r', 't')")
            }
        }
        #expect(error?.code == SQLITE_CONSTRAINT)
        #expect(error?.extendedCode == SQLITE_CONSTRAINT | (3 << 8))
        #expect(error?.description.contains("FOREIGN KEY") == true)
        #expect(try store.device(id: "half") == nil)
        #expect(try store.deviceCount() == 0)
        #expect(!store.database.inTransaction)
    }

    @Test func aSwiftErrorRollsBackToo() throws {
        struct Stop: Error {}
        let dir = try StoreScratch()
        let store = try dir.store()
        #expect(throws: Stop.self) {
            try store.database.transaction {
                try store.upsertDeviceRow("half")
                throw Stop()
            }
        }
        #expect(try store.deviceCount() == 0)
        // The connection is left clean: the next write commits.
        try store.upsertDevice(registration("whole"), now: 1)
        #expect(try store.deviceCount() == 1)
    }

    @Test func aCheckFailureInTheStoreLeavesNothing() throws {
        let dir = try StoreScratch()
        let store = try dir.store()
        try store.upsertDevice(registration("a"), now: 1)
        // The environment column refuses anything but the two hosts, even when the API is bypassed.
        let error = #expect(throws: SQLiteError.self) {
            try store.write("UPDATE devices SET environment = ?2 WHERE id = ?1", [.text("a"), .text("staging")])
        }
        #expect(error?.extendedCode == SQLITE_CONSTRAINT | (1 << 8))
        #expect(try store.device(id: "a")?.environment == .production)
    }

    @Test func statementsRefuseMisuse() throws {
        let dir = try StoreScratch()
        let store = try dir.store()
        #expect(throws: SQLiteError.self) { _ = try store.database.prepare("SELECT 1; SELECT 2") }
        #expect(throws: SQLiteError.self) { _ = try store.database.prepare("SELEKT 1") }
        #expect(throws: SQLiteError.self) { try store.write("DELETE FROM devices WHERE id = ?1", []) }
    }
}

extension Store {
    /// Writes a device row without a transaction of its own, for tests that wrap several writes in one.
    fileprivate func upsertDeviceRow(_ id: String) throws {
        try database.prepare("""
            INSERT INTO devices (id, token, environment, server_id, created_at, updated_at)
            VALUES (?1, 'aa', 'production', 's', 1, 1)
            """).execute([.text(id)])
    }
}
