// Payload building: whatever the names and texts, every push kind is at most 4096 bytes of valid UTF-8 JSON that
// parses back to the value built, and the data (ids, url, the `body` object) is intact. The input's last byte picks
// the kind (alert, reminder, Live Activity start or end), so each execution builds one payload.

func fuzzPayload(_ data: [UInt8]) {
    let parts = fields(data, 7)
    let serverID = Validation.identifier(String(text(parts[5]).unicodeScalars.prefix(200).map(Character.init))) ?? "srv"
    let props = WaitingProps(runId: "95d737c2-8dd4-4a0b-b4d5-e6d147c8ff6e", runName: text(parts[0]),
                             flowName: text(parts[1]), serverId: serverID, title: text(parts[2]),
                             body: text(parts[3]), category: "waiting-input", stateName: "Paused",
                             waitingSince: 1_795_990_000, timeoutAt: parts[6].isEmpty ? nil : 1_795_993_600,
                             url: "https://prefect.example.com/runs/flow-run/95d737c2-8dd4-4a0b-b4d5-e6d147c8ff6e")
    let push: PushMessage
    switch (data.last ?? 0) % 4 {
    case 0: push = Payloads.alert(props, stateID: "state")
    case 1: push = Payloads.reminder(props, stateID: "state", minutesLeft: Int(parts[6].first ?? 0))
    case 2: push = Payloads.liveActivityStart(props, stateID: "state-1", now: 1_795_990_100)
    default: push = Payloads.liveActivityEnd(props, endedState: text(parts[4]), now: 1_795_990_200)
    }
    do {
        let bytes = Array(push.json.utf8)
        fuzzCheck(bytes.count <= PushMessage.maxBytes, "payload is \(bytes.count) bytes")
        fuzzCheck(String(validating: bytes, as: UTF8.self) != nil, "payload is not UTF-8")
        guard let parsed = try? JSONParser.parse(bytes) else { fatalError("payload is not JSON") }
        fuzzCheck(parsed == push.payload, "payload does not parse back to its value")
        if let body = parsed["body"] {
            fuzzCheck(body == ["runId": .string(props.runId), "serverId": .string(props.serverId),
                               "url": .string(props.url)], "data object changed")
        }
        if let state = parsed["aps"]?["content-state"]?["props"]?.string {
            guard let inner = try? JSONParser.parse(Array(state.utf8)) else { fatalError("props are not JSON") }
            fuzzCheck(inner["runId"]?.string == props.runId && inner["serverId"]?.string == props.serverId
                      && inner["url"]?.string == props.url, "props data changed")
        }
    }
}
