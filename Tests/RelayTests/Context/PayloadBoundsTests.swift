import Testing
@testable import Relay
@testable import RelayCore

/// Issue 11: every payload kind stays within 4096 bytes whatever the names and texts are, cut on grapheme
/// boundaries, with the data object and the ids intact.
@Suite struct PayloadBoundsTests {
    static let family = "👨‍👩‍👧‍👦"
    static let stacked = "e" + String(repeating: "\u{301}", count: 2000)
    static let runID = "95d737c2-8dd4-4a0b-b4d5-e6d147c8ff6e"
    static let url = "https://prefect.example.com/runs/flow-run/95d737c2-8dd4-4a0b-b4d5-e6d147c8ff6e"

    /// Texts that once gave starts of 4.5–8.6 KB (family emoji, stacked accents) plus JSON-escape-heavy ones.
    static let texts: [String] = [
        String(repeating: family, count: 200), String(repeating: family, count: 1000), stacked,
        String(repeating: stacked, count: 3), String(repeating: "\"", count: 3000), String(repeating: "\\", count: 3000),
        String(repeating: "\u{1}", count: 2000), String(repeating: "日本", count: 2000), String(repeating: "🇫🇷", count: 900),
        "short",
    ]

    static func props(_ text: String, serverID: String = String(repeating: "s", count: 200)) -> WaitingProps {
        WaitingProps(runId: runID, runName: text, flowName: text, serverId: serverID, title: text, body: text,
                     category: "waiting-input", stateName: "Suspended", waitingSince: 1_795_990_000,
                     timeoutAt: 1_795_993_600, url: url)
    }

    static func pushes(_ props: WaitingProps, ended: String) -> [(String, PushMessage)] {
        [("alert", Payloads.alert(props, stateID: "state")),
         ("reminder", Payloads.reminder(props, stateID: "state", minutesLeft: 4)),
         ("start", Payloads.liveActivityStart(props, stateID: "state-9", now: 1_795_990_100)),
         ("end", Payloads.liveActivityEnd(props, endedState: ended, now: 1_795_990_200)),
         ("update", Payloads.liveActivityUpdate(props, now: 1_795_990_150))]
    }

    /// The invariant: at most 4096 bytes, valid JSON equal to the value, data and ids intact, every grapheme of a
    /// free-text field bounded.
    static func check(_ push: PushMessage, _ props: WaitingProps, _ label: String) throws {
        #expect(push.json.utf8.count <= PushMessage.maxBytes, "\(label): \(push.json.utf8.count) bytes")
        let sent = try JSONParser.parse(push.json)
        #expect(sent == push.payload, "\(label)")
        if let data = sent["body"] {
            #expect(data == ["runId": .string(props.runId), "serverId": .string(props.serverId),
                             "url": .string(props.url)], "\(label)")
        }
        if let state = sent["aps"]?["content-state"] {
            let inner = try JSONParser.parse(try #require(state["props"]?.string))
            #expect(inner["runId"]?.string == props.runId && inner["serverId"]?.string == props.serverId, "\(label)")
            #expect(inner["url"]?.string == props.url, "\(label)")
            for key in ["title", "body", "runName", "flowName"] {
                let text = try #require(inner[key]?.string)
                #expect(text.allSatisfy { $0.utf8.count <= 2 * String.maxGraphemeBytes }, "\(label) \(key)")
            }
        }
        if let attributes = sent["aps"]?["attributes"] { #expect(attributes == ["url": .string(props.url)]) }
    }

    @Test(arguments: texts)
    func everyKindFits(_ text: String) throws {
        let props = Self.props(text)
        for (kind, push) in Self.pushes(props, ended: text) {
            try Self.check(push, props, "\(kind) \(text.prefix(3))")
        }
    }

    /// The worst data the API lets in: a 200-character server id of 4-byte characters and quotes.
    @Test(arguments: [String(repeating: "𝕏", count: 200), String(repeating: "\"", count: 200),
                      String(repeating: "\\\"𝕏", count: 66)])
    func worstServerID(_ serverID: String) throws {
        let props = Self.props(String(repeating: Self.family, count: 500), serverID: serverID)
        for (kind, push) in Self.pushes(props, ended: Self.stacked) { try Self.check(push, props, kind) }
    }

    /// A stacked cluster keeps its base and some marks instead of vanishing: something still shows.
    @Test func hugeGraphemeIsBoundedNotDropped() {
        let bounded = Self.stacked.boundingGraphemes()
        #expect(bounded.utf8.count <= String.maxGraphemeBytes)
        #expect(bounded.unicodeScalars.first == "e" && bounded.unicodeScalars.count > 1 && bounded.count == 1)
        #expect(Self.family.boundingGraphemes() == Self.family)
        #expect("plain text".boundingGraphemes() == "plain text")
        let start = Payloads.liveActivityStart(Self.props(Self.stacked), stateID: "state-9", now: 1)
        let title = try? #require(start.payload["aps"]?["alert"]?["title"]?.string)
        #expect(title?.unicodeScalars.prefix(2).map(\.value) == [0x65, 0x301])
    }

    /// Names alone can overflow a start (they're in the props twice escaped); the names get cut, the data not.
    @Test func longNamesAreCutToo() throws {
        var props = Self.props("short")
        props.runName = String(repeating: Self.family, count: 200)
        props.flowName = String(repeating: Self.family, count: 200)
        let start = Payloads.liveActivityStart(props, stateID: "state-9", now: 1)
        try Self.check(start, props, "start")
        let inner = try JSONParser.parse(start.payload["aps"]!["content-state"]!["props"]!.string!)
        #expect(inner["body"]?.string == "short" && inner["title"]?.string == "short")
        #expect(inner["runName"]?.string?.hasSuffix("…") == true)
    }
}
