import CSQLite
import Glibc
import Testing
@testable import Relay
@testable import RelayCore

/// `StoreCopy`: the online backup and the read-only integrity check behind `prefect-push backup` and `check`.
@Suite struct StoreCopyTests {
    /// A copy made while another connection commits is one consistent snapshot: it opens as a store, passes the
    /// check, and holds every device committed before it began and an unbroken prefix of those committed during it
    /// (each commit adds the next numbered device, so a torn copy would show a gap). Commits are stamped on the
    /// monotonic clock, and the copy is made again (bounded) until at least one commit fell inside it: the test
    /// proves the writes happened during the copy rather than assuming so. The writer is a thread of its own, not a
    /// task: this test blocks its thread while it waits, and a task could wait behind it for a pool thread.
    @Test func aCopyWhileAnotherConnectionCommitsIsAConsistentPrefix() throws {
        let dir = try StoreScratch()
        let store = try dir.store()
        for i in 0..<2000 { try store.upsertDevice(registration("before-\(i)", token: "aa\(i)bb"), now: 1) }
        let path = dir.file("relay.db")
        let commits = Locked<[Double]>([])
        let stop = Locked(false)
        let failure = Locked<String?>(nil)
        let writer = try #require(RelayThread.start("test.writer", name: "copy-writer") {
            do {
                let other = try Store(path: path)
                for i in 0..<50_000 where !stop.withLock({ $0 }) {
                    try other.upsertDevice(registration("during-\(i)", token: "cc\(i)dd"), now: 2)
                    commits.withLock { $0.append(SystemClock.monotonic()) }
                }
            } catch {
                failure.withLock { $0 = "\(error)" }
            }
        })
        defer {
            stop.withLock { $0 = true }
            pthread_join(writer, nil)
        }
        try waitUntil("the writer commits", timeout: 30) { !commits.withLock { $0.isEmpty } }
        var window = (start: 0.0, end: 0.0)
        var copied: StoreCopy.Copied?
        for _ in 0..<50 {
            let start = SystemClock.monotonic()
            copied = try StoreCopy.backup(from: path, to: dir.file("copy.db"))
            window = (start, SystemClock.monotonic())
            if commits.withLock({ $0.contains { $0 > window.start && $0 < window.end } }) { break }
        }
        stop.withLock { $0 = true }
        #expect(failure.withLock { $0 } == nil)
        let stamps = commits.withLock { $0 }
        #expect(stamps.contains { $0 > window.start && $0 < window.end }, "no commit fell inside any of 50 copies")
        #expect(copied?.schemaVersion == Store.migrations.count)
        #expect(access(dir.file("copy.db.partial"), F_OK) != 0)
        #expect(access(dir.file("copy.db-wal"), F_OK) != 0)  // a plain file: nothing beside it
        let inspection = try StoreCopy.inspect(path: dir.file("copy.db"))
        #expect(inspection.problems.isEmpty)
        let ids = Set(try dir.store("copy.db").allDevices().map(\.id))
        #expect((0..<2000).allSatisfy { ids.contains("before-\($0)") })
        let during = ids.count - 2000
        #expect((0..<during).allSatisfy { ids.contains("during-\($0)") }, "the copy's writes are not a prefix")
        // Every commit finished before the copy began is in it; none that began after it ended.
        #expect(during >= stamps.count { $0 < window.start } && during <= stamps.count { $0 < window.end } + 1)
        #expect(inspection.devices == ids.count)
    }

    @Test func aSecondBackupReplacesTheFirst() throws {
        let dir = try StoreScratch()
        let store = try dir.store()
        _ = try StoreCopy.backup(from: dir.file("relay.db"), to: dir.file("copy.db"))
        try store.upsertDevice(registration("phone"), now: 1)
        _ = try StoreCopy.backup(from: dir.file("relay.db"), to: dir.file("copy.db"))
        #expect(try StoreCopy.inspect(path: dir.file("copy.db")).devices == 1)
    }

    @Test func refusesToCopyOntoItselfOrIntoADirectoryOrFromNothing() throws {
        let dir = try StoreScratch()
        _ = try dir.store()
        let itself = #expect(throws: StoreError.self) { _ = try StoreCopy.backup(from: dir.file("relay.db"), to: dir.file("relay.db")) }
        #expect(itself?.description.contains("is DB_PATH itself") == true)
        let directory = #expect(throws: StoreError.self) { _ = try StoreCopy.backup(from: dir.file("relay.db"), to: dir.path) }
        #expect(directory?.kind == .isDirectory)
        let missing = #expect(throws: StoreError.self) { _ = try StoreCopy.backup(from: dir.file("none.db"), to: dir.file("x.db")) }
        #expect(missing?.description.contains("does not exist") == true)
        #expect(access(dir.file("none.db"), F_OK) != 0)  // never created by reading it
        #expect(access(dir.file("x.db"), F_OK) != 0)
    }

    /// A restore under a relay that has the store open (as `Store` opens it: WAL mode, a checkpointer beside it) is
    /// refused before anything is written: the relay would go on with what it remembers of the old file. Once the
    /// relay has closed it, the same restore goes through.
    @Test func aRestoreIsRefusedWhileARelayHasTheStoreOpen() throws {
        let dir = try StoreScratch()
        do {
            let old = try dir.store("old.db")
            try old.upsertDevice(registration("from-the-backup"), now: 1)
        }
        _ = try StoreCopy.backup(from: dir.file("old.db"), to: dir.file("backup.db"))
        var relay: Store? = try dir.store()
        try relay?.upsertDevice(registration("live", token: "cc00dd"), now: 2)

        let refused = #expect(throws: StoreError.self) {
            _ = try StoreCopy.restore(from: dir.file("backup.db"), to: dir.file("relay.db"))
        }
        #expect(refused?.kind == .locked)
        #expect(refused?.description.contains("a relay seems to be running on it") == true, "\(String(describing: refused))")
        #expect(try relay?.allDevices().map(\.id) == ["live"])

        relay?.stopCheckpointing()
        relay = nil
        let restored = try StoreCopy.restore(from: dir.file("backup.db"), to: dir.file("relay.db"))
        #expect(restored.schemaVersion == Store.migrations.count)
        #expect(try dir.store().allDevices().map(\.id) == ["from-the-backup"])
    }

    /// A damaged page is named by the check, read-only: the file is left as it was.
    @Test func theCheckFindsADamagedPage() throws {
        let dir = try StoreScratch()
        do {
            let store = try dir.store()
            for i in 0..<300 { try store.upsertDevice(registration("phone-\(i)", token: "ab\(i)cd"), now: 1) }
            try store.database.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        }
        #expect(try StoreCopy.inspect(path: dir.file("relay.db")).problems.isEmpty)
        // Scribble over the middle of page 3 (a devices page), past its header.
        let fd = open(dir.file("relay.db"), O_WRONLY)
        #expect(fd >= 0)
        let junk = [UInt8](repeating: 0xff, count: 200)
        _ = junk.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(2 * 4096 + 8)) }
        close(fd)
        let inspection: StoreCopy.Inspection
        do {
            inspection = try StoreCopy.inspect(path: dir.file("relay.db"), limit: 3)
        } catch let error as StoreError {
            // Damage to a page's header may already fail the first read: still a named, read-only refusal.
            #expect(error.kind == .notADatabase)
            return
        }
        #expect(!inspection.problems.isEmpty && inspection.problems.count <= 3)
        #expect(inspection.devices == nil)
    }
}
