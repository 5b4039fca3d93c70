import CSQLite
import Glibc

extension StoreCopy {
    /// What a restore put in place.
    struct Restored {
        var pages: Int
        var schemaVersion: Int
    }

    /// Writes the backup at `backup` over the store at `store` (created if missing) with SQLite's backup API, so a
    /// `-wal` left beside the store is taken into account rather than replayed over the restored pages. The backup is
    /// checked first (it must be sound, and of a schema this version can open) and the store after; the log is then
    /// folded into the file. The relay must be stopped: it would go on with what it remembers of the old file, so a
    /// store something else has open is refused before anything is written (`lockOut`).
    static func restore(from backup: String, to store: String) throws -> Restored {
        let inspection = try inspect(path: backup)
        guard inspection.problems.isEmpty else {
            throw StoreError(kind: .notADatabase, path: backup,
                             problem: "is damaged (\(inspection.problems.joined(separator: "; ")))",
                             fix: "restore an earlier backup")
        }
        let latest = Store.migrations.count
        if inspection.schemaVersion > latest {
            throw StoreError(kind: .newerSchema, path: backup,
                             problem: "was written by a newer prefect-push (schema \(inspection.schemaVersion) > "
                                 + "\(latest), the newest this version knows)",
                             fix: "restore it with that version, or pick a backup taken before the upgrade")
        }
        var from = stat(), to = stat()
        if stat(backup, &from) == 0, stat(store, &to) == 0, from.st_dev == to.st_dev, from.st_ino == to.st_ino {
            throw StoreError(kind: .other, path: backup, problem: "is DB_PATH itself", fix: "name the backup file")
        }
        let source = try openExisting(backup)
        let destination: Database
        do {
            destination = try Database(path: store)
            try destination.execute("PRAGMA busy_timeout = \(lockWaitMs)")
            try lockOut(destination, path: store)
            try destination.execute("PRAGMA busy_timeout = \(busyTimeoutMs)")
        } catch let error as SQLiteError {
            throw StoreError.diagnosing(error, path: store)
        }
        do {
            try runBackup(from: source, into: destination)
            let problems = try quickCheck(destination, limit: 5)
            guard problems.isEmpty else {
                throw StoreError(kind: .notADatabase, path: store,
                                 problem: "failed its integrity check after the restore (\(problems.joined(separator: "; ")))",
                                 fix: "check the volume (dmesg), then restore again")
            }
            // A store in WAL mode took the pages in its log: fold them into the file, so it is whole on its own.
            _ = try destination.scalarString("PRAGMA wal_checkpoint(TRUNCATE)")
            let pages = Int(try destination.scalarInt("PRAGMA page_count") ?? 0)
            let version = Int(try destination.scalarInt("PRAGMA user_version") ?? 0)
            return Restored(pages: pages, schemaVersion: version)
        } catch let error as SQLiteError {
            throw StoreError.diagnosing(error, path: store)
        }
    }

    /// How long a restore waits for the store's exclusive lock: long enough for a `status` or a `backup` read under
    /// way to finish; a relay holds the file for as long as it runs, so waiting longer would only delay the refusal.
    static let lockWaitMs: Int32 = 1_000

    /// Takes the exclusive lock on the store's file, kept until `db` closes, or refuses when another connection has
    /// the file open. An idle relay holds no write lock, so `BEGIN EXCLUSIVE` alone would not see it (in WAL mode it
    /// only shuts out other writers); but every connection to a WAL-mode file keeps a shared lock on the file itself
    /// for as long as it is open. With `locking_mode = EXCLUSIVE` the first transaction asks for the file's exclusive
    /// lock, which fails while that shared lock is held, and keeps it after the commit: no relay starts on the store
    /// halfway through the restore either. (A relay on a file system without WAL, `store.journal_mode` in its log,
    /// holds no lock between writes and can't be seen this way.)
    private static func lockOut(_ db: Database, path: String) throws {
        _ = try db.scalarString("PRAGMA locking_mode = EXCLUSIVE")
        do {
            try db.execute("BEGIN EXCLUSIVE")
            try db.execute("COMMIT")
        } catch let error as SQLiteError where error.code == SQLITE_BUSY || error.code == SQLITE_LOCKED {
            throw StoreError(kind: .locked, path: path,
                             problem: "is in use: a relay seems to be running on it (or another prefect-push command "
                                 + "or an sqlite3 shell has it open)",
                             fix: "stop the relay first (kubectl scale --replicas=0, systemctl stop, podman stop), "
                                 + "then run the restore again", underlying: error)
        }
    }
}
