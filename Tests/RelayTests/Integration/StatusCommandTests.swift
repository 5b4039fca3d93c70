import Glibc
import Testing
@testable import Relay
@testable import RelayCore

/// `prefect-push status` (the real binary) on a store written here: a waiting pause with one device's push pending
/// and another's answered, text and `--json`; then a missing store, a file that is no database, and usage errors.
@Suite struct StatusCommandTests {
    static let now: Int64 = 2_000_000_000

    func run(_ arguments: String, db: String, in directory: String) throws -> (code: Int32?, out: String) {
        // A log of its own per run: the child's output is appended to it.
        let log = directory + "/out-\(SystemClock.monotonic()).log"
        let process = try ChildProcess("/bin/sh", ["-c", "\"$BIN\" " + arguments],
                                       environment: ["DB_PATH": db, "BIN": RelayProcess.binary], logPath: log)
        let code = process.waitForExit(timeout: 30)
        return (code, (try? TestFiles.read(log)) ?? "")
    }

    /// A store with devices `pending-phone` (its alert not yet answered, tried twice) and `done-phone` (answered),
    /// one waiting pause of run `run-7` announced to both, and one ended pause.
    static func writeStore(_ path: String) throws {
        let store = try Store(path: path)
        let pendingPhone = try store.upsertDevice(registration("pending-phone", token: "a1b2c3d4e5f60718293a"), now: now - 60)
        _ = try store.upsertDevice(registration("done-phone", token: "ffeeddccbbaa99887766"), now: now - 60)
        try store.insertPause(PauseRecord(stateID: "state-7", runID: "run-7", stateName: "Paused", pausedAt: now - 30,
                                          timeoutAt: now + 570, announcedAt: now - 29))
        _ = try store.setProps(stateID: "state-7", props: #"{"flowName":"nightly-deploy","runName":"brave-otter"}"#)
        try store.insertPause(PauseRecord(stateID: "state-old", runID: "run-old", stateName: "Paused", pausedAt: now - 900,
                                          announcedAt: now - 900, endedAt: now - 800, endedState: "Running"))
        let message = OutboxMessage(stateID: "state-7", runID: "run-7", purpose: .alert, kind: .alert, topic: "t",
                                    priority: 10, collapseID: "state-7", expiresAt: now + 3600, payload: "{}")
        let items = try store.enqueue([OutboxBatch(message: message, recipients: [(pendingPhone, pendingPhone.token)])],
                                      dueMs: (now - 29) * 1000)
        try store.settle([(id: items[0].id, verdict: .retry(at: Double(now + 5)))])
        try store.settle([(id: items[0].id, verdict: .retry(at: Double(now + 10)))])
    }

    @Test func waitingPauseAndItsDevices() throws {
        let directory = TestFiles.temporaryDirectory()
        defer { TestFiles.removeTree(directory) }
        let db = directory + "/relay.db"
        try Self.writeStore(db)

        let text = try run("status", db: db, in: directory)
        #expect(text.code == 0, "\(text.out)")
        #expect(text.out.contains("waiting pauses: 1\n"), "\(text.out)")
        #expect(text.out.contains("run run-7 (nightly-deploy / brave-otter), Paused"), "\(text.out)")
        #expect(text.out.contains("    pending-phone: pending: alert after 2 attempts"), "\(text.out)")
        #expect(text.out.contains("    done-phone: answered"), "\(text.out)")
        #expect(text.out.contains("pending-phone: token a1b2c3…93a, production"), "\(text.out)")
        #expect(!text.out.contains("a1b2c3d4e5f60718293a"))  // tokens are shortened
        #expect(text.out.contains("outbox: 1 pending, oldest stored"), "\(text.out)")
        #expect(!text.out.contains("run-old"))

        let json = try run("status --json", db: db, in: directory)
        #expect(json.code == 0, "\(json.out)")
        let parsed = try JSONParser.parse(json.out)
        let pauses = try #require(parsed["pauses"]?.array)
        #expect(pauses.count == 1)
        let pause = try #require(pauses.first)
        #expect(pause["run_id"] == "run-7")
        #expect(pause["timeout_at"] == .int(Self.now + 570))
        #expect(pause["flow_name"] == "nightly-deploy")
        let outcomes = try #require(pause["devices"]?.array)
        let pendingEntry = try #require(outcomes.first { $0["device"] == "pending-phone" })
        #expect(pendingEntry["outcome"] == "pending")
        let pendingPush = try #require(pendingEntry["pending"]?.array?.first)
        #expect(pendingPush["attempts"] == 2)
        #expect(pendingPush["next_try_ms"] == .int((Self.now + 10) * 1000))
        let doneEntry = try #require(outcomes.first { $0["device"] == "done-phone" })
        #expect(doneEntry["outcome"] == "answered")
        #expect(parsed["outbox"]?["pending"] == 1)
        #expect(parsed["devices"]?.array?.count == 2)
    }

    @Test func missingOrDamagedStoreAndUsage() throws {
        let directory = TestFiles.temporaryDirectory()
        defer { TestFiles.removeTree(directory) }
        let missing = try run("status", db: directory + "/none.db", in: directory)
        #expect(missing.code == 1)
        #expect(missing.out.hasPrefix("failed  status: database \(directory)/none.db: does not exist; fix: set DB_PATH"),
                "\(missing.out)")
        #expect(access(directory + "/none.db", F_OK) != 0)  // never created

        let garbage = directory + "/garbage.db"
        let fd = open(garbage, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let junk = [UInt8](repeating: 0x5a, count: 8192)
        _ = junk.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        let damaged = try run("status", db: garbage, in: directory)
        #expect(damaged.code == 1)
        #expect(damaged.out.contains("is not an SQLite database, or is damaged; fix: check DB_PATH names the right file"),
                "\(damaged.out)")
        let damagedJSON = try run("status --json", db: garbage, in: directory)
        #expect(damagedJSON.code == 1)
        let error = try JSONParser.parse(damagedJSON.out)
        #expect(error["error"]?.string?.contains("is not an SQLite database") == true)
        #expect(error["fix"]?.string?.isEmpty == false)

        #expect(try run("status --yaml", db: garbage, in: directory).code == 2)
        let help = try run("--help", db: garbage, in: directory)
        #expect(help.code == 0 && help.out.contains("status [--json]") && help.out.contains("\n  status "), "\(help.out)")
    }
}
