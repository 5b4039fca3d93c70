import Glibc
import Testing
@testable import Relay
@testable import RelayCore

/// `prefect-push status` (the real binary) on a store written here: a waiting pause with one device's push pending
/// another's delivered, another's dropped and one answered before answers were kept, text and `--json`; then a missing store, a file that is no database, and usage errors.
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

    /// A store with devices `pending-phone` (its alert tried twice, APNs answered 503 each time), `done-phone` (its
    /// alert delivered), `dropped-phone` (its alert refused: 400 BadTopic) and `quiet-phone` (nothing kept: answered
    /// before answers were kept); one waiting pause of run `run-7` announced to all, and one ended pause.
    static func writeStore(_ path: String) throws {
        let store = try Store(path: path)
        var phones: [Device] = []
        for (id, token) in [("pending-phone", "a1b2c3d4e5f60718293a"), ("done-phone", "ffeeddccbbaa99887766"),
                            ("dropped-phone", "0123456789abcdef0123"), ("quiet-phone", "99999999999999999999")] {
            phones.append(try store.upsertDevice(registration(id, token: token), now: now - 60))
        }
        try store.insertPause(PauseRecord(stateID: "state-7", runID: "run-7", stateName: "Paused", pausedAt: now - 30,
                                          timeoutAt: now + 570, announcedAt: now - 29))
        _ = try store.setProps(stateID: "state-7", props: #"{"flowName":"nightly-deploy","runName":"brave-otter"}"#)
        try store.insertPause(PauseRecord(stateID: "state-old", runID: "run-old", stateName: "Paused", pausedAt: now - 900,
                                          announcedAt: now - 900, endedAt: now - 800, endedState: "Running"))
        let message = OutboxMessage(stateID: "state-7", runID: "run-7", purpose: .alert, kind: .alert, topic: "t",
                                    priority: 10, collapseID: "state-7", expiresAt: now + 3600, payload: "{}")
        let items = try store.enqueue([OutboxBatch(message: message, recipients: phones.prefix(3).map { ($0, $0.token) })],
                                      dueMs: (now - 29) * 1000)
        func answer(_ device: String, _ status: Int, _ reason: String, at: Int64) -> PushAnswer {
            PushAnswer(stateID: "state-7", deviceID: device, purpose: "alert", status: status, reason: reason,
                       answeredMs: at * 1000)
        }
        try store.settle([items[0].settlement(.retry(at: Double(now + 5))),
                          items[1].settlement(.settled), items[2].settlement(.settled)],
                         answers: [answer("pending-phone", 503, "ServiceUnavailable", at: now - 28),
                                   answer("done-phone", 200, "delivered", at: now - 28),
                                   answer("dropped-phone", 400, "BadTopic", at: now - 28)])
        try store.settle([items[0].settlement(.retry(at: Double(now + 10)))],
                         answers: [answer("pending-phone", 503, "ServiceUnavailable", at: now - 20)])
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
        #expect(text.out.contains("    pending-phone: alert pending after 2 attempts (last answer 503 ServiceUnavailable "),
                "\(text.out)")
        #expect(text.out.contains("    done-phone: alert delivered "), "\(text.out)")
        #expect(text.out.contains("    dropped-phone: alert dropped ") && text.out.contains(": 400 BadTopic\n"),
                "\(text.out)")
        #expect(text.out.contains("    quiet-phone: answered (before this version kept APNs' answers"), "\(text.out)")
        #expect(text.out.contains("pending-phone: token a1b2c3…93a, production"), "\(text.out)")
        #expect(text.out.contains(", last refusal 400 BadTopic "), "\(text.out)")
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
        func entry(_ device: String) throws -> JSONValue { try #require(outcomes.first { $0["device"] == .string(device) }) }
        #expect(try entry("pending-phone")["outcome"] == "pending")
        let pendingPush = try #require(try entry("pending-phone")["pushes"]?.array?.first)
        #expect(pendingPush["attempts"] == 2)
        #expect(pendingPush["next_try_ms"] == .int((Self.now + 10) * 1000))
        #expect(pendingPush["status"] == 503 && pendingPush["answered_ms"] == .int((Self.now - 20) * 1000))
        #expect(try entry("done-phone")["outcome"] == "delivered")
        #expect(try entry("done-phone")["pushes"]?.array?.first?["answered_ms"] == .int((Self.now - 28) * 1000))
        #expect(try entry("dropped-phone")["outcome"] == "dropped")
        #expect(try entry("dropped-phone")["pushes"]?.array?.first?["reason"] == "BadTopic")
        #expect(try entry("quiet-phone")["outcome"] == "answered")
        #expect(parsed["outbox"]?["pending"] == 1)
        let devices = try #require(parsed["devices"]?.array)
        #expect(devices.count == 4)
        #expect(devices.first { $0["id"] == "done-phone" }?["last_delivery_ms"] == .int((Self.now - 28) * 1000))
        #expect(devices.first { $0["id"] == "dropped-phone" }?["last_refusal"]?["reason"] == "BadTopic")
        #expect(devices.first { $0["id"] == "quiet-phone" }?["last_delivery_ms"] == nil)
    }

    /// `--device` and `--run`: the ended pause of `run-done` (its alert and end delivered to `done-phone`) is shown
    /// beside the waiting one, labelled, in text and JSON, until its answers are pruned; bad filters exit 2.
    @Test func filtersShowEndedPausesAnswersUntilPruned() throws {
        let directory = TestFiles.temporaryDirectory()
        defer { TestFiles.removeTree(directory) }
        let db = directory + "/relay.db"
        try Self.writeStore(db)
        do {
            let store = try Store(path: db)
            try store.insertPause(PauseRecord(stateID: "state-done", runID: "run-done", stateName: "Paused",
                                              pausedAt: Self.now - 50, announcedAt: Self.now - 50))
            try store.settle([], answers: ["alert", "end"].map {
                PushAnswer(stateID: "state-done", deviceID: "done-phone", purpose: $0, status: 200,
                           reason: "delivered", answeredMs: (Self.now - 45) * 1000)
            })
            #expect(try store.markEnded(stateID: "state-done", state: "Completed", at: Self.now - 40))
        }

        let byDevice = try run("status --device done-phone", db: db, in: directory)
        #expect(byDevice.code == 0, "\(byDevice.out)")
        #expect(byDevice.out.contains("filter: device done-phone (ended pauses' answers are kept a day)\n"), "\(byDevice.out)")
        #expect(byDevice.out.contains("pauses: 2 (1 waiting, 1 ended)\n"), "\(byDevice.out)")
        #expect(byDevice.out.contains("\n  waiting: run run-7 (nightly-deploy / brave-otter), Paused since"), "\(byDevice.out)")
        #expect(byDevice.out.contains("\n  ended: run run-done, Paused at "), "\(byDevice.out)")
        #expect(byDevice.out.contains("(Completed after 10s), announced, state state-done\n    done-phone: alert delivered "),
                "\(byDevice.out)")
        #expect(byDevice.out.contains("; end delivered "), "\(byDevice.out)")
        #expect(byDevice.out.contains("devices: 1\n") && !byDevice.out.contains("pending-phone"), "\(byDevice.out)")

        let byRun = try run("status --run run-done --json", db: db, in: directory)
        #expect(byRun.code == 0, "\(byRun.out)")
        let parsed = try JSONParser.parse(byRun.out)
        #expect(parsed["filter"]?["run"] == "run-done" && parsed["filter"]?["device"] == nil)
        let pauses = try #require(parsed["pauses"]?.array)
        #expect(pauses.count == 1)
        #expect(pauses.first?["phase"] == "ended" && pauses.first?["ended_state"] == "Completed")
        #expect(pauses.first?["ended_at"] == .int(Self.now - 40))
        let outcomes = try #require(pauses.first?["devices"]?.array)
        #expect(outcomes.count == 4)
        let done = try #require(outcomes.first { $0["device"] == "done-phone" })
        #expect(done["outcome"] == "delivered")
        #expect(done["pushes"]?.array?.map { $0["purpose"] } == ["alert", "end"])
        #expect(outcomes.first { $0["device"] == "quiet-phone" }?["outcome"] == "none_kept")

        let both = try JSONParser.parse(try run("status --json --device done-phone --run run-7", db: db, in: directory).out)
        #expect(both["pauses"]?.array?.map { $0["phase"] } == ["waiting"])
        #expect(both["devices"]?.array?.map { $0["id"] } == ["done-phone"])

        // Over the row cap the ended pause's answers go; the pause itself is still listed by run, with none kept.
        do { #expect(try Store(path: db).pruneAnswers(retention: AnswerRetention(maxRows: 0)) == 2) }
        let pruned = try run("status --device done-phone", db: db, in: directory)
        #expect(pruned.out.contains("pauses: 1 (1 waiting, 0 ended)\n"), "\(pruned.out)")
        let prunedRun = try JSONParser.parse(try run("status --json --run run-done", db: db, in: directory).out)
        let afterPrune = prunedRun["pauses"]?.array?.first?["devices"]?.array
        #expect(afterPrune?.first { $0["device"] == "done-phone" }?["outcome"] == "none_kept")

        for bad in ["--device", "--run --json", "--device a --device b", "--json --json"] {
            let usage = try run("status " + bad, db: db, in: directory)
            #expect(usage.code == 2, "status \(bad): \(usage.out)")
            #expect(usage.out.contains("usage: prefect-push status [--json] [--device ID] [--run ID]"), "\(usage.out)")
        }
        #expect(try run("status --device", db: db, in: directory).out.contains("--device needs an id after it"))
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
