import Testing
@testable import RelayCore

@Suite struct APNsOutcomeTests {
    private func fate(_ status: Int, _ reason: String?) -> DeliveryFate {
        APNsOutcome.rejected(APNsRejection(status: status, reason: reason.map(APNsReason.init(rawValue:)))).fate
    }

    @Test func reasonsRoundTripAndUnknownOnesAreKept() {
        #expect(APNsReason.known.count == 32)
        for reason in APNsReason.known { #expect(APNsReason(rawValue: reason.rawValue) == reason) }
        #expect(APNsReason(rawValue: "SomethingNew") == .unknown("SomethingNew"))
        #expect(APNsReason(rawValue: "SomethingNew").rawValue == "SomethingNew")
    }

    @Test func everyDocumentedAnswerIsClassified() {
        #expect(APNsOutcome.delivered(apnsID: "x").fate == .delivered)
        let table: [(Int, String, DeliveryFate)] = [
            (400, "BadDeviceToken", .wrongHost), (400, "DeviceTokenNotForTopic", .tokenGone),
            (400, "BadCollapseId", .refused), (400, "BadExpirationDate", .refused), (400, "BadMessageId", .refused),
            (400, "BadPriority", .refused), (400, "BadTopic", .refused), (400, "DuplicateHeaders", .refused),
            (400, "InvalidPushType", .refused), (400, "MissingDeviceToken", .refused), (400, "MissingTopic", .refused),
            (400, "PayloadEmpty", .refused), (400, "TopicDisallowed", .refused), (400, "IdleTimeout", .throttled),
            (403, "ExpiredProviderToken", .providerTokenRefused), (403, "InvalidProviderToken", .providerTokenRefused),
            (403, "MissingProviderToken", .providerTokenRefused), (403, "UnrelatedKeyIdInToken", .refused),
            (403, "BadEnvironmentKeyInToken", .refused), (403, "BadCertificate", .refused),
            (403, "BadCertificateEnvironment", .refused), (403, "Forbidden", .refused), (404, "BadPath", .refused),
            (405, "MethodNotAllowed", .refused), (410, "Unregistered", .tokenGone), (410, "ExpiredToken", .tokenGone),
            (400, "Unregistered", .tokenGone), (413, "PayloadTooLarge", .refused),
            (429, "TooManyRequests", .throttled), (429, "TooManyProviderTokenUpdates", .throttled),
            (500, "InternalServerError", .throttled), (503, "ServiceUnavailable", .throttled),
            (503, "Shutdown", .throttled), (410, "SomethingNew", .tokenGone), (400, "SomethingNew", .refused),
        ]
        for (status, reason, expected) in table {
            #expect(fate(status, reason) == expected, "\(status) \(reason)")
        }
        #expect(fate(502, nil) == .throttled)
        #expect(APNsOutcome.unreachable("refused").fate == .unreachable)
        #expect(APNsOutcome.timedOut.fate == .deadlinePassedAfterSending)
        #expect(APNsOutcome.connectionLost("reset").fate == .connectionLostAfterSending)
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
        #expect(Delivery.resolve(.alert, first: ok, stored: .production, second: nil, role: role).effect == .none)
        #expect(Delivery.resolve(.alert, first: bad, stored: .production, second: ok, role: role)
            == Delivery(outcome: ok, environment: .development, effect: .updateEnvironment(.development)))
        #expect(Delivery.resolve(.alert, first: bad, stored: .production, second: bad, role: role).effect == .dropDevice)
        #expect(Delivery.resolve(.alert, first: bad, stored: .production, second: bad, role: .startToken).effect == .dropStartToken)
        #expect(Delivery.resolve(.alert, first: bad, stored: .production, second: .timedOut, role: role).effect == .none)
        #expect(Delivery.resolve(.alert, first: gone, stored: .production, second: nil, role: .startToken).effect == .dropStartToken)
        #expect(Delivery.resolve(.alert, first: gone, stored: .production, second: nil, role: .activity).effect == .dropActivityToken)
        #expect(Delivery.resolve(.alert, first: .timedOut, stored: .production, second: nil, role: role).effect == .none)
    }
}
