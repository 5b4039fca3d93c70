@testable import RelayCore

/// The captured Prefect messages and REST answers (`Tests/RelayTests/Fixtures/prefect/<name>`, read through
/// `Fixtures`) as the watcher's inputs; a missing or unexpected fixture throws.
enum WatcherFixture {
    static func text(_ name: String) throws -> String {
        guard let bytes = Fixtures.bytes("prefect/" + name) else { throw FixtureMissing(name: name) }
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
