// Prefect event and run parsing: any bytes that jansson accepts as JSON go through every reader the relay applies
// to Prefect's answers and socket messages, and through the Watcher; nothing may crash.

func fuzzEvents(_ data: [UInt8]) {
    guard let json = try? JSONParser.parse(data) else { return }
    // A socket message (`{"type":"event","event":{...}}`) or a bare event object, as the relay reads each.
    let object = json["type"]?.string == "event" ? json["event"] ?? json : json
    if let event = PrefectEvent(json: object) {
        if let change = StateEvent(event) {
            fuzzCheck(!change.stateID.isEmpty, "a state event without a state id")
        }
        _ = event.related(role: "flow")
        _ = RunArtifact.fromCollectionEvent(event)
    }
    _ = RunDetails(prefect: json)
    _ = RunDetails.list(prefect: json)
    _ = InputRow.list(prefect: json)
    _ = RunArtifact.list(prefect: json)
    _ = RunEvent.list(prefect: json)
    // What the relay re-encodes (stored props, logs) is JSON that reads back to the same text. (A value may change
    // form once: 1.0 is written as 1 and reads back as an integer.)
    let text = json.encoded()
    guard let again = try? JSONParser.parse(Array(text.utf8)) else { fatalError("re-encoded JSON does not parse") }
    fuzzCheck(again.encoded() == text, "JSON round trip is not stable")
}
