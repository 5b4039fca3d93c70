import Glibc
import RelayCore
import Synchronization

/// One line per event to stderr, strict logfmt (`ts=… level=… event=… key=value …`) or, with `LOG_FORMAT=json`, one
/// JSON object with the same keys (`LogLine`). Each line is written with a single write(2) so lines from different
/// threads stay whole. Never pass a credential; shorten tokens with `Log.short(_:)`.
///
/// Warnings and errors go through a `LogThrottle`: an event that repeats (an `accept` failing for lack of
/// descriptors, a host that keeps refusing) writes its first lines, then one `log.suppressed` line with a count per
/// window, so no outside party can make the relay flood its log.
package enum Log {
    private static let minimum = Atomic<Int>(1)  // index into Config.LogLevel.allCases
    private static let throttle = Locked(LogThrottle())
    private static let json = Atomic<Bool>(false)

    package static func setLevel(_ level: Config.LogLevel) {
        minimum.store(Config.LogLevel.allCases.firstIndex(of: level)!, ordering: .relaxed)
    }

    package static func setFormat(_ format: Config.LogFormat) {
        json.store(format == .json, ordering: .relaxed)
    }

    static func debug(_ event: String, _ fields: KeyValuePairs<String, String> = [:]) { emit(.debug, event, fields) }
    static func info(_ event: String, _ fields: KeyValuePairs<String, String> = [:]) { emit(.info, event, fields) }
    static func warn(_ event: String, _ fields: KeyValuePairs<String, String> = [:]) { emit(.warn, event, fields) }
    static func error(_ event: String, _ fields: KeyValuePairs<String, String> = [:]) { emit(.error, event, fields) }

    static func isEnabled(_ level: Config.LogLevel) -> Bool {
        Config.LogLevel.allCases.firstIndex(of: level)! >= minimum.load(ordering: .relaxed)
    }

    static func emit(_ level: Config.LogLevel, _ event: String, _ fields: KeyValuePairs<String, String>) {
        guard isEnabled(level) else { return }
        var held = 0
        if level == .warn || level == .error {
            let now = SystemClock.monotonic()
            let verdict = throttle.withLock { $0.admit(event, now: now) }
            guard verdict.write else { return }
            held = verdict.suppressed
        }
        var pairs = fields.filter { !$0.value.isEmpty }.map { (key: $0.key, value: $0.value) }  // an empty field says nothing
        if held > 0 { pairs.append((key: "suppressed", value: String(held))) }
        writeLine(level.rawValue, event, pairs)
    }

    /// One `log.suppressed` line for each event whose repeats were held back in a window that has passed. Called
    /// from the relay's once-a-second tick, so a flood that stopped still has its count written.
    static func writeSuppressedCounts() {
        let now = SystemClock.monotonic()
        for (event, count) in throttle.withLock({ $0.due(now: now) }) {
            writeLine("warn", "log.suppressed", [(key: "suppressed_event", value: event), (key: "lines", value: String(count))])
        }
    }

    private static func writeLine(_ level: String, _ event: String, _ fields: [(key: String, value: String)]) {
        var line = LogLine.render(json.load(ordering: .relaxed) ? .json : .logfmt, ts: timestamp(), level: level,
                                  event: event, fields: fields)
        line += "\n"
        var bytes = Array(line.utf8)
        bytes.withUnsafeMutableBytes { raw in
            var offset = 0
            while offset < raw.count {
                let written = write(2, raw.baseAddress! + offset, raw.count - offset)
                if written < 0 && errno == EINTR { continue }
                if written <= 0 { return }
                offset += written
            }
        }
    }

    /// A device or activity token shortened for logs: first 6 and last 3 characters.
    static func short(_ token: String) -> String {
        token.count <= 10 ? token : String(token.prefix(6)) + "…" + String(token.suffix(3))
    }

    private static func timestamp() -> String { Timestamp.format(SystemClock.unixNow()) }
}
