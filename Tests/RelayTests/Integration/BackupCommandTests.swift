import Glibc
import Testing
@testable import Relay
@testable import RelayCore

/// `prefect-push backup` (the real binary) without a relay: to a file, to stdout, and its usage errors.
@Suite struct BackupCommandTests {
    func run(_ command: String, db: String, in directory: String) throws -> (code: Int32?, log: String) {
        let process = try ChildProcess("/bin/sh", ["-c", command], environment: ["DB_PATH": db, "BIN": RelayProcess.binary],
                                       logPath: directory + "/out.log")
        let code = process.waitForExit(timeout: 30)
        return (code, (try? TestFiles.read(directory + "/out.log")) ?? "")
    }

    @Test func toAFileAndToStdout() throws {
        let directory = TestFiles.temporaryDirectory()
        defer { TestFiles.removeTree(directory) }
        let db = directory + "/relay.db"
        do {
            let store = try Store(path: db)
            for i in 0..<50 { try store.upsertDevice(registration("phone-\(i)", token: "ab\(i)cd"), now: 1) }
        }
        let file = try run("cd \(directory) && \"$BIN\" backup copy.db && cd .. && \"$BIN\" backup - > \(directory)/piped.db 2> \(directory)/err.txt",
                           db: db, in: directory)
        #expect(file.code == 0, "\(file.log)")
        #expect(file.log.hasPrefix("ok      backup: \(db) copied to copy.db"), "\(file.log)")
        let stderr = try TestFiles.read(directory + "/err.txt")
        #expect(stderr.hasPrefix("ok      backup: \(db) copied to stdout"), "\(stderr)")
        for copy in ["copy.db", "piped.db"] {
            let inspection = try StoreCopy.inspect(path: directory + "/" + copy)
            #expect(inspection.problems.isEmpty && inspection.devices == 50, "\(copy)")
        }
        // The stdout copy's file beside the store is gone.
        let left = try run("ls -a \(directory) | grep -c prefect-push-backup || true", db: db, in: directory)
        #expect(left.log.hasSuffix("0\n"), "\(left.log)")
    }

    @Test func usageAndFailures() throws {
        let directory = TestFiles.temporaryDirectory()
        defer { TestFiles.removeTree(directory) }
        #expect(try run("\"$BIN\" backup", db: directory + "/relay.db", in: directory).code == 2)
        #expect(try run("\"$BIN\" backup --force x.db", db: directory + "/relay.db", in: directory).code == 2)
        let missing = try run("\"$BIN\" backup \(directory)/copy.db", db: directory + "/none.db", in: directory)
        #expect(missing.code == 1)
        #expect(missing.log.contains("failed  backup: database \(directory)/none.db: does not exist"), "\(missing.log)")
    }
}
