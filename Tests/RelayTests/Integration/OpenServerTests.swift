import Glibc
import Testing
@testable import Relay
@testable import RelayCore

/// A Prefect server that answers without a credential, when none is configured: the relay's API then admits anyone,
/// so the relay warns at start-up and `check` says so. The stand-in answers 200 `[]` to every request (the events
/// socket's upgrade fails and is retried, which doesn't matter here). Also the log's two formats, line by line.
@Suite struct OpenServerTests {
    func environment(_ server: ScriptedHTTPServer, _ directory: String, _ extra: [String: String] = [:]) -> [String: String] {
        ["PREFECT_API_URL": "http://127.0.0.1:\(server.port)/api", "DB_PATH": directory + "/relay.db"]
            .merging(extra) { $1 }
    }

    @Test func theRelayWarnsInStrictLogfmt() throws {
        let server = try ScriptedHTTPServer { _, _ in .answer("[]") }
        defer { server.stop() }
        let directory = TestFiles.temporaryDirectory()
        defer { TestFiles.removeTree(directory) }
        let relay = try RelayProcess(environment: environment(server, directory), directory: directory)
        defer { relay.stop() }
        try waitUntil("the open server is named", timeout: 15) {
            relay.process.log.contains(" level=warn event=prefect.open_server ")
        }
        let lines = relay.process.log.split(separator: "\n")
        let warning = lines.first { $0.contains("event=prefect.open_server") } ?? ""
        #expect(warning.contains("fix=\"run Prefect with PREFECT_SERVER_API_AUTH_STRING"))
        for line in lines {
            #expect(line.hasPrefix("ts=") && line.contains(" level=") && line.contains(" event="), "\(line)")
        }
    }

    @Test func jsonLinesCarryTheSameKeys() throws {
        let server = try ScriptedHTTPServer { _, _ in .answer("[]") }
        defer { server.stop() }
        let directory = TestFiles.temporaryDirectory()
        defer { TestFiles.removeTree(directory) }
        let relay = try RelayProcess(environment: environment(server, directory, ["LOG_FORMAT": "json"]),
                                     directory: directory)
        defer { relay.stop() }
        try waitUntil("the open server is named", timeout: 15) { relay.process.log.contains("prefect.open_server") }
        var events: [String] = []
        for line in relay.process.log.split(separator: "\n") {
            let object = try JSONParser.parse(String(line))
            #expect(object["ts"]?.string?.hasSuffix("Z") == true, "\(line)")
            #expect(object["level"]?.string != nil, "\(line)")
            events.append(object["event"]?.string ?? "")
        }
        #expect(events.prefix(2) == ["store.migrated", "relay.started"], "\(events)")
        #expect(events.contains("prefect.open_server"))
    }

    @Test func noWarningWithACredential() throws {
        let server = try ScriptedHTTPServer { _, _ in .answer("[]") }
        defer { server.stop() }
        let directory = TestFiles.temporaryDirectory()
        defer { TestFiles.removeTree(directory) }
        let relay = try RelayProcess(environment: environment(server, directory, ["PREFECT_API_AUTH_STRING": "u:p"]),
                                     directory: directory)
        defer { relay.stop() }
        try waitUntil("Prefect is asked something", timeout: 15) { server.requests > 0 }
        try holds("no open-server warning", for: 1) { !relay.process.log.contains("prefect.open_server") }
        // The relay never asked without its credential.
        #expect(server.requestTexts.allSatisfy { $0.contains("Authorization: Basic ") || $0.contains("authorization: Basic ") })
    }

    @Test func checkWarnsAndStillPassesThatLine() throws {
        let server = try ScriptedHTTPServer { _, _ in .answer("[]") }
        defer { server.stop() }
        let directory = TestFiles.temporaryDirectory()
        defer { TestFiles.removeTree(directory) }
        let check = try ChildProcess(RelayProcess.binary, ["check"], environment: environment(server, directory),
                                     logPath: directory + "/check.log")
        _ = check.waitForExit(timeout: 60)
        let lines = check.log.split(separator: "\n")
        #expect(lines.contains { $0.hasPrefix("ok      prefect api:") }, "\(check.log)")
        let warning = lines.first { $0.hasPrefix("warn    prefect open:") } ?? ""
        #expect(warning.contains("admits anyone") && warning.contains("fix: run Prefect with"), "\(check.log)")
    }
}
