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
    /// folded into the file. The relay must be stopped: it would go on with what it remembers of the old file.
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
}
