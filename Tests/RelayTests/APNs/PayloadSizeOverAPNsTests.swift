@testable import RelayCore
import Testing
@testable import Relay
@testable import FakeAPNs

/// Issue 11, end to end over TLS + HTTP/2: the grapheme texts that once gave 4.3–8.6 KB payloads (and a 413 from
/// APNs) reach the fake APNs as bodies of at most 4096 bytes, every kind delivered.
@Suite struct PayloadSizeOverAPNsTests {
    @Test func everyKindArrivesWithin4096Bytes() async throws {
        let harness = try APNsHarness()
        defer { harness.stop() }
        var sent: [String] = []
        for (n, text) in PayloadBoundsTests.texts.enumerated() {
            let props = PayloadBoundsTests.props(text)
            for (k, (_, message)) in PayloadBoundsTests.pushes(props, ended: text).enumerated() {
                let push = Push(kind: message.metadata.pushType == .alert ? .alert : .liveactivity,
                                deviceToken: APNsHarness.token(n * 4 + k), environment: .production,
                                topic: message.metadata.topic("io.example.app"), payload: message.json)
                #expect(await harness.client.send(push).isDelivered)
                sent.append(message.json)
            }
        }
        let bodies = harness.production.requests.map(\.body)
        #expect(bodies.count == sent.count)
        #expect(bodies.allSatisfy { $0.utf8.count <= PushMessage.maxBytes })
        #expect(Set(bodies) == Set(sent))
        let largest = bodies.map(\.utf8.count).max() ?? 0
        #expect(largest > 3000)  // the cases are big enough to need cutting
    }
}
