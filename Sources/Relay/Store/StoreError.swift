import CSQLite
import Glibc

/// Why the registry file cannot be used, said so an operator can fix it: the path, what is wrong, what to do.
/// Thrown by `Store.init`; `main` prints `description` and exits instead of crashing later.
struct StoreError: Error, CustomStringConvertible {
    enum Kind: String {
        case missingDirectory, directoryNotWritable, isDirectory, readOnly
        case notADatabase, foreignDatabase, newerSchema, locked, diskFull, io, other
    }

    var kind: Kind
    var path: String
    var problem: String
    var fix: String
    /// The SQLite failure behind it, when there is one.
    var underlying: SQLiteError?

    var description: String {
        var line = "database \(StoreError.shown(path)): \(problem); \(fix)"
        if let underlying { line += " [\(underlying)]" }
        return line
    }

    /// A store from a newer release: this build can't read it safely, and there is no way down but a backup.
    static func newerSchema(path: String, version: Int, latest: Int) -> StoreError {
        StoreError(kind: .newerSchema, path: path,
                   problem: "this store was written by a newer prefect-push (schema \(version) > \(latest), the newest "
                       + "this version knows)",
                   fix: "run that newer version, or restore the backup taken before the upgrade: stop the relay, run "
                       + "prefect-push restore FILE (or copy the backup over DB_PATH and remove DB_PATH-wal and "
                       + "DB_PATH-shm), start this version (backups are made with prefect-push backup FILE)")
    }

    // MARK: - Diagnosis

    /// Turns an SQLite failure while opening `path` into an operator-facing error. SQLite's own codes are
    /// coarse (CANTOPEN covers a missing directory, a permission problem and a path that is a directory),
    /// so the file system is asked what is actually wrong.
    static func diagnosing(_ error: SQLiteError, path: String) -> StoreError {
        func make(_ kind: Kind, _ problem: String, _ fix: String) -> StoreError {
            StoreError(kind: kind, path: path, problem: problem, fix: fix, underlying: error)
        }
        let directory = directoryName(of: path)
        let shownDirectory = shown(directory)
        var info = stat()
        let exists = stat(path, &info) == 0
        let user = "uid \(getuid())"

        if exists && (info.st_mode & S_IFMT) == S_IFDIR {
            return make(.isDirectory, "is a directory, not a file",
                        "set DB_PATH to a file inside it, e.g. \(shown(path))/prefect-push.db")
        }
        switch error.code {
        case SQLITE_NOTADB, SQLITE_CORRUPT:
            return make(.notADatabase, "is not an SQLite database, or is damaged",
                        "check DB_PATH names the right file; if it does, move the file aside and restart "
                            + "(a new registry starts empty and phones register again when the app opens)")
        case SQLITE_BUSY, SQLITE_LOCKED:
            return make(.locked, "is locked by another process",
                        "stop the other prefect-push (or sqlite3 shell) using it, or give this one its own DB_PATH")
        case SQLITE_FULL:
            return make(.diskFull, "the disk holding it is full", "free space on that volume")
        default:
            break
        }
        var dirInfo = stat()
        if stat(directory, &dirInfo) != 0 || (dirInfo.st_mode & S_IFMT) != S_IFDIR {
            return make(.missingDirectory, "directory \(shownDirectory) does not exist",
                        "create it (or mount the volume there), or set DB_PATH to a file in an existing directory")
        }
        if access(directory, W_OK | X_OK) != 0 || (error.code == SQLITE_CANTOPEN && !exists) {
            return make(.directoryNotWritable, "directory \(shownDirectory) is not writable",
                        "SQLite creates the file and its -wal and -shm files beside it: make the directory "
                            + "writable by \(user), or set DB_PATH to a writable place")
        }
        if error.code == SQLITE_READONLY || (exists && access(path, R_OK | W_OK) != 0) {
            return make(.readOnly, "is read-only", "make the file and its -wal/-shm files writable by \(user)")
        }
        if error.code == SQLITE_IOERR {
            return make(.io, "disk I/O error", "check the volume and the file system (dmesg)")
        }
        return make(.other, "cannot be opened", "check DB_PATH and the permissions on the file and its directory")
    }

    /// A path as it appears in a message: whole when short, else its start and end (where the file name is).
    static func shown(_ path: String) -> String {
        path.count <= 240 ? path : String(path.prefix(120)) + "…" + String(path.suffix(119))
    }

    /// The directory part of `path` ("." for a bare file name), without touching the file system.
    static func directoryName(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let dir = String(path[..<slash])
        return dir.isEmpty ? "/" : dir
    }
}
