import CShims
import CSQLite

/// A value bound to a statement parameter. The store only keeps integers (unix seconds, counts) and text.
enum SQLValue: Equatable {
    case integer(Int64)
    case text(String)
    case null

    static func text(_ value: String?) -> SQLValue { value.map(SQLValue.text) ?? .null }
    static func integer(_ value: Int64?) -> SQLValue { value.map(SQLValue.integer) ?? .null }
}

/// Owns one `sqlite3_stmt*`, finalized in `deinit`. Not thread-safe: used only by the owner of its `Database`.
/// It holds its `Database` strongly so the connection cannot close under a live statement.
final class Statement {
    let sql: String
    private let database: Database
    private let handle: OpaquePointer

    /// Compiles exactly one SQL statement. `persistent` hints SQLite that the statement is cached and reused.
    init(database: Database, sql: String, persistent: Bool = false) throws {
        var compiled: OpaquePointer?
        var trailing = false
        let flags = persistent ? UInt32(SQLITE_PREPARE_PERSISTENT) : 0
        let rc = sql.withCString { text -> Int32 in
            var tail: UnsafePointer<CChar>?
            let rc = sqlite3_prepare_v3(database.handle, text, -1, flags, &compiled, &tail)
            // Anything but whitespace after the first statement would be silently ignored by SQLite.
            while let t = tail, t.pointee != 0 {
                if !(t.pointee == 0x20 || t.pointee == 0x0a || t.pointee == 0x09 || t.pointee == 0x0d) {
                    trailing = true
                    break
                }
                tail = t + 1
            }
            return rc
        }
        guard rc == SQLITE_OK else {
            let error = SQLiteError(code: rc, db: database.handle, sql: sql)
            sqlite3_finalize(compiled)
            throw error
        }
        guard let compiled, !trailing else {
            sqlite3_finalize(compiled)
            throw SQLiteError(code: SQLITE_MISUSE, message: "expected exactly one SQL statement", sql: sql)
        }
        self.sql = sql
        self.database = database
        self.handle = compiled
    }

    deinit {
        sqlite3_finalize(handle)
    }

    // MARK: - Binding and stepping

    /// Resets the statement and binds `values` to parameters 1...n; the count must match the SQL.
    func bind(_ values: [SQLValue]) throws {
        reset()
        let expected = Int(sqlite3_bind_parameter_count(handle))
        guard values.count == expected else {
            throw SQLiteError(code: SQLITE_RANGE, message: "\(values.count) values for \(expected) parameters", sql: sql)
        }
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let rc: Int32
            switch value {
            case .integer(let n):
                rc = sqlite3_bind_int64(handle, index, n)
            case .null:
                rc = sqlite3_bind_null(handle, index)
            case .text(var s):
                // Explicit byte length: keeps embedded NULs and lets SQLITE_LIMIT_LENGTH refuse oversized text.
                // A nil pointer would bind NULL, so the empty string gets a real (empty) C string.
                rc = s.withUTF8 { bytes in
                    guard let base = bytes.baseAddress, !bytes.isEmpty else {
                        return sqlite3_bind_text(handle, index, "", 0, CShims_SQLITE_TRANSIENT())
                    }
                    return sqlite3_bind_text64(handle, index, UnsafeRawPointer(base).assumingMemoryBound(to: CChar.self),
                                               UInt64(bytes.count), CShims_SQLITE_TRANSIENT(), UInt8(SQLITE_UTF8))
                }
            }
            try SQLiteError.check(rc, database.handle, sql: sql)
        }
    }

    /// Advances one row: true when a row is ready to read, false when the statement is done.
    func step() throws -> Bool {
        let rc = sqlite3_step(handle)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw SQLiteError(code: rc, db: database.handle, sql: sql)
        }
    }

    /// Ends the current run and drops bindings. A statement left mid-result would hold a read snapshot open.
    func reset() {
        sqlite3_reset(handle)  // repeats the last step's error, which was already thrown
        sqlite3_clear_bindings(handle)
    }

    // MARK: - Whole runs

    /// Binds, runs to completion and resets. Returns the number of rows changed.
    @discardableResult
    func execute(_ values: [SQLValue] = []) throws -> Int {
        try bind(values)
        defer { reset() }
        while try step() {}
        return Int(sqlite3_changes(database.handle))
    }

    /// Binds, reads every row with `row` and resets, even when reading throws.
    func query<T>(_ values: [SQLValue] = [], row: (Statement) throws -> T) throws -> [T] {
        try bind(values)
        defer { reset() }
        var rows: [T] = []
        while try step() {
            rows.append(try row(self))
        }
        return rows
    }

    // MARK: - Columns (0-based, valid after `step()` returned true)

    func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }

    func optionalInt64(_ column: Int32) -> Int64? {
        sqlite3_column_type(handle, column) == SQLITE_NULL ? nil : sqlite3_column_int64(handle, column)
    }

    func string(_ column: Int32) -> String { optionalString(column) ?? "" }

    func optionalString(_ column: Int32) -> String? {
        guard sqlite3_column_type(handle, column) != SQLITE_NULL, let text = sqlite3_column_text(handle, column) else {
            return nil
        }
        // column_text first, then column_bytes: the documented order for a correct byte count.
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }
}
