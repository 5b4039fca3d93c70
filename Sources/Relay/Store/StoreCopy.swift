import CSQLite
import Glibc

/// Copies and inspects a store from outside the relay (`prefect-push backup`, `prefect-push check`), each on a
/// connection of its own, so both work while the relay runs and pushes.
///
/// The copy is SQLite's online backup in one step (`sqlite3_backup_step(-1)`): one read transaction, so one
/// consistent snapshot. In WAL mode a reader never blocks the relay's writers (nor they it), so a single step costs
/// the relay nothing; a copy made in several steps would instead start over each time the relay commits, which
/// during a fan-out is every few milliseconds.
enum StoreCopy {
    /// What a finished copy holds.
    struct Copied {
        var pages: Int
        var bytes: Int
        var schemaVersion: Int
    }

    /// What `inspect` found: the schema version, and SQLite's `quick_check` complaints (none when the file is sound).
    struct Inspection {
        var schemaVersion: Int
        var problems: [String]
        /// Registered devices and pushes in the outbox, when the schema is the one this build writes.
        var devices: Int?
        var pending: Int?
    }

    /// The longest a copy waits for SQLite to let it read (WAL recovery after a crash, a non-WAL writer).
    static let busyTimeoutMs: Int32 = 5_000

    // MARK: - Backup

    /// Copies the store at `source` into a new file at `destination`, verifies the copy and only then moves it into
    /// place (`destination.partial` until then, so a failed or interrupted copy never replaces a good one). The copy
    /// is a plain rollback-journal file: it needs no `-wal` beside it to be whole.
    static func backup(from source: String, to destination: String) throws -> Copied {
        try refuseBadDestination(destination, source: source)
        let partial = destination + ".partial"
        for leftover in [partial, partial + "-journal", partial + "-wal", partial + "-shm"] { unlink(leftover) }
        do {
            let copied = try copy(from: source, toFile: partial)
            guard rename(partial, destination) == 0 else {
                throw StoreError(kind: .other, path: destination,
                                 problem: "could not be put in place (\(String(cString: strerror(errno))))",
                                 fix: "check the directory is writable, or name another FILE")
            }
            return copied
        } catch {
            unlink(partial)
            unlink(partial + "-journal")
            throw error
        }
    }

    /// The copy itself; each connection is closed (its `Database` released) before this returns, so the file can be
    /// renamed and nothing of it is left in a journal.
    private static func copy(from source: String, toFile target: String) throws -> Copied {
        let from = try openExisting(source)
        let to: Database
        do {
            to = try Database(path: target)
        } catch let error as SQLiteError {
            throw StoreError.diagnosing(error, path: target)
        }
        try runBackup(from: from, into: to)
        do {
            // The source is in WAL mode and its header says so; the copy needs no -wal file to be read.
            _ = try to.scalarString("PRAGMA journal_mode = DELETE")
            let problems = try quickCheck(to, limit: 5)
            guard problems.isEmpty else {
                throw StoreError(kind: .notADatabase, path: target,
                                 problem: "the copy failed its integrity check (\(problems.joined(separator: "; ")))",
                                 fix: "run prefect-push check on the relay's DB_PATH; if it fails too, restore an "
                                     + "earlier backup")
            }
            let pages = Int(try to.scalarInt("PRAGMA page_count") ?? 0)
            let pageSize = Int(try to.scalarInt("PRAGMA page_size") ?? 0)
            let version = Int(try to.scalarInt("PRAGMA user_version") ?? 0)
            return Copied(pages: pages, bytes: pages * pageSize, schemaVersion: version)
        } catch let error as SQLiteError {
            throw StoreError.diagnosing(error, path: target)
        }
    }

    /// `sqlite3_backup_init`, one whole step, `sqlite3_backup_finish`. The backup handle lives only in this function;
    /// `finish` frees it on every path and reports the step's error, if there was one.
    static func runBackup(from source: Database, into destination: Database) throws {
        guard let backup = sqlite3_backup_init(destination.handle, "main", source.handle, "main") else {
            throw SQLiteError(code: sqlite3_extended_errcode(destination.handle), db: destination.handle)
        }
        var rc: Int32
        var waitedMs: Int32 = 0
        repeat {
            rc = sqlite3_backup_step(backup, -1)
            // BUSY/LOCKED: the source can't be read just now (WAL recovery, a writer outside WAL mode); wait a little.
            guard rc == SQLITE_BUSY || rc == SQLITE_LOCKED, waitedMs < busyTimeoutMs else { break }
            usleep(50_000)
            waitedMs += 50
        } while true
        let finished = sqlite3_backup_finish(backup)
        if rc == SQLITE_BUSY || rc == SQLITE_LOCKED {
            throw SQLiteError(code: rc, message: "the store stayed locked for \(busyTimeoutMs / 1000) s")
        }
        guard rc == SQLITE_DONE else { throw SQLiteError(code: rc, db: destination.handle) }
        try SQLiteError.check(finished, destination.handle)
    }

