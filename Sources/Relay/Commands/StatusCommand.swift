import CSQLite
import Glibc
import RelayCore

/// `prefect-push status [--json] [--device ID] [--run ID]`: what the store at `DB_PATH` says now (`StoreStatus`): the
/// waiting pauses and, per device, whether each of their pushes is pending (attempts, next try, last answer),
/// delivered (when) or dropped (APNs' reason); the devices; the outbox. `--device` and `--run` narrow it to one
/// device or run, and add the ended pauses whose answers are still kept (a day, `AnswerRetention`).
///
/// Safe while the relay runs: the store is opened read-only (`StoreCopy.openExisting`, never created or migrated),
/// and everything is read in one deferred read transaction, so the relay's writes go on (WAL) and the report is one
/// consistent snapshot. Exits as `check` does: 0 when the store was read, 1 when it is missing, damaged, locked or
/// from another schema (one `failed` line with the fix, on stdout, or a JSON `error` object with `--json`), 2 for a
/// usage error.
enum StatusCommand {
    static let usage = "status       the waiting pauses, each device's pushes, the devices and the outbox, read-only "
        + "from DB_PATH while the relay runs (--json for scripts; --device ID, --run ID for one device or run, ended "
        + "pauses of the last day included), then exit"

    static func run(arguments: [String], environment: [String: String]) -> Int32 {
        signal(SIGPIPE, SIG_IGN)
        let query: StatusQuery
        do {
            query = try StatusQuery.parse(arguments)
        } catch {
            Stderr.write(error.description + "\n")
            return 2
        }
        let asJSON = query.json
        let path = Config.dbPath(environment: environment)
        let now = SystemClock.unixNow()
        do {
            let status = try read(path: path, query: query)
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
    static func read(path: String, query: StatusQuery = StatusQuery()) throws -> StoreStatus {
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
        // Unfiltered: the waiting pauses. Filtered: the run's pauses, or the waiting pauses and the ended ones the
        // device has an answer or a push for.
        let filters: [SQLValue] = [.integer(query.isFiltered ? 1 : 0), .text(query.run), .text(query.device)]
        let pauses = try db.prepare("""
            SELECT \(Store.pauseColumns), props FROM pauses
            WHERE (?1 = 1 OR ended_at IS NULL) AND (?2 IS NULL OR run_id = ?2)
              AND (?3 IS NULL OR ?2 IS NOT NULL OR ended_at IS NULL
                   OR EXISTS (SELECT 1 FROM push_answers a WHERE a.state_id = pauses.state_id AND a.device_id = ?3)
                   OR EXISTS (SELECT 1 FROM pending_pushes o JOIN outbox_messages m ON m.id = o.message_id
                              WHERE m.state_id = pauses.state_id AND o.device_id = ?3))
            ORDER BY paused_at, state_id
            """).query(filters) { row -> StoreStatus.Pause in
            let props = row.optionalString(9).flatMap { try? JSONParser.parse($0) }
            return StoreStatus.Pause(record: Store.pause(from: row), flowName: props?["flowName"]?.string ?? "",
                                     runName: props?["runName"]?.string ?? "")
        }
        let devices = try db.prepare("SELECT \(Store.deviceColumns) FROM devices WHERE ?1 IS NULL OR id = ?1 ORDER BY id")
            .query([.text(query.device)]) { try Store.device(from: $0, offset: 0) }
        let shown = Set(pauses.map(\.record.stateID))
        let pending = try db.prepare("""
            SELECT m.state_id, o.device_id, m.purpose, o.attempts, o.due_ms
            FROM pending_pushes o JOIN outbox_messages m ON m.id = o.message_id ORDER BY o.due_ms, o.message_id, o.device_id
            """).query { row in
            StoreStatus.Pending(stateID: row.string(0), deviceID: row.string(1), purpose: row.string(2),
                                attempts: Int(row.int64(3)), dueMs: row.int64(4))
        }
        let answers = try db.prepare("""
            SELECT state_id, device_id, purpose, status, reason, answered_ms FROM push_answers
            WHERE ?1 IS NULL OR device_id = ?1 ORDER BY answered_ms
            """).query([.text(query.device)], row: answer(from:)).filter { shown.contains($0.stateID) }
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
            SELECT min(m.created_ms) FROM pending_pushes o JOIN outbox_messages m ON m.id = o.message_id
            """).query { $0.optionalInt64(0) }.first ?? nil
        return StoreStatus(schemaVersion: version, query: query, pauses: pauses, devices: devices, pending: pending,
                           answers: answers, history: history, oldestPendingMs: oldest)
    }

    /// A `push_answers` row, its columns in table order.
    private static func answer(from row: Statement) -> PushAnswer {
        PushAnswer(stateID: row.string(0), deviceID: row.string(1), purpose: row.string(2),
                   status: Int(row.int64(3)), reason: row.string(4), answeredMs: row.int64(5))
    }
}
