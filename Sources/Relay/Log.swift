import Glibc
import RelayCore
import Synchronization

/// One logfmt line per event to stderr, written with a single write(2) so lines from different threads
/// stay whole. Never pass a credential; shorten tokens with `Log.short(_:)`.
package enum Log {
    private static let minimum = Atomic<Int>(1)  // index into Config.LogLevel.allCases

    package static func setLevel(_ level: Config.LogLevel) {
        minimum.store(Config.LogLevel.allCases.firstIndex(of: level)!, ordering: .relaxed)
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
        var line = timestamp() + " " + level.rawValue + " " + event
        for (key, value) in fields where !value.isEmpty {  // an empty field says nothing
            line += " " + key + "=" + quoted(value)
        }
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

    private static func quoted(_ value: String) -> String {
        let needsQuotes = value.isEmpty || value.contains(where: { $0 == " " || $0 == "\"" || $0 == "=" || $0.isNewline })
        guard needsQuotes else { return value }
        var out = "\""
        for ch in value.prefix(300) {
            switch ch {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n", "\r\n", "\r": out += "\\n"
            default: out.append(ch)
            }
        }
        return out + "\""
    }

    private static func timestamp() -> String { Timestamp.format(SystemClock.unixNow()) }
}
