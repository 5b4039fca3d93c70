import Testing
@testable import Relay
@testable import FakeAPNs
@testable import RelayCore

/// Dead connections are noticed and replaced; what was in flight is reported, never silently resent.
@Suite struct APNsConnectionHealthTests {
    private func harness(pingMs: Int, pingTimeoutMs: Int, requestTimeoutMs: Int = 5_000) throws -> APNsHarness {
        try APNsHarness(requestTimeoutMs: requestTimeoutMs, pingIntervalMs: pingMs, pingTimeoutMs: pingTimeoutMs)
    }

    @Test func idlePingsKeepAHealthyConnection() async throws {
        let harness = try harness(pingMs: 50, pingTimeoutMs: 500)
        defer { harness.stop() }
        #expect(await harness.client.send(APNsHarness.alert(APNsHarness.token(1))).isDelivered)
        try await holds("the healthy link is kept through several PING rounds", during: 0.4) {
            harness.production.connectionCount == 1
        }
        #expect(await harness.client.send(APNsHarness.alert(APNsHarness.token(2))).isDelivered)
        #expect(harness.production.connectionCount == 1)
    }

    @Test func aSilentlyDeadConnectionIsReplaced() async throws {
        let harness = try harness(pingMs: 100, pingTimeoutMs: 200)
        defer { harness.stop() }
        #expect(await harness.client.send(APNsHarness.alert(APNsHarness.token(1))).isDelivered)
        harness.production.freezeConnections()
        // In flight when the peer goes quiet: the missing PING ack ends it as "delivery unknown".
        let inFlight = await harness.client.send(APNsHarness.alert(APNsHarness.token(2)))
        guard case .connectionLost = inFlight else { Issue.record("expected connectionLost, got \(inFlight)"); return }
        #expect(await harness.client.send(APNsHarness.alert(APNsHarness.token(3))).isDelivered)
        #expect(harness.production.connectionCount == 2)
        #expect(harness.production.requests(for: APNsHarness.token(2)).count <= 1)
    }

    @Test func aHungUpConnectionIsReopenedOnNextUse() async throws {
        let harness = try harness(pingMs: 60_000, pingTimeoutMs: 10_000)
        defer { harness.stop() }
        let stuck = APNsHarness.token(5)
        harness.production.script(stuck, .silent)
        #expect(await harness.client.send(APNsHarness.alert(APNsHarness.token(4))).isDelivered)
        async let lost = harness.client.send(APNsHarness.alert(stuck))
        try await eventually("the stuck push is at the server", within: 30) { harness.production.requests(for: stuck).count == 1 }
        harness.production.dropConnections()
        guard case .connectionLost = await lost else { Issue.record("expected connectionLost"); return }
        #expect(harness.production.requests(for: stuck).count == 1)
        #expect(await harness.client.send(APNsHarness.alert(APNsHarness.token(6))).isDelivered)
        #expect(harness.production.connectionCount == 2)
    }
}
