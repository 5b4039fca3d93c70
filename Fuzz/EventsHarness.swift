// Prefect event and run parsing: any bytes that jansson accepts as JSON go through every reader the relay applies
// to Prefect's answers and socket messages, and through the PauseWatcher; nothing may crash. The same bytes, read as a
// script, drive the events socket's session (`fuzzEventsSession`).

func fuzzEvents(_ data: [UInt8]) {
    fuzzEventsSession(data)
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

// The events socket's session driven through random event sequences, each byte one event and a step of time, fed
// only when the state allows it (`isPossible`: the rest would trap, as they would be the socket's bug). Whatever the
// order: a connect never opens a second connection; nothing connects after a stop; every end of an open connection
// is reported once, with a reconnect timer newer than the last and a wait within the backoff (its maximum after a
// refusal); the state's idea of an open connection is the harness's.
func fuzzEventsSession(_ data: [UInt8]) {
    var session = EventsSession()
    var now = 0.0
    var open = false, stopped = false, lastGeneration = 0
    func check(_ actions: [EventsSession.Action]) {
        for (index, action) in actions.enumerated() {
            switch action {
            case .connect:
                fuzzCheck(!open && !stopped, "a connect with a connection open or after a stop")
                open = true
            case .disconnected(let end, _, let retryIn):
                fuzzCheck(open, "an end reported without an open connection")
                open = false
                fuzzCheck(retryIn >= 0 && retryIn <= session.backoff.maximum, "a wait of \(retryIn) s")
                fuzzCheck(!end.isRefusal || retryIn == session.backoff.maximum, "a refusal retried early")
                fuzzCheck(index + 1 < actions.count && actions[index + 1] == .reconnect(after: retryIn, generation: lastGeneration + 1),
                          "an end without its reconnect timer")
            case .reconnect(_, let generation):
                lastGeneration = generation
            case .close:
                fuzzCheck(open, "a close without an open connection")
            case .authenticate, .subscribed, .logRefusal, .logConnectFailed:
                break
            }
        }
    }
    // The first 256 bytes: enough for any path through the states, and the JSON half keeps its speed.
    for byte in data.prefix(256) {
        let event = EventsSession.Event.allCases[Int(byte) % EventsSession.Event.allCases.count]
        now += Double(byte / 16) * 0.75  // up to 11 s a step: stages run out
        let random = Double(byte % 7) / 7
        guard session.isPossible(event) else { continue }
        let wasStopping = session.state == .stopping
        switch event {
        case .start: check(session.start(now: now))
        case .reconnectDue: check(session.reconnectDue(generation: lastGeneration - Int(byte % 2), now: now))
        case .connectReturned: check(session.connectReturned(opened: byte & 1 != 0, wsiMade: byte & 2 != 0, now: now, random: random))
        case .upgrading: session.upgrading(now: now)
        case .established: check(session.established(now: now))
        case .authSucceeded: check(session.authSucceeded(now: now))
        case .closeFrame: check(session.closeFrame(code: byte & 1 != 0 ? 1008 : 1000, text: "bye"))
        case .connectError: check(session.connectError(byte & 1 != 0 ? "HS: ws upgrade unauthorized" : "refused", now: now, random: random))
        case .ended: check(session.ended("closed", now: now, random: random))
        case .stop:
            check(session.stop())
            stopped = true
        }
        if wasStopping && session.state == .stopped { open = false }
        switch session.state {
        case .connecting, .subscribed, .stopping: fuzzCheck(open, "the session has a connection the harness closed")
        case .idle, .waitingToReconnect, .stopped: fuzzCheck(!open, "the session lost an open connection")
        }
    }
}
