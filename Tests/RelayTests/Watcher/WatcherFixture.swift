import Glibc
@testable import Relay
@testable import RelayCore

/// Loads `Tests/RelayTests/Fixtures/prefect/<name>` (copied verbatim from the shared captures) by path,
/// found from this file's own location: no Foundation, no bundle lookup.
enum WatcherFixture {
    static let directory: String = {
        var path = #filePath
        // .../Tests/RelayTests/Watcher/WatcherFixture.swift → .../Tests/RelayTests/Fixtures/prefect/
        for _ in 0..<2 { path = String(path[..<path.lastIndex(of: "/")!]) }
        return path + "/Fixtures/prefect/"
    }()

    static func text(_ name: String) throws -> String {
        guard let file = fopen(directory + name, "rb") else { throw FixtureMissing(name: name) }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = fread(&buffer, 1, buffer.count, file)
            if count == 0 { break }
            bytes.append(contentsOf: buffer[0..<count])
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func json(_ name: String) throws -> JSONValue {
        try JSONParser.parse(text(name))
    }

    /// A single websocket message file (`ws-event-*.json`) as a state event.
    static func stateEvent(_ name: String) throws -> StateEvent {
        let message = try json(name)
        guard let event = PrefectEvent(message: message)?.stateEvent else { throw FixtureMissing(name: name) }
        return event
    }

    /// The `response` of a REST capture (`rest-flow-run-*.json`) as a flow run.
    static func flowRun(_ name: String) throws -> FlowRun {
        guard let run = try FlowRun(json: json(name)["response"] ?? .null) else { throw FixtureMissing(name: name) }
        return run
    }

    struct FixtureMissing: Error, CustomStringConvertible {
        let name: String
        var description: String { "fixture \(name) is missing or not what the test expects" }
    }
}

extension PrefectEvent {
    /// Reads one captured websocket message (`{"type":"event","event":{...}}`); nil for anything else.
    init?(message: JSONValue) {
        guard message["type"]?.string == "event", let event = message["event"] else { return nil }
        self.init(json: event)
    }
}
