import Testing
@testable import RelayCore

@Suite struct APNsOutcomeTests {
    private func action(_ status: Int, _ reason: String?) -> APNsAction {
        APNsOutcome.rejected(APNsRejection(status: status, reason: reason.map(APNsReason.init(rawValue:)))).action
    }

    @Test func reasonsRoundTripAndUnknownOnesAreKept() {
        #expect(APNsReason.known.count == 32)
        for reason in APNsReason.known { #expect(APNsReason(rawValue: reason.rawValue) == reason) }
        #expect(APNsReason(rawValue: "SomethingNew") == .unknown("SomethingNew"))
        #expect(APNsReason(rawValue: "SomethingNew").rawValue == "SomethingNew")
    }

    @Test func everyDocumentedAnswerIsClassified() {
        #expect(APNsOutcome.delivered(apnsID: "x").action == .delivered)
        let table: [(Int, String, APNsAction)] = [
            (400, "BadDeviceToken", .tryOtherHost), (400, "DeviceTokenNotForTopic", .dropToken),
            (400, "BadCollapseId", .fail), (400, "BadExpirationDate", .fail), (400, "BadMessageId", .fail),
            (400, "BadPriority", .fail), (400, "BadTopic", .fail), (400, "DuplicateHeaders", .fail),
            (400, "InvalidPushType", .fail), (400, "MissingDeviceToken", .fail), (400, "MissingTopic", .fail),
            (400, "PayloadEmpty", .fail), (400, "TopicDisallowed", .fail), (400, "IdleTimeout", .retryLater),
            (403, "ExpiredProviderToken", .renewProviderToken), (403, "InvalidProviderToken", .renewProviderToken),
            (403, "MissingProviderToken", .renewProviderToken), (403, "UnrelatedKeyIdInToken", .fail),
            (403, "BadEnvironmentKeyInToken", .fail), (403, "BadCertificate", .fail),
            (403, "BadCertificateEnvironment", .fail), (403, "Forbidden", .fail), (404, "BadPath", .fail),
            (405, "MethodNotAllowed", .fail), (410, "Unregistered", .dropToken), (410, "ExpiredToken", .dropToken),
            (400, "Unregistered", .dropToken), (413, "PayloadTooLarge", .fail),
            (429, "TooManyRequests", .retryLater), (429, "TooManyProviderTokenUpdates", .retryLater),
            (500, "InternalServerError", .retryLater), (503, "ServiceUnavailable", .retryLater),
            (503, "Shutdown", .retryLater), (410, "SomethingNew", .dropToken), (400, "SomethingNew", .fail),
        ]
        for (status, reason, expected) in table {
            #expect(action(status, reason) == expected, "\(status) \(reason)")
        }
        #expect(action(502, nil) == .retryLater)
        #expect(APNsOutcome.unreachable("refused").action == .retryLater)
        #expect(APNsOutcome.timedOut.action == .fail)
        #expect(APNsOutcome.connectionLost("reset").action == .fail)
    }

    @Test func pushHeadersAndPath() {
        let push = Push(kind: .liveactivity, deviceToken: "ABCDEF", environment: .production,
                        topic: "io.example.push-type.liveactivity", priority: 10, collapseID: "s1", expiration: 99,
                        payload: "{}")
        #expect(push.path == "/3/device/abcdef")
        var mixed = push
        mixed.deviceToken = "00aBcD9fZz"
        #expect(mixed.path == "/3/device/00abcd9fzz")
        mixed.deviceToken = ""
        #expect(mixed.path == "/3/device/")
        #expect(push.headers.map { "\($0.name)=\($0.value)" } == [
            "apns-push-type=liveactivity", "apns-topic=io.example.push-type.liveactivity", "apns-priority=10",
            "apns-collapse-id=s1", "apns-expiration=99", "content-type=application/json",
        ])
    }

    @Test func deliveryRules() {
        let device = Device(id: "d", token: "aa", startToken: "bb", environment: .production, serverID: "s",
                            createdAt: 0, updatedAt: 0)
        let bad = APNsOutcome.rejected(APNsRejection(status: 400, reason: .badDeviceToken))
        let gone = APNsOutcome.rejected(APNsRejection(status: 410, reason: .unregistered))
        let ok = APNsOutcome.delivered(apnsID: nil)
        let role = TokenRole(token: "AA", device: device)
        #expect(role == .device)
        #expect(TokenRole(token: "bb", device: device) == .startToken)
        #expect(TokenRole(token: "cc", device: device) == .activity)
        #expect(Delivery.resolve(first: ok, stored: .production, second: nil, role: role).effect == .none)
        #expect(Delivery.resolve(first: bad, stored: .production, second: ok, role: role)
            == Delivery(outcome: ok, environment: .development, effect: .updateEnvironment(.development)))
        #expect(Delivery.resolve(first: bad, stored: .production, second: bad, role: role).effect == .dropDevice)
        #expect(Delivery.resolve(first: bad, stored: .production, second: bad, role: .startToken).effect == .dropStartToken)
        #expect(Delivery.resolve(first: bad, stored: .production, second: .timedOut, role: role).effect == .none)
        #expect(Delivery.resolve(first: gone, stored: .production, second: nil, role: .startToken).effect == .dropStartToken)
        #expect(Delivery.resolve(first: gone, stored: .production, second: nil, role: .activity).effect == .dropActivityToken)
        #expect(Delivery.resolve(first: .timedOut, stored: .production, second: nil, role: role).effect == .none)
    }
}
