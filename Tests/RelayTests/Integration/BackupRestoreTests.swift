import Glibc
import Testing
@testable import FakeAPNs
@testable import Relay
@testable import RelayCore

extension SharedPrefect {
    /// `prefect-push backup` (the real binary) beside a running relay in the middle of a 1,000-device fan-out, then
    /// the documented restore: stop, copy the backup over DB_PATH, remove -wal and -shm, start.
    @Suite(.serialized) struct BackupRestoreTests {
        static let devices = 1_000

        static func token(_ i: Int) -> String {
            let hex = String(i, radix: 16)
            return "f1" + String(repeating: "0", count: 62 - hex.count) + hex  // one token per phone
        }

        @Test func aBackupTakenMidFanOutRestoresAndResumesWhatWasPending() async throws {
            let e2e = try await EndToEnd()
            let db = e2e.directory + "/relay.db"
            do {
                let store = try Store(path: db)
                for i in 0..<Self.devices {
                    try store.upsertDevice(DeviceRegistration(id: "phone-\(i)", token: Self.token(i), startToken: nil,
                                                              environment: .development, serverID: "backup"), now: 1)
                }
            }
            // APNs takes every push and answers none: the whole fan-out stays in the outbox while the backup runs.
            e2e.development.answerEveryone(.silent)
            try e2e.startRelay()
            let run = try e2e.runFlow("plain")
            let phones = Set((0..<Self.devices).map(Self.token))
            func alerts(accepted: Bool) -> [String] {
                e2e.development.requests.compactMap { request in
                    guard phones.contains(request.token), !accepted || request.answer == .accept,
                          (try? JSONParser.parse(request.body))?["body"]?["runId"] == .string(run) else { return nil }
                    return request.token
                }
            }
            func tokensReached(accepted: Bool) -> Set<String> { Set(alerts(accepted: accepted)) }
            // The fan-out (its message and audience, one row) commits before its first push leaves, so one push seen
            // means every phone's push is pending in the store.
            try waitUntil("the fan-out is under way", timeout: 90) { !tokensReached(accepted: false).isEmpty }

            let backupPath = e2e.directory + "/backup.db"
            let backup = try ChildProcess(RelayProcess.binary, ["backup", backupPath], environment: ["DB_PATH": db],
                                          logPath: e2e.directory + "/backup.log")
            let code = backup.waitForExit(timeout: 30)
            #expect(code == 0, "\(backup.log)")
            #expect(backup.log.hasPrefix("ok      backup: \(db) copied to \(backupPath)"), "\(backup.log)")
            #expect(e2e.relay?.process.waitForExit(timeout: 0) == nil)  // the relay ran on through it

            // Restore as documented.
            e2e.stopRelay()
            for file in [db, db + "-wal", db + "-shm"] { unlink(file) }
            try copyFile(backupPath, to: db)
            let inspection = try StoreCopy.inspect(path: db)
            #expect(inspection.problems.isEmpty)
            #expect(inspection.devices == Self.devices)
            #expect((inspection.pending ?? 0) >= Self.devices, "the fan-out's pushes are in the backup")

            e2e.development.answerEveryone(nil)  // APNs is back: unscripted tokens are accepted
            let check = try ChildProcess(RelayProcess.binary, ["check"], environment: e2e.environment,
                                         logPath: e2e.directory + "/check.log")
            let checked = check.waitForExit(timeout: 60)
            #expect(checked.map { $0 < 128 } == true, "check ended with \(describeExit(checked)): \(check.log)")
            let integrity = check.log.split(separator: "\n").first { $0.contains("database integrity:") } ?? ""
            #expect(integrity.hasPrefix("ok "), "\(check.log)")
            #expect(integrity.contains("\(Self.devices) devices"), "\(check.log)")

            try e2e.startRelay()
            try waitUntil("every phone's alert is delivered from the restored outbox", timeout: 60) {
                tokensReached(accepted: true).count == Self.devices
            }
            try waitUntil("the outbox empties", timeout: 30) {
                let metrics = try? e2e.relay!.http.request("GET", "/metrics",
                                                           headers: ["Authorization": PrefectServer.authorization])
                return metrics?.body.contains("prefect_push_outbox_pending 0\n") == true
            }
            // Announced once: the restored pause record says so, so nothing was fanned out a second time.
            #expect(alerts(accepted: true).count == Self.devices)
            e2e.stopFlows()
        }

        private func copyFile(_ from: String, to: String) throws {
            guard let input = fopen(from, "rb") else { throw TestFailure("cannot open \(from)") }
            defer { fclose(input) }
            guard let output = fopen(to, "wb") else { throw TestFailure("cannot write \(to)") }
            defer { fclose(output) }
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = fread(&buffer, 1, buffer.count, input)
                if n <= 0 { break }
                guard fwrite(buffer, 1, n, output) == n else { throw TestFailure("short write to \(to)") }
            }
        }
    }
}
