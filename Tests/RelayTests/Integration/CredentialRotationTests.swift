import Glibc
import Testing
@testable import FakeAPNs
@testable import Relay
@testable import RelayCore

extension SharedPrefect {
    /// The rotation runbooks of docs/operations.md, each while a pause waits: the relay stopped, the credential
    /// replaced where the relay reads it, the relay started again. Nothing the phone was sent comes twice, and the
    /// pause's end still reaches it, through the new credential.
    @Suite(.serialized) struct CredentialRotationTests {
        /// "Rotate the APNs key": the key file at APNS_KEY_PATH replaced by a new key (and APNS_KEY_ID by its id),
        /// then the relay restarted. Apple is played by fakes that accept only the new key once it is installed (the
        /// old one revoked), so a relay still signing with the old key gets its end push refused.
        @Test func apnsKeyRotatedWhileAPauseWaits() async throws {
            let e2e = try await EndToEnd()
            let keyPath = e2e.directory + "/AuthKey.p8"
            try TestFiles.write(keyPath, APNsFixtures.text("AuthKey_TESTKEY123.p8"))
            e2e.extraEnvironment = ["APNS_KEY_PATH": keyPath]
            try e2e.startRelay()
            try e2e.registerDevice()
            let run = try e2e.runFlow("plain")
            try waitUntil("the alert and the start, signed with the first key", timeout: 60) {
                !e2e.pushes(to: EndToEnd.deviceToken, run: run).isEmpty && !e2e.pushes(to: EndToEnd.startToken, run: run).isEmpty
            }
            try e2e.registerActivity(runID: run)

            // The runbook: stop, the new key where the old one was, its id, start.
            e2e.stopRelay()
            // Apple, once the old key is revoked: hosts that take only the new key (the old fakes keep their
            // listening sockets until the test ends, so these listen on ports of their own).
            e2e.development.stop()
            e2e.production.stop()
            let development = try FakeAPNs(name: "development", identity: .rotated)
            let production = try FakeAPNs(name: "production", identity: .rotated)
            defer {
                development.stop()
                production.stop()
            }
            try TestFiles.write(keyPath, APNsFixtures.text("AuthKey_ROTATED456.p8"))
            e2e.extraEnvironment["APNS_KEY_ID"] = APNsFixtures.rotatedKeyID
            e2e.extraEnvironment["APNS_DEVELOPMENT_URL"] = "https://127.0.0.1:\(development.port)"
            e2e.extraEnvironment["APNS_PRODUCTION_URL"] = "https://127.0.0.1:\(production.port)"
            let relay = try e2e.startRelay()
            try holds("nothing of the run sent again after the restart", for: 2) { pushes(development, run: run).isEmpty }

            try e2e.cancel(run)
            try waitUntil("the end push, through the new key", timeout: 30) {
                pushes(development, token: EndToEnd.activityToken, run: run).contains { $0.answer == .accept }
            }
            e2e.stopFlows()  // a blocking pause ignores the cancel; its late Failed must not send a second end
            try holds("one end push, and nothing else of the run", for: 1) { pushes(development, run: run).count == 1 }
            let end = try #require(pushes(development, run: run).first)
            #expect(try JSONParser.parse(end.body)["aps"]?["event"] == "end")
            #expect(signer(of: end) == APNsFixtures.rotatedKeyID)
            // Before the rotation: the alert and the start once each, signed with the first key.
            let before = e2e.pushes(to: EndToEnd.deviceToken, run: run) + e2e.pushes(to: EndToEnd.startToken, run: run)
            #expect(before.count == 2)
            #expect(e2e.development.requests.filter { $0.body.contains(run) }.allSatisfy { signer(of: $0) == APNsFixtures.keyID })
            // Every request the new hosts saw was signed with the new key and accepted: none refused, none retried.
            #expect((development.requests + production.requests).allSatisfy {
                signer(of: $0) == APNsFixtures.rotatedKeyID && $0.answer == .accept
            })
            #expect(!relay.process.log.contains("InvalidProviderToken"))
        }

        /// "Rotate the Prefect credential", for a server behind basic auth: the server restarted with a new auth
        /// string (it takes one at a time, so the old one stops working at once), the relay restarted with it as
        /// PREFECT_API_AUTH_STRING. The relay resubscribes with it and the pause's end reaches the phone. A server of
        /// the test's own, since it is restarted.
        @Test func prefectCredentialRotatedWhileAPauseWaits() async throws {
            let server = PrefectServer()
            let e2e = try await EndToEnd(prefect: server)
            try e2e.startRelay()
            try e2e.registerDevice()
            let run = try e2e.runFlow("plain")
            try waitUntil("the alert and the start", timeout: 60) {
                !e2e.pushes(to: EndToEnd.deviceToken, run: run).isEmpty && !e2e.pushes(to: EndToEnd.startToken, run: run).isEmpty
            }
            try e2e.registerActivity(runID: run)

            e2e.stopRelay()
            let old = server.currentAuthorization
            try await server.rotate(to: "admin:rotated-\(getpid())")
            let refused = try TestHTTP(port: server.port).request("POST", "/api/flows/count", headers: ["Authorization": old], body: "{}")
            #expect(refused.status == 401, "the old credential still works: nothing was rotated")
            let before = e2e.development.requests.count
            let relay = try e2e.startRelay()  // with the new PREFECT_API_AUTH_STRING; waits until it is subscribed
            try holds("nothing sent again after the restart", for: 2) { e2e.development.requests.count == before }
            // The phone's calls go through Prefect's credential too: it now sends the new one, and is admitted.
            try e2e.registerActivity(runID: run)

            try e2e.cancel(run)
            try waitUntil("the end push", timeout: 30) { !e2e.pushes(to: EndToEnd.activityToken, run: run).isEmpty }
            e2e.stopFlows()
            try holds("one end push", for: 1) { e2e.pushes(to: EndToEnd.activityToken, run: run).count == 1 }
            #expect(activityProps(e2e.pushes(to: EndToEnd.activityToken, run: run)[0].payload)?["ended"] == "Cancelled")
            #expect(e2e.pushes(to: EndToEnd.deviceToken, run: run).count == 1)
            #expect(e2e.pushes(to: EndToEnd.startToken, run: run).count == 1)
            #expect(!relay.process.log.contains("events.auth_rejected"))
            e2e.stopRelay()
            await server.stop()
        }
    }
}

/// The requests `fake` received about `run` (its id in the body: the alert's data, a Live Activity's props), to
/// `token` when given.
private func pushes(_ fake: FakeAPNs, token: String? = nil, run: String) -> [FakeAPNs.Request] {
    fake.requests.filter { $0.body.contains(run) && (token == nil || $0.token == token) }
}

/// The key id of the provider token `request` carries, when its signature verifies against that key's public half
/// (the first key's or the rotated one's); nil for anything else.
private func signer(of request: FakeAPNs.Request) -> String? {
    guard let authorization = request.authorization, authorization.hasPrefix("bearer ") else { return nil }
    let token = String(authorization.dropFirst(7))
    let keys = [(APNsFixtures.keyID, APNsFixtures.publicKeyPath),
                (APNsFixtures.rotatedKeyID, APNsFixtures.path("AuthKey_ROTATED456.pub.pem"))]
    for (id, publicKey) in keys {
        if let parsed = JWTVerifier(publicKeyPath: publicKey).verify(token), parsed.header["kid"]?.string == id { return id }
    }
    return nil
}
