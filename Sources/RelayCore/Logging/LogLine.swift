/// How one log line is written: strict logfmt (`ts=… level=… event=… key=value …`) or one JSON object per line
/// (`LOG_FORMAT=json`). Pure, so both are tested as text; `Log` in the relay adds the clock, the level filter, the
/// throttle and the single write(2).
public enum LogLine {
    /// Values are cut to this many characters, so no field (an error quoting a peer's text) makes a line unbounded.
    public static let maxValueCharacters = 300
    /// The keys every line starts with; a field with one of these names gets a `_` appended, so no key repeats.
    static let reserved: Set<String> = ["ts", "level", "event"]

    public static func render(_ format: Config.LogFormat, ts: String, level: String, event: String,
                              fields: [(key: String, value: String)]) -> String {
        let named = fields.map { (key: reserved.contains($0.key) ? $0.key + "_" : $0.key, value: $0.value) }
        switch format {
        case .logfmt:
            var line = "ts=" + ts + " level=" + level + " event=" + logfmtValue(event)
            for (key, value) in named { line += " " + key + "=" + logfmtValue(value) }
            return line
        case .json:
            var line = "{\"ts\":" + jsonString(ts) + ",\"level\":" + jsonString(level) + ",\"event\":" + jsonString(event)
            for (key, value) in named { line += "," + jsonString(key) + ":" + jsonString(value) }
            return line + "}"
        }
    }

    /// A logfmt value: bare when it is plain, else in double quotes with `"`, `\` and control characters escaped.
    static func logfmtValue(_ value: String) -> String {
        let cut = value.prefix(maxValueCharacters)
        let plain = !cut.isEmpty && cut.unicodeScalars.allSatisfy {
            $0.value > 0x20 && $0.value != 0x7f && $0 != "\"" && $0 != "=" && $0 != "\\"
        }
        if plain { return String(cut) }
        var out = "\""
        for scalar in cut.unicodeScalars { out += escaped(scalar) }
        return out + "\""
    }

    /// A JSON string literal (RFC 8259): quotes, backslashes and control characters escaped, the rest as UTF-8.
    static func jsonString(_ value: String) -> String {
        var out = "\""
        for scalar in value.prefix(maxValueCharacters).unicodeScalars { out += escaped(scalar) }
        return out + "\""
    }

    /// The escapes logfmt's quoted values and JSON strings share.
    private static func escaped(_ scalar: Unicode.Scalar) -> String {
        switch scalar {
        case "\"": return "\\\""
        case "\\": return "\\\\"
        case "\n": return "\\n"
        case "\r": return "\\r"
        case "\t": return "\\t"
        default:
            guard scalar.value < 0x20 || scalar.value == 0x7f else { return String(scalar) }
            let hex = String(scalar.value, radix: 16)
            return "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
        }
    }
}
