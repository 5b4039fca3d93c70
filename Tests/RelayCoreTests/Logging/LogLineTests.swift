import Testing
@testable import RelayCore

/// `LogLine`: strict logfmt and one JSON object per line, with the same keys in the same order.
@Suite struct LogLineTests {
    let ts = "2026-11-30T00:17:41.002Z"

    @Test func logfmtStartsWithTimeLevelAndEvent() {
        let line = LogLine.render(.logfmt, ts: ts, level: "info", event: "relay.started",
                                  fields: [("port", "8080"), ("prefect", "http://127.0.0.1:4200/api")])
        #expect(line == "ts=2026-11-30T00:17:41.002Z level=info event=relay.started port=8080 prefect=http://127.0.0.1:4200/api")
    }

    @Test func logfmtQuotesWhatWouldBreakAPair() {
        let line = LogLine.render(.logfmt, ts: ts, level: "warn", event: "x", fields: [
            ("space", "a b"), ("quote", "say \"hi\""), ("equals", "k=v"), ("backslash", #"C:\path"#), ("newline", "one\ntwo"),
            ("tab", "a\tb"), ("bell", "a\u{7}b"), ("empty", ""), ("unicode", "Überfällig…"),
        ])
        #expect(line == #"ts=2026-11-30T00:17:41.002Z level=warn event=x space="a b" quote="say \"hi\"" equals="k=v" "#
                + #"backslash="C:\\path" newline="one\ntwo" tab="a\tb" bell="a\u0007b" empty="" unicode=Überfällig…"#)
    }

    @Test func jsonHasTheSameKeysAsStrings() throws {
        let line = LogLine.render(.json, ts: ts, level: "error", event: "store.failed",
                                  fields: [("action", "enqueue"), ("error", "SQLite error 5: \"locked\"\n\\ \u{1}")])
        #expect(line == #"{"ts":"2026-11-30T00:17:41.002Z","level":"error","event":"store.failed","action":"enqueue","#
                + #""error":"SQLite error 5: \"locked\"\n\\ \u0001"}"#)
        let parsed = try JSONParser.parse(line)
        #expect(parsed["event"] == "store.failed")
        #expect(parsed["error"] == .string("SQLite error 5: \"locked\"\n\\ \u{1}"))
    }

    /// A field may not take the place of `ts`, `level` or `event`: in JSON a repeated key is ambiguous.
    @Test func reservedKeysAreRenamed() throws {
        let line = LogLine.render(.json, ts: ts, level: "warn", event: "log.suppressed", fields: [("event", "x"), ("level", "y")])
        let parsed = try JSONParser.parse(line)
        #expect(parsed["event"] == "log.suppressed" && parsed["event_"] == "x" && parsed["level_"] == "y")
        #expect(LogLine.render(.logfmt, ts: ts, level: "warn", event: "e", fields: [("ts", "1")]).hasSuffix(" ts_=1"))
    }

    @Test func valuesAreBounded() {
        let long = String(repeating: "a", count: 5_000)
        let logfmt = LogLine.render(.logfmt, ts: ts, level: "info", event: "e", fields: [("v", long)])
        #expect(logfmt.hasSuffix(" v=" + String(repeating: "a", count: LogLine.maxValueCharacters)))
        let json = LogLine.render(.json, ts: ts, level: "info", event: "e", fields: [("v", long + " b")])
        #expect(json.count < LogLine.maxValueCharacters + 100)
    }
}
