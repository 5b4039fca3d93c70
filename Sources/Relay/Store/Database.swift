import CShims
import CSQLite

/// Owns one SQLite connection (`sqlite3*`), closed in `deinit`.
///
/// Not thread-safe and not Sendable: the relay's one `Store` owns it and is only touched from the `Ledger`
/// actor, which serializes every call (the connection may move between threads, never be used by two at once).
final class Database {
    /// The longest text or row SQLite will accept on this connection. Registry values are short (tokens are at
    /// most 400 characters), so anything near this is a bug or abuse; SQLite refuses it with `SQLITE_TOOBIG`.
    static let maxValueBytes: Int32 = 64 * 1024

    let path: String
    let handle: OpaquePointer

    /// SQLite's one process-wide setting, made before the first connection opens (after that SQLite refuses it,
    /// harmlessly). By default every page cache starts with 20 pages allocated at once and each slot's header
    /// written, ~87 kB resident per connection (and per temporary b-tree) whatever it reads; on demand, a cache holds
    /// only the pages it has read, a few kB for an idle relay's two connections. A cache that grows allocates a page
    /// at a time either way.
    private static let pageCacheOnDemand: Bool = CShims_sqlite_page_cache_on_demand() == SQLITE_OK

    /// Opens (creating if missing) the file at `path`. SQLite opens lazily, so a corrupt or unreadable file
    /// only shows up at the first read; `Store.init` makes that read before it hands the store out.
    ///
    /// Flags:
    /// - `READWRITE | CREATE`: the first boot creates the registry.
    /// - `NOMUTEX` (multi-thread mode): one owner serializes all use, so SQLite's per-call mutex is wasted work.
    /// - `EXRESCODE`: extended result codes from every call, so errors tell a FOREIGNKEY from a UNIQUE failure.
    /// - no `URI`: `DB_PATH` is a plain file name; a value like `file:x?mode=ro` must not change behaviour.
    /// - no `NOFOLLOW`: volume mounts (Kubernetes) may reach the file through a symlink.
    ///
    /// `readOnly`: `READONLY` instead of `READWRITE | CREATE`, for `backup` and `check`, which read a store the relay
    /// may be writing and must never create one where there was none.
    init(path: String, readOnly: Bool = false) throws {
        _ = Database.pageCacheOnDemand
        var db: OpaquePointer?
        let access = readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
        let flags = access | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            // open_v2 usually hands back a handle even on failure; it carries the message and must be closed.
            let error = SQLiteError(code: rc, db: db, sql: nil)
            sqlite3_close_v2(db)
            throw error
        }
        sqlite3_limit(db, SQLITE_LIMIT_LENGTH, Database.maxValueBytes)
        sqlite3_limit(db, SQLITE_LIMIT_SQL_LENGTH, Database.maxValueBytes)
        self.path = path
        self.handle = db
    }

    deinit {
        // close_v2, not close: if a Statement were somehow still alive, the connection is freed after it.
        sqlite3_close_v2(handle)
    }

    // MARK: - Running SQL

    /// Runs one or more SQL statements that return no rows the caller needs (DDL, PRAGMAs, BEGIN/COMMIT).
    func execute(_ sql: String) throws {
        try SQLiteError.check(sqlite3_exec(handle, sql, nil, nil, nil), handle, sql: sql)
    }

    /// Compiles one statement. The store caches the ones on its hot paths.
    func prepare(_ sql: String, persistent: Bool = false) throws -> Statement {
        try Statement(database: self, sql: sql, persistent: persistent)
    }

    /// The first column of the first row of `sql` as text (PRAGMA answers), or nil when there is no row.
    func scalarString(_ sql: String) throws -> String? {
        try prepare(sql).query { $0.optionalString(0) }.first ?? nil
    }

    /// The first column of the first row of `sql` as an integer, or nil when there is no row.
    func scalarInt(_ sql: String) throws -> Int64? {
        try prepare(sql).query { $0.optionalInt64(0) }.first ?? nil
    }

    /// Whether a transaction is open on this connection.
    var inTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    // MARK: - Transactions

    /// Runs `body` in one write transaction: all of it commits, or none of it does.
    ///
    /// `BEGIN IMMEDIATE` takes the write lock up front, so a concurrent writer makes us wait in the busy
    /// handler (`busy_timeout`) instead of failing half-way through with `SQLITE_BUSY`. Not reentrant.
    func transaction<T>(_ body: () throws -> T) throws -> T {
        precondition(!inTransaction, "Database.transaction is not reentrant")
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            // SQLite may already have rolled back on its own (SQLITE_FULL, SQLITE_IOERR); the body's error is
            // the one worth reporting, so a failing ROLLBACK is ignored.
            if inTransaction { _ = sqlite3_exec(handle, "ROLLBACK", nil, nil, nil) }
            throw error
        }
    }

    /// Rows changed by the last INSERT, UPDATE or DELETE on this connection.
    var changes: Int { Int(sqlite3_changes(handle)) }

    /// The rowid of the last successful INSERT on this connection.
    var lastInsertedRowID: Int64 { sqlite3_last_insert_rowid(handle) }
}
