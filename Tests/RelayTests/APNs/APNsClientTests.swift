import Synchronization
@testable import RelayCore
import Testing
@testable import Relay
@testable import FakeAPNs

/// The client against two real fake APNs servers over TLS + HTTP/2 on loopback.
@Suite struct APNsClientTests {
    @Test func manyConcurrentPushesShareOneConnection() async throws {
        let harness = try APNsHarness()
        defer { harness.stop() }
        let count = 300
        let outcomes = await withTaskGroup(of: APNsOutcome.self) { group in
            for n in 0..<count { group.addTask { await harness.client.send(APNsHarness.alert(APNsHarness.token(n))) } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(outcomes.allSatisfy { $0.isDelivered })
        let requests = harness.production.requests
        #expect(requests.count == count)
        #expect(harness.production.connectionCount == 1)
        #expect(Set(requests.map(\.connection)) == [1])
        #expect(Set(requests.map(\.stream)).count == count)
        #expect(Set(requests.map(\.token)).count == count)
        #expect(harness.development.requests.isEmpty)
        // One stream until the first 200 proves the token, then many at once.
        #expect(requests[0].openStreams == 1 && requests[1].stream > requests[0].stream)
        #expect(requests.map(\.openStreams).max()! > 10)
    }

    @Test func oneStreamUntilTheFirstSuccess() async throws {
        let harness = try APNsHarness()
        defer { harness.stop() }
        harness.production.script(APNsHarness.token(0), .slow(ms: 150, .accept))
        #expect(await harness.client.send(APNsHarness.alert(APNsHarness.token(0))).isDelivered == true)
        let first = try #require(harness.production.requests.first)
        // A fresh connection: the slow first push holds the only stream, so the rest wait for its 200.
        harness.production.dropConnections()
        try await Task.sleep(nanoseconds: 150_000_000)  // let the client see the hang-up before sending again
        harness.production.script(APNsHarness.token(100), .slow(ms: 150, .accept))
        async let lead = harness.client.send(APNsHarness.alert(APNsHarness.token(100)))
        try await eventually("the lead push is at the server", within: 30) {
            harness.production.requests(for: APNsHarness.token(100)).count == 1
        }
        let rest = await withTaskGroup(of: Bool.self) { group in
            for n in 101..<106 { group.addTask { await harness.client.send(APNsHarness.alert(APNsHarness.token(n))).isDelivered } }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(await lead.isDelivered && rest.allSatisfy { $0 })
        let second = harness.production.requests.filter { $0.connection == 2 }
        #expect(second.count == 6 && second[0].token == APNsHarness.token(100) && first.connection == 1)
        #expect(second.dropFirst().allSatisfy { $0.arrivedAt >= second[0].arrivedAt + 140 })
    }

    @Test func requestCarriesAppleHeadersAndBody() async throws {
        let harness = try APNsHarness()
        defer { harness.stop() }
        let push = APNsHarness.alert(APNsHarness.token(7), collapseID: "state-1", expiration: 1_900_000_000)
        let outcome = await harness.client.send(push)
        guard case .delivered(let apnsID) = outcome else { Issue.record("not delivered: \(outcome)"); return }
        #expect(apnsID?.count == 36)
        let request = try #require(harness.production.requests.first)
        #expect(request.method == "POST")
        #expect(request.path == "/3/device/" + APNsHarness.token(7))
        #expect(request.headers[":authority"] == "127.0.0.1:\(harness.production.port)")
        #expect(request.headers["apns-topic"] == "io.example.app")
        #expect(request.headers["apns-push-type"] == "alert")
        #expect(request.headers["apns-priority"] == "10")
        #expect(request.headers["apns-collapse-id"] == "state-1")
        #expect(request.headers["apns-expiration"] == "1900000000")
        #expect(request.authorization?.hasPrefix("bearer ") == true)
        #expect(request.body == push.payload)
    }

    @Test func wrongHostIsCorrectedNotDropped() async throws {
        let harness = try APNsHarness()
        defer { harness.stop() }
        let token = APNsHarness.token(1)
        harness.production.script(token, .reject(400, "BadDeviceToken"))
        let delivery = await harness.client.deliver(APNsHarness.alert(token), to: APNsHarness.device(token))
        #expect(delivery.effect == .updateEnvironment(.development))
        #expect(delivery.environment == .development)
        #expect(delivery.outcome.isDelivered)
        #expect(harness.production.requests(for: token).count == 1)
        #expect(harness.development.requests(for: token).count == 1)
    }

    @Test func badTokenOnBothHostsDropsTheDevice() async throws {
        let harness = try APNsHarness()
        defer { harness.stop() }
        let token = APNsHarness.token(2)
        harness.production.script(token, .reject(400, "BadDeviceToken"))
        harness.development.script(token, .reject(400, "BadDeviceToken"))
        let delivery = await harness.client.deliver(APNsHarness.alert(token), to: APNsHarness.device(token))
        #expect(delivery.effect == .dropDevice)
    }

    @Test func deadTokensAreDroppedByRole() async throws {
        let harness = try APNsHarness()
        defer { harness.stop() }
        let (alert, start, notForTopic, activity) = (APNsHarness.token(3), APNsHarness.token(4), APNsHarness.token(5),
                                                     APNsHarness.token(6))
        harness.production.script(alert, .gone(timestampMs: 1_700_000_000_000))
        harness.production.script(start, .reject(410, "Unregistered"))
        harness.production.script(notForTopic, .reject(400, "DeviceTokenNotForTopic"))
        harness.production.script(activity, .reject(410, "ExpiredToken"))
        let device = APNsHarness.device(alert, start: start)

        let gone = await harness.client.deliver(APNsHarness.alert(alert), to: device)
        #expect(gone.effect == .dropDevice)
        guard case .rejected(let rejection) = gone.outcome else { Issue.record("\(gone.outcome)"); return }
        #expect(rejection.status == 410 && rejection.reason == .unregistered && rejection.timestamp == 1_700_000_000_000)

        #expect(await harness.client.deliver(APNsHarness.alert(start), to: device).effect == .dropStartToken)
        #expect(await harness.client.deliver(APNsHarness.alert(notForTopic), to: APNsHarness.device(notForTopic)).effect
            == .dropDevice)
        #expect(await harness.client.deliver(APNsHarness.alert(activity), to: device).effect == .dropActivityToken)
        // None of these is retried or tried on the other host.
        #expect(harness.production.requests.count == 4)
        #expect(harness.development.requests.isEmpty)
    }

    @Test func refusedStreamsAfterGoAwayAreResentOnceOnAFreshConnection() async throws {
        let harness = try APNsHarness()
        defer { harness.stop() }
        harness.production.goAway(afterStreams: 7)
        let count = 60
        let outcomes = await withTaskGroup(of: APNsOutcome.self) { group in
            for n in 0..<count { group.addTask { await harness.client.send(APNsHarness.alert(APNsHarness.token(n))) } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(outcomes.allSatisfy { $0.isDelivered }, "\(outcomes.filter { !$0.isDelivered })")
        let requests = harness.production.requests
        // Nothing lost, nothing twice: every token was processed exactly once, across several connections.
        #expect(requests.count == count)
        #expect(Set(requests.map(\.token)).count == count)
        #expect(harness.production.connectionCount >= count / 7)
    }

    @Test func aStuckStreamTimesOutAndTheConnectionCarriesOn() async throws {
        let harness = try APNsHarness(requestTimeoutMs: 300)
        defer { harness.stop() }
        let stuck = APNsHarness.token(10)
        harness.production.script(stuck, .silent)
        // Warm up so the stream limit is lifted, then the stuck push runs beside a normal one.
        #expect(await harness.client.send(APNsHarness.alert(APNsHarness.token(11))).isDelivered)
        async let slow = harness.client.send(APNsHarness.alert(stuck))
        async let fine = harness.client.send(APNsHarness.alert(APNsHarness.token(12)))
        #expect(await slow == .timedOut)
        #expect(await fine.isDelivered)
        // Timed out means "maybe delivered": a test push is not sent again on an unknown fate (DeliveryTable).
        #expect(harness.production.requests(for: stuck).count == 1)
        #expect(await harness.client.send(APNsHarness.alert(APNsHarness.token(13))).isDelivered)
        #expect(harness.production.connectionCount == 1)
    }

    /// A push sent from the caller's thread onto an idle link (nothing in flight, the loop asleep for its long idle
    /// PING wait) still has its deadline kept: the send wakes the loop, which would otherwise sleep until the 45 s PING.
    @Test func aStuckPushSentOnAnIdleLinkStillTimesOut() async throws {
        let harness = try APNsHarness(requestTimeoutMs: 300)
        defer { harness.stop() }
        let stuck = APNsHarness.token(14)
        harness.production.script(stuck, .silent)
        #expect(await harness.client.send(APNsHarness.alert(APNsHarness.token(15))).isDelivered)
        try await Task.sleep(nanoseconds: 100_000_000)  // the loop is back in poll() on the idle link
        let started = SystemClock.monotonic()
        #expect(await harness.client.send(APNsHarness.alert(stuck)) == .timedOut)
        #expect(SystemClock.monotonic() - started < 10, "the deadline waited for the idle PING: the loop was not told of the new stream")
        #expect(harness.production.requests(for: stuck).count == 1)
        #expect(await harness.client.send(APNsHarness.alert(APNsHarness.token(16))).isDelivered)
    }

    @Test func slowAnswersWithinTheDeadlineArrive() async throws {
        let harness = try APNsHarness(requestTimeoutMs: 2_000)
        defer { harness.stop() }
        let token = APNsHarness.token(20)
        harness.production.script(token, .slow(ms: 200, .reject(400, "BadTopic")))
        let outcome = await harness.client.send(APNsHarness.alert(token))
        #expect(outcome == .rejected(APNsRejection(status: 400, reason: .badTopic, apnsID: outcome.apnsIDForTest)))
    }

    @Test func expiredProviderTokenIsResignedAndRetriedOnce() async throws {
        let harness = try APNsHarness()
        defer { harness.stop() }
        let token = APNsHarness.token(30)
        harness.production.script(token, .reject(403, "ExpiredProviderToken"), .accept)
        #expect(await harness.client.send(APNsHarness.alert(token)).isDelivered)
        let requests = harness.production.requests(for: token)
        #expect(requests.count == 2)
        #expect(requests[0].authorization != requests[1].authorization)
        // The retry goes out on a fresh connection: APNs may wedge one after a token error.
        #expect(requests[0].connection != requests[1].connection)
        // A second expiry in a row is retried once, not forever.
        let again = APNsHarness.token(31)
        harness.production.script(again, .reject(403, "ExpiredProviderToken"))
        let outcome = await harness.client.send(APNsHarness.alert(again))
        #expect(outcome.fate == .providerTokenRefused)
        #expect(harness.production.requests(for: again).count == 2)
    }

    @Test func invalidSignatureIsNotResignedWithinTwentyMinutes() async throws {
        let harness = try APNsHarness(keyPath: APNsFixtures.path("other-p256.p8"))
        defer { harness.stop() }
        let outcome = await harness.client.send(APNsHarness.alert(APNsHarness.token(40)))
        guard case .rejected(let rejection) = outcome else { Issue.record("\(outcome)"); return }
        #expect(rejection.status == 403 && rejection.reason == .invalidProviderToken)
        #expect(harness.production.requests.count == 1)
    }

    @Test func throttlingAndServerErrorsAreRetriedWithBoundedBackoff() async throws {
        let harness = try APNsHarness()
        defer { harness.stop() }
        let token = APNsHarness.token(50)
        harness.production.script(token, .reject(429, "TooManyRequests"), .reject(500, "InternalServerError"), .accept)
        #expect(await harness.client.send(APNsHarness.alert(token)).isDelivered)
        #expect(harness.production.requests(for: token).count == 3)
        let down = APNsHarness.token(51)
        harness.production.script(down, .reject(503, "ServiceUnavailable"))
        let outcome = await harness.client.send(APNsHarness.alert(down))
        #expect(outcome.status == 503)
        #expect(harness.production.requests(for: down).count == 4)  // first try + 3 retries
    }

    @Test func lowPeerStreamLimitIsRespected() async throws {
        let harness = try APNsHarness(maxConcurrentStreams: 2)
        defer { harness.stop() }
        let outcomes = await withTaskGroup(of: APNsOutcome.self) { group in
            for n in 0..<40 { group.addTask { await harness.client.send(APNsHarness.alert(APNsHarness.token(n))) } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(outcomes.allSatisfy { $0.isDelivered })
        #expect(harness.production.requests.count == 40)
        #expect(harness.production.requests.map(\.openStreams).max()! <= 2)
        #expect(harness.production.connectionCount == 1)
    }

    @Test func unreachableHostFailsFastAsRetryable() async throws {
        let port = 1  // nothing listens on tcpmux: connect is refused at once
        var options = APNsClient.Options()
        options.connection.link.reconnectDelayMs = 10
        options.retry = Backoff(initial: 0.01, maximum: 0.01, jitter: 0, limit: 1)
        let credentials = Config.APNsCredentials(key: .file(APNsFixtures.keyPath), keyID: APNsFixtures.keyID,
                                                 teamID: APNsFixtures.teamID)
        let client = try APNsClient(credentials: credentials,
                                    production: HTTPURL(tls: true, host: "127.0.0.1", port: port, path: ""),
                                    development: HTTPURL(tls: true, host: "127.0.0.1", port: port, path: ""),
                                    caFile: APNsFixtures.path("ca.pem"), options: options)
        defer { client.shutdown() }
        guard case .unreachable = await client.send(APNsHarness.alert(APNsHarness.token(60))) else {
            Issue.record("expected unreachable")
            return
        }
    }

    /// A fan-out to a host that refuses connections is answered (unreachable, each push) before the requests'
    /// deadline, two minutes off here, rather than left waiting for it. The test allows a minute, half the deadline:
    /// under load or ThreadSanitizer the process can stall for half a minute, and a tighter bound failed on that alone.
    @Test func fanOutToAnUnreachableHostIsAnsweredBeforeTheRequestDeadline() async throws {
        var options = APNsClient.Options()
        options.connection.link.reconnectDelayMs = 10
        options.connection.requestTimeoutMs = 120_000
        let credentials = Config.APNsCredentials(key: .file(APNsFixtures.keyPath), keyID: APNsFixtures.keyID,
                                                 teamID: APNsFixtures.teamID)
        let client = try APNsClient(credentials: credentials,
                                    production: HTTPURL(tls: true, host: "127.0.0.1", port: 1, path: ""),
                                    development: HTTPURL(tls: true, host: "127.0.0.1", port: 1, path: ""),
                                    caFile: APNsFixtures.path("ca.pem"), options: options)
        let tokens = (0..<3).map { APNsHarness.token(100 + $0) }
        let items = tokens.map { (push: APNsHarness.alert($0), device: APNsHarness.device($0)) }
        let answers = Mutex<[APNsOutcome]>([])
        let fan = Task { await client.fanOut(items, retry: .never) { _, delivery in answers.withLock { $0.append(delivery.outcome) } } }
        await poll(within: 60, every: 0.1) { answers.withLock { $0.count } >= items.count }
        let answered = answers.withLock { $0 }
        client.shutdown()  // ends a fan-out still waiting, so a failure here doesn't hang the suite
        _ = await fan.value
        #expect(answered.count == items.count, "the fan-out heard \(answered.count) of \(items.count) answers in 60 s")
        #expect(answered.allSatisfy { if case .unreachable = $0 { true } else { false } })
    }

    @Test func fanOutKeepsOrderAndEffects() async throws {
        let harness = try APNsHarness()
        defer { harness.stop() }
        let tokens = (70..<90).map(APNsHarness.token)
        harness.production.script(tokens[3], .reject(410, "Unregistered"))
        let items = tokens.map { (push: APNsHarness.alert($0), device: APNsHarness.device($0)) }
        let deliveries = await harness.client.deliverAll(items)
        #expect(deliveries.count == tokens.count)
        #expect(deliveries[3].effect == .dropDevice)
        #expect(deliveries.enumerated().allSatisfy { $0.offset == 3 || $0.element.outcome.isDelivered })
    }
}

extension APNsOutcome {
    /// The apns-id the fake assigned, so tests can compare whole outcomes.
    var apnsIDForTest: String? {
        if case .rejected(let rejection) = self { return rejection.apnsID }
        return nil
    }
}
