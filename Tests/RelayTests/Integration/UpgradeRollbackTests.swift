import Glibc
import Testing
@testable import Relay
@testable import RelayCore

/// An upgrade that goes wrong, rolled back the way docs/operations.md ("Upgrades") says, with the real binary:
/// back up the store, let the new release migrate it, see the old release refuse it, restore the backup, and run the
/// old release on it with nothing lost.
///
/// There is no older binary to run here, so the roles are shifted by one schema: this binary plays the release that
/// runs today, and the upgrade is simulated by what a next release's migration does (a new column, data written in
/// it, `user_version` one past this binary's). This binary then refuses the file exactly as an old release refuses
/// a newer store (`Store.migrate`'s `newerSchema`).
@Suite struct UpgradeRollbackTests {
    func run(_ arguments: [String], _ environment: [String: String], in directory: String) throws -> (code: Int32?, out: String) {
        let log = directory + "/out-\(SystemClock.monotonic()).log"
        let process = try ChildProcess(RelayProcess.binary, arguments, environment: environment, logPath: log)
        let code = process.waitForExit(timeout: 30)
        if code == nil { _ = process.stop(signal: SIGKILL) }
        return (code, (try? TestFiles.read(log)) ?? "")
    }

    @Test func aBackupTakenBeforeTheUpgradeRollsItBack() throws {
        let directory = TestFiles.temporaryDirectory()
        defer { TestFiles.removeTree(directory) }
        let db = directory + "/relay.db"
        let latest = Store.migrations.count
        let env = ["DB_PATH": db, "PREFECT_API_URL": "http://127.0.0.1:\(TestSocket.freePort())/api", "PORT": "0",
                   "METRICS_PORT": "0"]
        do {
            let store = try Store(path: db)
            try store.upsertDevice(DeviceRegistration(id: "phone-1", token: String(repeating: "ab", count: 32),
                                                      startToken: nil, environment: .production, serverID: "home"),
                                   now: 1_000)
            let now = Int64(SystemClock.unixNow())
            try store.insertPause(PauseRecord(stateID: "state-1", runID: "run-1", stateName: "Paused", pausedAt: now - 60,
                                              announcedAt: now - 60))
            try store.settle([], answers: [PushAnswer(stateID: "state-1", deviceID: "phone-1", purpose: "alert",
                                                      status: 200, reason: "delivered", answeredMs: (now - 59) * 1000)])
            #expect(try store.markEnded(stateID: "state-1", state: "Completed", at: now - 30))
        }
        let schema = try run(["schema"], [:], in: directory)
        #expect(schema.code == 0 && schema.out == "\(latest)\n", "\(schema.out)")

        // 1. The backup `make deploy` takes before a rollout that changes the schema.
        let backup = try run(["backup", directory + "/before-upgrade.db"], env, in: directory)
        #expect(backup.code == 0, "\(backup.out)")
        #expect(backup.out.contains(", schema \(latest), integrity ok"), "\(backup.out)")

        // 2. The next release migrates the store forward and writes to it.
        do {
            let next = try Database(path: db)
            try next.execute("""
                ALTER TABLE devices ADD COLUMN label TEXT;
                UPDATE devices SET label = 'kitchen';
                PRAGMA user_version = \(latest + 1);
                """)
        }

        // 3. Rolled back, the older release refuses the newer store: exit 2, naming the fix.
        let refused = try run([], env, in: directory)
        #expect(refused.code == 2, "\(refused.out)")
        #expect(refused.out.contains("event=startup.failed"), "\(refused.out)")
        #expect(refused.out.contains("written by a newer prefect-push (schema \(latest + 1) > \(latest)"), "\(refused.out)")
        #expect(refused.out.contains("restore the backup taken before the upgrade"), "\(refused.out)")

        // 4. The restore, as the documented steps run it: the relay is stopped (it refused to start).
        let restored = try run(["restore", directory + "/before-upgrade.db"], env, in: directory)
        #expect(restored.code == 0, "\(restored.out)")
        #expect(restored.out.hasPrefix("ok      restore: \(directory)/before-upgrade.db restored to \(db): "), "\(restored.out)")
        #expect(restored.out.contains("schema \(latest), integrity ok"), "\(restored.out)")

        // 5. The older release runs on it, and what it held is all there.
        let relay = try ChildProcess(RelayProcess.binary, [], environment: env, logPath: directory + "/relay.log")
        try waitUntil("the relay has opened the restored store", timeout: 20) {
            relay.exitCode() != nil || relay.log.contains("event=relay.started")
        }
        #expect(relay.exitCode() == nil, "\(relay.log)")
        // A restore now, with the relay running on the store, is refused and changes nothing.
        let underRelay = try run(["restore", directory + "/before-upgrade.db"], env, in: directory)
        #expect(underRelay.code == 1, "\(underRelay.out)")
        #expect(underRelay.out.contains("a relay seems to be running on it"), "\(underRelay.out)")
        #expect(relay.stop() == 0, "\(relay.log)")
        #expect(!relay.log.contains("startup.failed"), "\(relay.log)")
        let status = try run(["status", "--json", "--device", "phone-1"], env, in: directory)
        #expect(status.code == 0, "\(status.out)")
        let parsed = try JSONParser.parse(status.out)
        #expect(parsed["schema"] == .int(Int64(latest)))
        #expect(parsed["devices"]?.array?.map { $0["id"] } == ["phone-1"])
        let pause = parsed["pauses"]?.array?.first
        #expect(pause?["run_id"] == "run-1" && pause?["phase"] == "ended", "\(status.out)")
        #expect(pause?["devices"]?.array?.first?["outcome"] == "delivered", "\(status.out)")
        let columns = try Database(path: db, readOnly: true).prepare("SELECT name FROM pragma_table_info('devices')")
            .query { $0.string(0) }
        #expect(!columns.contains("label"))

        // A backup newer than this binary is refused by restore too, naming the fix.
        let newer = try run(["restore", db], ["DB_PATH": directory + "/other.db"], in: directory)
        #expect(newer.code == 0)  // same schema: accepted
        do { try Database(path: directory + "/other.db").execute("PRAGMA user_version = \(latest + 1)") }
        let refusedBackup = try run(["restore", directory + "/other.db"], env, in: directory)
        #expect(refusedBackup.code == 1, "\(refusedBackup.out)")
        #expect(refusedBackup.out.contains("restore it with that version"), "\(refusedBackup.out)")
        #expect(try run(["restore"], env, in: directory).code == 2)
    }
}
