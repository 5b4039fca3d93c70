// Prefect event and run parsing: any bytes that jansson accepts as JSON go through every reader the relay applies
// to Prefect's answers and socket messages, and through the Watcher; nothing may crash.

func fuzzOne(_ data: [UInt8]) {
    guard let json = try? JSONParser.parse(data) else { return }
    if let event = PrefectEvent(message: json) ?? PrefectEvent(json: json) {
        if let change = StateEvent(event) {
            fuzzCheck(!change.stateID.isEmpty, "a state event without a state id")
        }
        _ = event.related(role: "flow")
    }
    _ = RunDetails(prefect: json)
    _ = RunDetails.list(prefect: json)
    _ = InputRow.list(prefect: json)
    _ = RunArtifact.list(prefect: json)
    _ = RunEvent.list(prefect: json)
    // Re-encoding what was parsed gives JSON that parses to the same value.
    let again = try? JSONParser.parse(Array(json.encoded().utf8))
    fuzzCheck(again == json, "JSON round trip changed the value")
}
