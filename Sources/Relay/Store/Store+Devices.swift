import CSQLite
import RelayCore

// MARK: - Devices

extension Store {
    /// Live-activity tokens kept per device. A phone runs a handful of activities at once; the cap keeps a
    /// misbehaving client from growing the table without end. The least recently set tokens go first.
    static let maxActivitiesPerDevice = 64

    static let deviceColumns = deviceColumns(prefix: "")

    /// The columns `device(from:offset:)` reads, each qualified by `prefix` (a table alias in a join).
    static func deviceColumns(prefix: String) -> String {
        ["id", "token", "start_token", "environment", "server_id", "created_at", "updated_at"]
            .map { prefix + $0 }.joined(separator: ", ")
    }

    /// Registers or refreshes a phone (upsert by id). Registering is a full refresh: every field is replaced,
    /// so a registration without a start token clears the stored one. `created_at` is kept from the first time.
    @discardableResult
    func upsertDevice(_ r: DeviceRegistration, now: Int64) throws -> Device {
        let statement = try statement("""
            INSERT INTO devices (id, token, start_token, environment, server_id, created_at, updated_at)
            VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)
            ON CONFLICT (id) DO UPDATE SET token = excluded.token, start_token = excluded.start_token,
                environment = excluded.environment, server_id = excluded.server_id, updated_at = excluded.updated_at
            RETURNING \(Store.deviceColumns)
            """)
        let values: [SQLValue] = [
            .text(r.id), .text(r.token), .text(r.startToken), .text(r.environment.rawValue), .text(r.serverID),
            .integer(now),
        ]
        let rows = try database.transaction { try statement.query(values, row: Store.device(from:)) }
        guard let device = rows.first else {
            throw SQLiteError(code: SQLITE_INTERNAL, message: "upsert returned no row", sql: statement.sql)
        }
        return device
    }

    func device(id: String) throws -> Device? {
        try read("SELECT \(Store.deviceColumns) FROM devices WHERE id = ?1", [.text(id)], row: Store.device(from:)).first
    }

    /// Every registered phone, in id order.
    func allDevices() throws -> [Device] {
        try read("SELECT \(Store.deviceColumns) FROM devices ORDER BY id", row: Store.device(from:))
    }

    func deviceCount() throws -> Int {
        try count("SELECT count(*) FROM devices")
    }

    /// Unregisters a phone, (by cascade) its activity tokens and pending pushes, and the answers kept for it. False
    /// if the id is unknown.
    @discardableResult
    func deleteDevice(id: String) throws -> Bool {
        let device = try statement("DELETE FROM devices WHERE id = ?1")
        let answers = try statement("DELETE FROM push_answers WHERE device_id = ?1")
        return try database.transaction {
            guard try device.execute([.text(id)]) > 0 else { return false }
            try answers.execute([.text(id)])
            return true
        }
    }

    /// Forgets a phone's push-to-start token (APNs said it is dead) but keeps the phone. False if unknown.
    @discardableResult
    func dropStartToken(deviceID: String) throws -> Bool {
        try write("UPDATE devices SET start_token = NULL WHERE id = ?1 AND start_token IS NOT NULL",
                  [.text(deviceID)]) > 0
    }

    /// Moves a phone to the other APNs host after that host accepted its token. False if unknown or unchanged.
    @discardableResult
    func updateEnvironment(deviceID: String, to environment: APNsEnvironment) throws -> Bool {
        try write("UPDATE devices SET environment = ?2 WHERE id = ?1 AND environment <> ?2",
                  [.text(deviceID), .text(environment.rawValue)]) > 0
    }

    // MARK: - Activities

    /// Stores (or replaces) the live-activity token of `runID` on a phone. False if the phone is unknown.
    @discardableResult
    func setActivityToken(deviceID: String, runID: String, token: String) throws -> Bool {
        // INSERT ... SELECT from devices: an unknown device inserts nothing rather than failing the foreign key.
        // REPLACE gives the row a fresh rowid, so rowid order is "least recently set" for the cap below.
        let upsert = try statement("""
            INSERT OR REPLACE INTO activities (device_id, run_id, token) SELECT id, ?2, ?3 FROM devices WHERE id = ?1
            """)
        let trim = try statement("""
            DELETE FROM activities WHERE device_id = ?1 AND rowid NOT IN
                (SELECT rowid FROM activities WHERE device_id = ?1 ORDER BY rowid DESC LIMIT ?2)
            """)
        return try database.transaction {
            guard try upsert.execute([.text(deviceID), .text(runID), .text(token)]) > 0 else { return false }
            try trim.execute([.text(deviceID), .integer(Int64(Store.maxActivitiesPerDevice))])
            return true
        }
    }

    /// The live-activity tokens registered for a run, one per phone, in device order.
    func activityTokens(runID: String) throws -> [(deviceID: String, token: String)] {
        try read("SELECT device_id, token FROM activities WHERE run_id = ?1 ORDER BY device_id", [.text(runID)]) {
            (deviceID: $0.string(0), token: $0.string(1))
        }
    }

    /// Forgets every activity token of a run (its activities were ended). Returns how many were removed.
    @discardableResult
    func deleteActivities(runID: String) throws -> Int {
        try write("DELETE FROM activities WHERE run_id = ?1", [.text(runID)])
    }

    /// Forgets one phone's activity token for a run (APNs said it is dead). False if there was none.
    @discardableResult
    func deleteActivity(deviceID: String, runID: String) throws -> Bool {
        try write("DELETE FROM activities WHERE device_id = ?1 AND run_id = ?2", [.text(deviceID), .text(runID)]) > 0
    }

    // MARK: - Rows

    private static func device(from row: Statement) throws -> Device { try device(from: row, offset: 0) }

    /// A device from `deviceColumns`, starting at column `offset`.
    static func device(from row: Statement, offset: Int32) throws -> Device {
        let raw = row.string(offset + 3)
        guard let environment = APNsEnvironment(rawValue: raw) else {
            // The CHECK constraint makes this unreachable unless the file was edited by hand.
            throw SQLiteError(code: SQLITE_CORRUPT, message: "device has unknown environment '\(raw.prefix(40))'")
        }
        return Device(id: row.string(offset), token: row.string(offset + 1), startToken: row.optionalString(offset + 2),
                      environment: environment, serverID: row.string(offset + 4),
                      createdAt: row.int64(offset + 5), updatedAt: row.int64(offset + 6))
    }
}
