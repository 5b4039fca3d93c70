import CSQLite
import Glibc
import RelayCore

/// The relay's registry (`docs/architecture.md`): phones, their live-activity tokens and the pauses seen so far.
///
/// Not Sendable: the `Ledger` actor owns the only instance and so serializes every call onto one connection.
/// Every write runs in its own transaction. Times are unix seconds chosen by the caller, so tests control them.
final class Store {
    let path: String
    let database: Database
    /// Prepared statements keyed by their SQL. The SQL texts are literals in this type, so the cache is bounded.
    private var statements: [String: Statement] = [:]
    /// The file's device and inode when it was opened: if the path later names another file (or none), the relay
    /// would be writing to an unlinked file that vanishes at exit.
    private let identity: (device: UInt64, inode: UInt64)?
    /// Copies the write-ahead log into the file off the relay's path; stopped by `stopCheckpointing()` or with the
    /// store.
    private let checkpointer: WALCheckpointer

    /// Opens the file at `path` (creating it on first boot), sets the connection up and brings the schema to
    /// the latest version. Throws a `StoreError` naming the path, the problem and the fix; never traps on a
    /// bad file.
    init(path: String, checkpoints: WALCheckpointer.Policy = WALCheckpointer.Policy()) throws {
        do {
            let db = try Database(path: path)
            try Store.configure(db, path: path)
            try Store.migrate(db, path: path)
            try Store.enforceForeignKeys(db)
            try Store.verify(db)
            let checkpointer = try WALCheckpointer(path: path, policy: checkpoints)
            checkpointer.progress.watch(db)
            self.database = db
            self.checkpointer = checkpointer
        } catch let error as SQLiteError {
            throw StoreError.diagnosing(error, path: path)
        }
        self.path = path
        self.identity = Store.identity(of: path)
    }

    /// Stops and joins the background checkpointer (the relay's stop, before its last checkpoint). Idempotent.
    func stopCheckpointing() { checkpointer.stop() }

    deinit { checkpointer.progress.stopWatching(database) }

    /// Whether `path` still names the file this store opened. False when it was deleted or replaced underneath.
    var fileIsStillOurs: Bool {
        guard let identity else { return true }
        guard let now = Store.identity(of: path) else { return false }
        return now == identity
    }

    /// Bytes in this connection's page cache. It fills as the store grows, up to SQLite's bound (2 MiB by
    /// default), and is the part of the relay's memory that grows with the store. Read from the pager, so it works
    /// with SQLite's allocator statistics off (the relay's own build turns them off).
    var cacheBytes: Int? {
        var current: Int32 = 0, highwater: Int32 = 0
        guard sqlite3_db_status(database.handle, SQLITE_DBSTATUS_CACHE_USED, &current, &highwater, 0) == SQLITE_OK
        else { return nil }
        return Int(current)
    }

