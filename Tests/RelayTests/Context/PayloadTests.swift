import Testing
@testable import Relay
@testable import RelayCore

@Suite struct ContextPayloadTests {
    static let now: Int64 = 1_795_990_000

    /// A payload with its content-state `props` string parsed, so goldens compare as JSON values.
    static func normalized(_ value: JSONValue) -> JSONValue {
        guard case .object(var root) = value, case .object(var aps)? = root["aps"],
              case .object(var state)? = aps["content-state"], let props = state["props"]?.string else { return value }
        state["props"] = (try? JSONParser.parse(props)) ?? .string(props)
        aps["content-state"] = .object(state)
        root["aps"] = .object(aps)
        return .object(root)
    }

    static func golden(_ name: String) -> JSONValue {
        normalized(ContextFixtures.json("golden/\(name).json"))
    }

    // MARK: - Goldens

    @Test func oneFieldGoldens() throws {
        let props = ContextFixtures.props(ContextFixtures.oneField())
        let stateID = "01a22957-ea16-7c7c-9515-2d8772a174b5"
        #expect(props.json == Self.golden("waiting-props-one-field"))
        let pushes: [(String, PushMessage)] = [
            ("alert-one-field", Payloads.alert(props, stateID: stateID)),
            ("reminder-one-field", Payloads.reminder(props, stateID: stateID, minutesLeft: 4)),
            ("live-activity-start-one-field", Payloads.liveActivityStart(props, stateID: "state-9", now: Self.now)),
            ("live-activity-end-one-field", Payloads.liveActivityEnd(props, endedState: "Running", now: Self.now + 100)),
            ("live-activity-update-one-field", Payloads.liveActivityUpdate(props, now: Self.now + 50)),
        ]
        for (name, push) in pushes {
            let sent = try JSONParser.parse(push.json)
            #expect(Self.normalized(sent) == Self.golden(name), "\(name)")
            #expect(push.payload == sent, "\(name)")
        }
    }

    @Test func suspendedGoldens() throws {
        let props = ContextFixtures.props(ContextFixtures.suspended())
        #expect(props.timeoutAt == nil)
        #expect(props.stateName == "Suspended")
        let alert = Payloads.alert(props, stateID: "01a22958-2b5a-7f57-9141-72bde763fecb")
        #expect(Self.normalized(try JSONParser.parse(alert.json)) == Self.golden("alert-suspended"))
        let start = Payloads.liveActivityStart(props, stateID: "state-9", now: Self.now)
        #expect(Self.normalized(try JSONParser.parse(start.json)) == Self.golden("live-activity-start-suspended"))
        // optional fields are omitted, never null
        let sentProps = try JSONParser.parse(try JSONParser.parse(start.json)["aps"]!["content-state"]!["props"]!.string!)
        #expect(sentProps["timeoutAt"] == nil && sentProps["ended"] == nil)
        #expect(!start.json.contains("null"))
    }

    /// Start and update go stale at the pause's timeout; the end is dismissed instead; no timeout, no stale-date.
    @Test func staleDateIsTheTimeout() throws {
        let props = ContextFixtures.props(ContextFixtures.oneField())
        let timeout = try #require(props.timeoutAt)
        let start = Payloads.liveActivityStart(props, stateID: "state-9", now: Self.now)
        let update = Payloads.liveActivityUpdate(props, now: Self.now)
        let end = Payloads.liveActivityEnd(props, endedState: "Running", now: Self.now)
        #expect(start.payload["aps"]?["stale-date"] == .int(timeout))
        #expect(update.payload["aps"]?["stale-date"] == .int(timeout))
        #expect(end.payload["aps"]?["stale-date"] == nil)
        #expect(end.payload["aps"]?["dismissal-date"] == .int(Self.now + Payloads.dismissalDelay))
        var open = props
        open.timeoutAt = nil
        for push in [Payloads.liveActivityStart(open, stateID: "s", now: Self.now),
                     Payloads.liveActivityUpdate(open, now: Self.now)] {
            #expect(push.payload["aps"]?["stale-date"] == nil)
            #expect(!push.json.contains("stale-date"))
        }
        // a cut payload keeps its stale-date (it is data, never cut)
        let long = Payloads.liveActivityStart(Self.props(body: String(repeating: "b", count: 5000)), stateID: "s",
                                              now: Self.now)
        #expect(long.payload["aps"]?["stale-date"] == .int(2))
    }

    // MARK: - Metadata

