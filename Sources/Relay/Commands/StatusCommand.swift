import CSQLite
import Glibc
import RelayCore

/// `prefect-push status [--json]`: what the store at `DB_PATH` says now (`StoreStatus`): the waiting pauses and, per
/// device, whether each of their pushes is pending (attempts, next try, last answer), delivered (when) or dropped
/// (APNs' reason); the devices; the outbox.
///
/// Safe while the relay runs: the store is opened read-only (`StoreCopy.openExisting`, never created or migrated),
/// and everything is read in one deferred read transaction, so the relay's writes go on (WAL) and the report is one
/// consistent snapshot. Exits as `check` does: 0 when the store was read, 1 when it is missing, damaged, locked or
/// from another schema (one `failed` line with the fix, on stdout, or a JSON `error` object with `--json`), 2 for a
/// usage error.
enum StatusCommand {
    static let usage = "status       the waiting pauses, each device's pushes, the devices and the outbox, read-only "
        + "from DB_PATH while the relay runs (--json for scripts), then exit"

    static func run(arguments: [String], environment: [String: String]) -> Int32 {
        signal(SIGPIPE, SIG_IGN)
        guard arguments.isEmpty || arguments == ["--json"] else {
            Stderr.write("usage: prefect-push status [--json] (DB_PATH names the store to read)\n")
            return 2
        }
        let asJSON = arguments == ["--json"]
        let path = Config.dbPath(environment: environment)
        let now = SystemClock.unixNow()
        do {
            let status = try read(path: path)
            print(asJSON ? status.json(path: path, now: now).encoded() : status.text(path: path, now: now),
                  terminator: asJSON ? "\n" : "")
            return 0
        } catch {
            let (problem, fix) = explain(error, path: path)
            if asJSON {
                let answer: JSONValue = ["store": .string(path), "error": .string(problem), "fix": .string(fix)]
                print(answer.encoded())
            } else {
                print(CheckCommand.Line(.failed, "status", problem, fix: fix).text)
            }
            return 1
        }
    }

    /// What went wrong, and the fix, for a person.
    private static func explain(_ error: Error, path: String) -> (problem: String, fix: String) {
        switch error {
        case let store as StoreError:
            return ("database \(StoreError.shown(store.path)): \(store.problem)", store.fix)
        case let sqlite as SQLiteError:
            let store = StoreError.diagnosing(sqlite, path: path)
            return ("database \(StoreError.shown(path)): \(store.problem) [\(sqlite)]", store.fix)
        default:
            return ("\(error)", "check DB_PATH names the relay's store")
        }
    }

    // MARK: - Reading

    /// The store's status, read in one read transaction on a read-only connection.
    static func read(path: String) throws -> StoreStatus {
        let db = try StoreCopy.openExisting(path)
        try db.execute("BEGIN DEFERRED")
        defer { _ = sqlite3_exec(db.handle, "ROLLBACK", nil, nil, nil) }  // a read transaction: nothing to keep
        let version = Int(try db.scalarInt("PRAGMA user_version") ?? 0)
        let latest = Store.migrations.count
        if version > latest {
            throw StoreError.newerSchema(path: path, version: version, latest: latest)
        }
        guard version == latest else {
            throw StoreError(kind: .other, path: path,
                             problem: "schema \(version) is older than this version's \(latest)",
                             fix: "start the relay of this version once (it migrates the store), or run the "
                                 + "prefect-push that wrote it")
        }
        let pauses = try db.prepare("""
            SELECT \(Store.pauseColumns), props FROM pauses WHERE ended_at IS NULL ORDER BY paused_at, state_id
            """).query { row -> StoreStatus.Pause in
            let props = row.optionalString(9).flatMap { try? JSONParser.parse($0) }
            return StoreStatus.Pause(record: Store.pause(from: row), flowName: props?["flowName"]?.string ?? "",
                                     runName: props?["runName"]?.string ?? "")
        }
        let devices = try db.prepare("SELECT \(Store.deviceColumns) FROM devices ORDER BY id").query {
            try Store.device(from: $0, offset: 0)
        }
        let pending = try db.prepare("""
            SELECT m.state_id, o.device_id, m.purpose, o.attempts, o.due_ms
            FROM outbox o JOIN outbox_messages m ON m.id = o.message_id ORDER BY o.due_ms, o.id
            """).query { row in
            StoreStatus.Pending(stateID: row.string(0), deviceID: row.string(1), purpose: row.string(2),
                                attempts: Int(row.int64(3)), dueMs: row.int64(4))
        }
        let answers = try db.prepare("""
            SELECT state_id, device_id, purpose, status, reason, answered_ms FROM push_answers
            WHERE state_id IN (SELECT state_id FROM pauses WHERE ended_at IS NULL) ORDER BY answered_ms
            """).query(row: answer(from:))
        // SQLite takes a bare column's value from the row max() chose.
        var history: [String: StoreStatus.DeviceHistory] = [:]
        for (id, delivered) in try db.prepare("""
            SELECT device_id, max(answered_ms) FROM push_answers WHERE status = 200 GROUP BY device_id
            """).query(row: { ($0.string(0), $0.int64(1)) }) {
            history[id, default: .init()].lastDeliveryMs = delivered
        }
        for refusal in try db.prepare("""
            SELECT state_id, device_id, purpose, status, reason, max(answered_ms) FROM push_answers
            WHERE status != 200 GROUP BY device_id
            """).query(row: answer(from:)) {
            history[refusal.deviceID, default: .init()].lastRefusal = refusal
        }
        let oldest = try db.prepare("""
            SELECT min(m.created_ms) FROM outbox o JOIN outbox_messages m ON m.id = o.message_id
            """).query { $0.optionalInt64(0) }.first ?? nil
        return StoreStatus(schemaVersion: version, pauses: pauses, devices: devices, pending: pending,
                           answers: answers, history: history, oldestPendingMs: oldest)
    }

    /// A `push_answers` row, its columns in table order.
    private static func answer(from row: Statement) -> PushAnswer {
        PushAnswer(stateID: row.string(0), deviceID: row.string(1), purpose: row.string(2),
                   status: Int(row.int64(3)), reason: row.string(4), answeredMs: row.int64(5))
    }
}
