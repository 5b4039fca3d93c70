import Glibc
import RelayCore

/// `prefect-push backup FILE`: copies the store at `DB_PATH` to FILE with SQLite's online backup, on a connection of
/// its own, so it runs beside the relay while it pushes (`StoreCopy`). Prints one line in `check`'s format and exits
/// 0 when the copy is in place and passed its integrity check, 1 when it failed, 2 for a usage error.
enum BackupCommand {
    static let usage = "backup FILE  copy DB_PATH to FILE (consistent while the relay runs), check the copy, then exit"

    static func run(arguments: [String], environment: [String: String]) -> Int32 {
        guard arguments.count == 1, let file = arguments.first, !file.isEmpty, !file.hasPrefix("-") else {
            Stderr.write("usage: prefect-push backup FILE (DB_PATH names the store to copy)\n")
            return 2
        }
        let source = Config.dbPath(environment: environment)
        let started = SystemClock.monotonic()
        do {
            let copied = try StoreCopy.backup(from: source, to: file)
            let ms = Int((SystemClock.monotonic() - started) * 1000)
            print(Check.Line(.ok, "backup", "\(source) copied to \(file): \(copied.pages) pages (\(copied.bytes) bytes), "
                             + "schema \(copied.schemaVersion), integrity ok, \(ms) ms").text)
            return 0
        } catch {
            print(Check.Line(.failed, "backup", "\(error)").text)
            return 1
        }
    }
}