    @Test func metadata() {
        let props = ContextFixtures.props(ContextFixtures.oneField())
        let alert = Payloads.alert(props, stateID: "state-9")
        #expect(alert.metadata == PushMessage.Metadata(pushType: .alert, topicSuffix: "", priority: 10, collapseID: "state-9",
                                                threadID: props.runId))
        #expect(alert.metadata.topic("io.zzstoatzz.prefect") == "io.zzstoatzz.prefect")
        #expect(Payloads.reminder(props, stateID: "state-9", minutesLeft: 3).metadata == alert.metadata)
        let start = Payloads.liveActivityStart(props, stateID: "state-9", now: 1)
        let end = Payloads.liveActivityEnd(props, endedState: "x", now: 1)
        for push in [start, end] {
            #expect(push.metadata.pushType == .liveactivity && push.metadata.priority == 10)
            #expect(push.metadata.topic("io.zzstoatzz.prefect") == "io.zzstoatzz.prefect.push-type.liveactivity")
        }
        #expect(start.metadata.collapseID == "state-9")  // a resent start folds into one, as the alert does
        #expect(end.metadata.collapseID == nil)
        // A refresh's update is silent: low priority (no update budget spent), no alert.
        let update = Payloads.liveActivityUpdate(props, now: 1)
        #expect(update.metadata.pushType == .liveactivity && update.metadata.priority == 5)
        #expect(update.metadata.topic("io.zzstoatzz.prefect") == "io.zzstoatzz.prefect.push-type.liveactivity")
        #expect(update.payload["aps"]?["alert"] == nil && update.metadata.collapseID == nil)
    }

    @Test func propsRoundTripAndURL() {
        var props = ContextFixtures.props(ContextFixtures.oneField(), uiRoot: "https://ui.example.com/prefect///")
        #expect(props.url == "https://ui.example.com/prefect/runs/flow-run/95d737c2-8dd4-4a0b-b4d5-e6d147c8ff6e")
        #expect(WaitingProps(json: props.json) == props)
        props.ended = "Cancelled"
        props.timeoutAt = nil
        #expect(WaitingProps(json: props.json) == props)
        #expect(WaitingProps(json: ["runId": "x"]) == nil)
        #expect(props.forDevice(serverId: "other").serverId == "other")
        #expect(WaitingProps(json: try! JSONParser.parse(props.encoded())) == props)
        let running = RunDetails(id: "r", name: "n", state: RunState(id: "s", type: "RUNNING", name: "Running"))
        #expect(WaitingProps(run: running, flowName: nil, text: AlertText(title: "t", subtitle: "s", body: "b",
                                                                          category: .plain),
                             serverId: "x", uiRoot: "http://h") == nil)
    }

    // MARK: - The 4096-byte cut

    static func props(body: String, title: String = "Title") -> WaitingProps {
        WaitingProps(runId: "95d737c2-8dd4-4a0b-b4d5-e6d147c8ff6e", runName: "run", flowName: "flow",
                     serverId: String(repeating: "s", count: 200), title: title, body: body, category: "waiting",
                     stateName: "Paused", waitingSince: 1, timeoutAt: 2,
                     url: "https://prefect.example.com/runs/flow-run/95d737c2-8dd4-4a0b-b4d5-e6d147c8ff6e")
    }

    static func allPushes(_ props: WaitingProps) -> [PushMessage] {
        [Payloads.alert(props, stateID: "s"), Payloads.reminder(props, stateID: "s", minutesLeft: 4),
         Payloads.liveActivityStart(props, stateID: "state-9", now: now), Payloads.liveActivityEnd(props, endedState: "Running", now: now)]
    }

    /// Every body the payload carries (alert body and props body) is the original, or a whole-character
    /// prefix of it followed by "…"; the data is intact; the payload fits.
    static func checkCut(_ original: WaitingProps, reminderPrefix: Bool = false) throws {
        for push in allPushes(original) {
            #expect(push.json.utf8.count <= PushMessage.maxBytes)
            let sent = try JSONParser.parse(push.json)
            #expect(push.payload == sent)
            var bodies: [String] = []
            if let body = sent["aps"]?["alert"]?["body"]?.string { bodies.append(body) }
            if let props = sent["aps"]?["content-state"]?["props"]?.string {
                let parsed = try JSONParser.parse(props)
                #expect(parsed["runId"]?.string == original.runId && parsed["serverId"]?.string == original.serverId)
                #expect(parsed["url"]?.string == original.url)
                bodies.append(parsed["body"]!.string!)
            }
            if let data = sent["body"] {
                #expect(data == ["runId": .string(original.runId), "serverId": .string(original.serverId),
                                 "url": .string(original.url)])
            }
            for body in bodies {
                let full = body.hasPrefix("Times out in 4 min. ") ? "Times out in 4 min. " + original.body
                                                                    : original.body
                if body == full { continue }
                #expect(body.hasSuffix("…"))
                let kept = Array(body.dropLast())
                #expect(kept.count < Array(full).count)
                #expect(Array(Array(full)[0..<kept.count]) == kept, "cut inside a character")
            }
        }
    }

    @Test(arguments: ["a", "é", "e\u{301}", "😀", "👩‍👩‍👧‍👦", "🇫🇷", "\"", "\\", "\u{1}", "日本"])
    func cutOnGraphemeBoundary(unit: String) throws {
        // vary the lead-in so each kind of character lands on the boundary at some offset
        for pad in 0..<6 {
            let body = String(repeating: "x", count: pad) + String(repeating: unit, count: 3000)
            try Self.checkCut(Self.props(body: body))
        }
    }

    @Test func smallPayloadsAreNotCut() {
        let props = Self.props(body: "short body")
        for push in Self.allPushes(props) {
            #expect(!push.json.contains("…"))
        }
    }

    /// The body is cut first, down to its floor, before the title is touched; then the title.
    @Test func hugeTitleIsCutAfterTheBody() throws {
        let props = Self.props(body: String(repeating: "b", count: 5000), title: String(repeating: "T", count: 5000))
        for push in Self.allPushes(props) {
            #expect(push.json.utf8.count <= PushMessage.maxBytes)
            let sent = try JSONParser.parse(push.json)
            if let body = sent["aps"]?["alert"]?["body"]?.string {
                #expect(body.utf8.count <= 240 && body.hasSuffix("…"))
            }
            if let title = sent["aps"]?["alert"]?["title"]?.string { #expect(title.hasSuffix("…")) }
        }
    }
}
