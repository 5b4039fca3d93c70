import CSQLite

/// A failed SQLite call: the primary and extended result codes, SQLite's own message and the SQL that failed.
/// The description is one bounded line, fit for a log field; it never contains bound values, only the SQL text.
struct SQLiteError: Error, CustomStringConvertible {
    /// The extended result code (the connection is opened with `SQLITE_OPEN_EXRESCODE`).
    var extendedCode: Int32
    var message: String
    var sql: String?

    /// The primary result code, e.g. `SQLITE_CONSTRAINT` for `SQLITE_CONSTRAINT_FOREIGNKEY`.
    var code: Int32 { extendedCode & 0xff }

    init(code: Int32, message: String, sql: String? = nil) {
        self.extendedCode = code
        // Messages can quote user text (a CHECK expression, a file name): keep the line bounded.
        self.message = String(message.prefix(300))
        self.sql = sql.map { String($0.prefix(200)) }
    }

    /// Reads the message from the connection right away, before another call can overwrite it.
    init(code: Int32, db: OpaquePointer?, sql: String? = nil) {
        let text = db.flatMap { sqlite3_errmsg($0) }.map { String(cString: $0) }
            ?? sqlite3_errstr(code).map { String(cString: $0) } ?? "unknown error"
        self.init(code: code, message: text, sql: sql)
    }

    /// A short, fixed-vocabulary name for logs and metrics ("constraint", "busy", ...).
    var kind: String {
        switch code {
        case SQLITE_CONSTRAINT: "constraint"
        case SQLITE_BUSY, SQLITE_LOCKED: "busy"
        case SQLITE_FULL: "full"
        case SQLITE_IOERR: "io"
        case SQLITE_CORRUPT, SQLITE_NOTADB: "corrupt"
        case SQLITE_CANTOPEN: "cantopen"
        case SQLITE_READONLY: "readonly"
        case SQLITE_TOOBIG: "toobig"
        case SQLITE_MISUSE: "misuse"
        default: "sqlite"
        }
    }

    var description: String {
        var line = "SQLite error \(code)"
        if extendedCode != code { line += "/\(extendedCode)" }
        line += ": \(message)"
        if let sql { line += " (in: \(sql))" }
        return line
    }

    /// Throws unless `rc` is `SQLITE_OK`. A static member, not a free function, so it cannot clash with the
    /// `check` helpers of the other C edges (nghttp2, OpenSSL).
    static func check(_ rc: Int32, _ db: OpaquePointer?, sql: String? = nil) throws {
        guard rc == SQLITE_OK else { throw SQLiteError(code: rc, db: db, sql: sql) }
    }
}
