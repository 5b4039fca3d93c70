import Glibc
import Testing
@testable import Relay
@testable import RelayCore

/// The write-ahead log is copied back into the file by `WALCheckpointer`'s thread, never inside a commit.
@Suite struct StoreCheckpointTests {
    @Test func commitsNeverCheckpointAndTheBackgroundThreadDoes() async throws {
        let dir = try StoreScratch()
        let store = try dir.store()
        #expect(try store.database.scalarInt("PRAGMA wal_autocheckpoint") == 0)
        // Right after opening, the checkpointer may still be copying the migration: wait for the file to settle.
        var before = fileSize(dir.file("relay.db"))
        for _ in 0..<40 {
            try await Task.sleep(for: .milliseconds(100))
            let now = fileSize(dir.file("relay.db"))
            if now == before && now > 0 { break }
            before = now
        }
        // In WAL mode commits only append to the log; the database file grows only when a checkpoint copies them.
        for n in 0..<300 {
            try store.upsertDevice(registration("phone-\(n)", token: String(repeating: "ab", count: 32)), now: 1)
        }
        var copied = false
        for _ in 0..<50 where !copied {
            try await Task.sleep(for: .milliseconds(100))
            copied = fileSize(dir.file("relay.db")) > before
        }
        #expect(copied, "no checkpoint within 5 s of the writes")
        #expect(try store.deviceCount() == 300)
    }

    private func fileSize(_ path: String) -> Int {
        var info = stat()
        return stat(path, &info) == 0 ? Int(info.st_size) : -1
    }
}
