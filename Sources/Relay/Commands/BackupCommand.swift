import Glibc
import RelayCore

/// `prefect-push backup FILE`: copies the store at `DB_PATH` to FILE with SQLite's online backup, on a connection of
/// its own, so it runs beside the relay while it pushes (`StoreCopy`). Prints one line in `check`'s format and exits
/// 0 when the copy is in place and passed its integrity check, 1 when it failed, 2 for a usage error.
///
/// `backup -` writes the checked copy to stdout instead (and the line to stderr): the image has no shell, `cat` or
/// `tar`, so this is how a copy leaves a pod (`kubectl exec … -- prefect-push backup - > copy.db`).
enum BackupCommand {
    static let usage = "backup FILE  copy DB_PATH to FILE, or to stdout with -, consistent while the relay runs, then exit"

    static func run(arguments: [String], environment: [String: String]) -> Int32 {
        guard arguments.count == 1, let file = arguments.first, !file.isEmpty, file == "-" || !file.hasPrefix("-") else {
            Stderr.write("usage: prefect-push backup FILE, or - for stdout (DB_PATH names the store to copy)\n")
            return 2
        }
        signal(SIGPIPE, SIG_IGN)  // a closed stdout is an error to report, not a silent death
        let source = Config.dbPath(environment: environment)
        let toStdout = file == "-"
        // Beside the store: that directory is writable (SQLite needs it to be) and on the same volume.
        let target = toStdout ? StoreError.directoryName(of: source) + "/.prefect-push-backup-\(getpid()).db" : file
        let started = SystemClock.monotonic()
        let report: (CheckCommand.Line) -> Void = { line in
            if toStdout { Stderr.write(line.text + "\n") } else { print(line.text) }
        }
        do {
            let copied = try StoreCopy.backup(from: source, to: target)
            if toStdout {
                defer { unlink(target) }
                try copy(target, toDescriptor: 1)
            }
            let ms = Int((SystemClock.monotonic() - started) * 1000)
            report(CheckCommand.Line(.ok, "backup", "\(source) copied to \(toStdout ? "stdout" : file): \(copied.pages) pages "
                              + "(\(copied.bytes) bytes), schema \(copied.schemaVersion), integrity ok, \(ms) ms"))
            return 0
        } catch {
            report(CheckCommand.Line(.failed, "backup", "\(error)"))
            return 1
        }
    }

    private struct WriteFailed: Error, CustomStringConvertible {
        var description: String
    }

    /// Streams the file at `path` to `fd`, whole or not at all as far as the exit code goes.
    private static func copy(_ path: String, toDescriptor fd: Int32) throws {
        let input = open(path, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw WriteFailed(description: "could not read the copy: \(String(cString: strerror(errno)))") }
        defer { close(input) }
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { throw WriteFailed(description: "reading the copy: \(String(cString: strerror(errno)))") }
            if count == 0 { return }
            var offset = 0
            while offset < count {
                let written = buffer.withUnsafeBytes { write(fd, $0.baseAddress! + offset, count - offset) }
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else {
                    throw WriteFailed(description: "stdout closed or failed (\(String(cString: strerror(errno)))); "
                                          + "redirect it to a file: prefect-push backup - > copy.db")
                }
                offset += written
            }
        }
    }
}