    private static func identity(of path: String) -> (device: UInt64, inode: UInt64)? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return (UInt64(info.st_dev), UInt64(info.st_ino))
    }

    static let busyTimeoutMs = 200

    // MARK: - Connection setup

    /// PRAGMAs are per connection and (except `journal_mode`) not stored in the file, so they run on every open.
    private static func configure(_ db: Database, path: String) throws {
        // Wait at most 200 ms for another connection's write lock (a backup, an operator's sqlite3 shell): the
        // store is used from the relay's one actor, so a longer wait would stall events and the API with it. A write
        // that gives up fails cleanly and is tried again (pending pauses, the outbox), or answers 503 to a client.
        try db.execute("PRAGMA busy_timeout = \(Store.busyTimeoutMs)")
        // SQLite quietly falls back to read-only for a write-protected file; say so now, not at the first write.
        if sqlite3_db_readonly(db.handle, "main") == 1 {
            throw SQLiteError(code: SQLITE_READONLY, message: "the file could only be opened read-only")
        }
        // The first statement to read the file: a corrupt or foreign file fails here, not on the first request.
        let mode = try db.scalarString("PRAGMA journal_mode = WAL")
        if mode?.lowercased() != "wal" {
            // WAL needs shared memory beside the file; some network file systems lack it. Still correct, slower.
            Log.warn("store.journal_mode", ["path": path, "mode": mode ?? "unknown", "wanted": "wal"])
        }
        // In WAL mode NORMAL never corrupts; an OS crash or power cut may lose the last commits (a process crash
        // does not), which at worst means one pause is announced again after the machine comes back.
        try db.execute("PRAGMA synchronous = NORMAL")
        // Checkpoints run on `WALCheckpointer`'s own thread, never inside one of the relay's commits; the log file
        // a checkpoint has emptied is cut back to 4 MiB when it is reused.
        try db.execute("PRAGMA wal_autocheckpoint = 0")
        try db.execute("PRAGMA journal_size_limit = \(4 << 20)")
    }

    /// Cascading deletes (a device's activities and outbox rows, a message's rows) depend on this; it is off by
    /// default in every connection, and stays off until the schema is migrated (a table rebuilt must not cascade).
    private static func enforceForeignKeys(_ db: Database) throws {
        try db.execute("PRAGMA foreign_keys = ON")
        guard try db.scalarInt("PRAGMA foreign_keys") == 1 else {
            throw SQLiteError(code: SQLITE_MISUSE, message: "this SQLite build does not enforce foreign keys")
        }
    }

    /// Brings the schema from `PRAGMA user_version` up to `migrations.count`, all in one write transaction so
    /// two relays started on the same file cannot both migrate it. Refuses files it does not understand.
    /// Foreign keys are off meanwhile (a migration may rebuild a table others refer to); every reference is checked
    /// before the commit.
    private static func migrate(_ db: Database, path: String) throws {
        try db.execute("PRAGMA foreign_keys = OFF")
        try db.transaction {
            let version = Int(try db.scalarInt("PRAGMA user_version") ?? 0)
            let latest = migrations.count
            if version > latest {
                throw StoreError.newerSchema(path: path, version: version, latest: latest)
            }
            if version == 0 {
                let tables = try db.scalarInt("SELECT count(*) FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%'")
                if let tables, tables > 0 {
                    throw StoreError(kind: .foreignDatabase, path: path,
                                     problem: "is an SQLite database of some other program "
                                         + "(it has \(tables) tables but no prefect-push schema version)",
                                     fix: "set DB_PATH to a file of its own")
                }
            }
            guard version < latest else { return }
            for step in version..<latest {
                try db.execute(migrations[step])
            }
            if let table = try db.scalarString("PRAGMA foreign_key_check") {
                throw StoreError(kind: .other, path: path,
                                 problem: "has rows in \(table) that refer to rows that are gone",
                                 fix: "restore the file from a backup, or set DB_PATH to a new file")
            }
            // user_version lives in the file header and is transactional: it commits with the schema or not at all.
            try db.execute("PRAGMA user_version = \(latest)")
            Log.info("store.migrated", ["path": path, "from": String(version), "to": String(latest)])
        }
    }

    /// A damaged page would otherwise surface on some later request; the registry is small, so checking
    /// the whole file at start-up costs milliseconds.
    private static func verify(_ db: Database) throws {
        let verdict = try db.scalarString("PRAGMA quick_check(1)")
        guard verdict == "ok" else {
            throw SQLiteError(code: SQLITE_CORRUPT, message: "quick_check: \(verdict ?? "no answer")")
        }
    }

    // MARK: - Helpers for the extensions

    /// The cached prepared statement for `sql`, compiled on first use.
    func statement(_ sql: String) throws -> Statement {
        if let cached = statements[sql] { return cached }
        let compiled = try database.prepare(sql, persistent: true)
        statements[sql] = compiled
        return compiled
    }

    /// Runs one write statement in its own transaction, or as part of the caller's when one is open (a fan-out
    /// commits the pause's props with its outbox rows); returns the number of rows it changed.
    @discardableResult
    func write(_ sql: String, _ values: [SQLValue]) throws -> Int {
        let statement = try statement(sql)
        if database.inTransaction { return try statement.execute(values) }
        return try database.transaction { try statement.execute(values) }
    }

    /// Runs one read statement and maps each row.
    func read<T>(_ sql: String, _ values: [SQLValue] = [], row: (Statement) throws -> T) throws -> [T] {
        try statement(sql).query(values, row: row)
    }

    /// Runs a `SELECT count(*) ...`.
    func count(_ sql: String, _ values: [SQLValue] = []) throws -> Int {
        Int(try read(sql, values) { $0.int64(0) }.first ?? 0)
    }
}
