import Glibc
import RelayCore

/// `prefect-push restore FILE`: puts a backup (`prefect-push backup FILE`) back at `DB_PATH`, with the relay stopped,
/// for a rollback after an upgrade or a damaged store (`StoreCopy.restore`). The image has no shell or `cp`, so this
/// is how a backup on the volume goes back in place in a pod. Prints one line in `check`'s format and exits 0 when
/// the store is restored and passed its integrity check, 1 when it failed (a relay still running on the store
/// included: the restore refuses to write under it), 2 for a usage error.
enum RestoreCommand {
    static let usage = "restore FILE put the backup FILE back at DB_PATH (stop the relay first), checked, then exit"

    static func run(arguments: [String], environment: [String: String]) -> Int32 {
        guard arguments.count == 1, let file = arguments.first, !file.isEmpty, !file.hasPrefix("-") else {
            Stderr.write("usage: prefect-push restore FILE (a file made by prefect-push backup; DB_PATH names the "
                             + "store to replace, with the relay stopped)\n")
            return 2
        }
        let target = Config.dbPath(environment: environment)
        do {
            let restored = try StoreCopy.restore(from: file, to: target)
            print(CheckCommand.Line(.ok, "restore", "\(file) restored to \(target): \(restored.pages) pages, schema "
                                        + "\(restored.schemaVersion), integrity ok; start the relay").text)
            return 0
        } catch {
            print(CheckCommand.Line(.failed, "restore", "\(error)").text)
            return 1
        }
    }
}