    /// A destination that is the store itself (a copy onto itself truncates it) or a directory is refused.
    private static func refuseBadDestination(_ destination: String, source: String) throws {
        var target = stat()
        guard stat(destination, &target) == 0 else { return }
        if (target.st_mode & S_IFMT) == S_IFDIR {
            throw StoreError(kind: .isDirectory, path: destination, problem: "is a directory",
                             fix: "name a file, e.g. \(StoreError.shown(destination))/prefect-push-backup.db")
        }
        var store = stat()
        if stat(source, &store) == 0 && store.st_dev == target.st_dev && store.st_ino == target.st_ino {
            throw StoreError(kind: .other, path: destination, problem: "is DB_PATH itself",
                             fix: "name another file for the backup")
        }
    }

    // MARK: - Inspection

    /// The schema version and a `quick_check` of the store at `path`, read-only. Bounded: at most `limit` problems
    /// are listed, and a check still running after `timeout` seconds is interrupted (an error saying so).
    static func inspect(path: String, limit: Int = 5, timeout: Double = 10) throws -> Inspection {
        let db = try openExisting(path)
        do {
            let version = Int(try db.scalarInt("PRAGMA user_version") ?? 0)
            let problems = try withDeadline(db, seconds: timeout) { try quickCheck(db, limit: limit) }
            var inspection = Inspection(schemaVersion: version, problems: problems)
            if problems.isEmpty && version == Store.migrations.count {
                inspection.devices = Int(try db.scalarInt("SELECT count(*) FROM devices") ?? 0)
                inspection.pending = Int(try db.scalarInt("SELECT count(*) FROM pending_pushes") ?? 0)
            }
            return inspection
        } catch let error as SQLiteError where error.code == SQLITE_INTERRUPT {
            throw StoreError(kind: .other, path: path, problem: "its integrity check took longer than \(Int(timeout)) s",
                             fix: "run the check again while the node is less busy; a store this slow to read is "
                                 + "far larger than the relay ever writes, so check DB_PATH names the right file")
        } catch let error as SQLiteError {
            throw StoreError.diagnosing(error, path: path)
        }
    }

    /// `PRAGMA quick_check(limit)`: the rows it returns, or none when it answered `ok`.
    static func quickCheck(_ db: Database, limit: Int) throws -> [String] {
        let rows = try db.prepare("PRAGMA quick_check(\(max(1, limit)))").query { $0.optionalString(0) ?? "" }
        return rows == ["ok"] ? [] : rows
    }

    /// A read-only connection to an existing store; a missing file is an error, never created.
    static func openExisting(_ path: String) throws -> Database {
        do {
            let db = try Database(path: path, readOnly: true)
            try db.execute("PRAGMA busy_timeout = \(busyTimeoutMs)")
            // A first read: a file that isn't SQLite fails here, with the diagnosis below.
            _ = try db.scalarInt("PRAGMA schema_version")
            return db
        } catch let error as SQLiteError {
            if access(path, F_OK) != 0 {
                throw StoreError(kind: .other, path: path, problem: "does not exist",
                                 fix: "set DB_PATH to the relay's store (the relay creates it at its first start)")
            }
            throw StoreError.diagnosing(error, path: path)
        }
    }

    /// Runs `body` with SQLite's progress handler interrupting it once `seconds` have passed.
    private static func withDeadline<T>(_ db: Database, seconds: Double, _ body: () throws -> T) throws -> T {
        let deadline = UnsafeMutablePointer<Double>.allocate(capacity: 1)
        deadline.initialize(to: SystemClock.monotonic() + seconds)
        defer {
            sqlite3_progress_handler(db.handle, 0, nil, nil)
            deadline.deallocate()
        }
        // Called every 10,000 virtual machine steps: a clock read each time is negligible.
        sqlite3_progress_handler(db.handle, 10_000, { context in
            SystemClock.monotonic() > context!.assumingMemoryBound(to: Double.self).pointee ? 1 : 0
        }, deadline)
        return try body()
    }
}
