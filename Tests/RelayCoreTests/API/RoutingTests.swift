import Testing
@testable import RelayCore

@Suite struct RoutingTests {
    let router = Router(basePath: "/push")

    @Test(arguments: [
        ("GET", "/push/health", Route.health),
        ("HEAD", "/push/health", Route.health),
        ("GET", "/push/health?x=1", Route.health),
        ("GET", "/push/health/live", Route.live),
        ("HEAD", "/push/health/live", Route.live),
        ("GET", "/push/metrics", Route.metrics),
        ("POST", "/push/devices", Route.registerDevice),
        ("DELETE", "/push/devices/phone-1", Route.unregisterDevice(id: "phone-1")),
        ("DELETE", "/push/devices/a%20b", Route.unregisterDevice(id: "a b")),
        ("DELETE", "/push/devices/100%25", Route.unregisterDevice(id: "100%")),
        ("DELETE", "/push/devices/%2525", Route.unregisterDevice(id: "%25")),  // decoded once
        ("DELETE", "/push/devices/x%2Fy", Route.unregisterDevice(id: "x/y")),  // an encoded slash is data
        ("DELETE", "/push/devices/%2e%2e.", Route.unregisterDevice(id: "...")),
        ("DELETE", "/push/devices/caf%C3%A9", Route.unregisterDevice(id: "café")),
        ("PUT", "/push/devices/p/activities/run-9", Route.putActivity(deviceID: "p", runID: "run-9")),
        ("POST", "/push/devices/p/test", Route.testPush(deviceID: "p")),
    ])
    func matches(_ method: String, _ path: String, _ route: Route) throws {
        #expect(try router.route(method: method, rawPath: path).get() == route)
    }

    @Test(arguments: [
        ("GET", "/health", 404), ("GET", "/push", 404), ("GET", "/pushx/health", 404), ("GET", "/push/nope", 404),
        ("GET", "/push/devices/a/b", 404), ("POST", "/push/health", 405), ("GET", "/push/devices", 405),
        ("PATCH", "/push/devices/x", 405), ("GET", "/push/devices/p/activities/r", 405), ("GET", "/push/devices/p/test", 405),
        ("DELETE", "/push/devices/%zz", 400), ("DELETE", "/push/devices/%01", 400),
        ("POST", "/push/health/live", 405), ("GET", "/push/health/ready", 404), ("GET", "/push/live", 404),
    ])
    func refuses(_ method: String, _ path: String, _ status: Int) {
        guard case .failure(let error) = router.route(method: method, rawPath: path) else {
            Issue.record("\(method) \(path) should fail")
            return
        }
        #expect(error.status == status)
        if status == 405 { #expect(error.allow != nil) }
    }

    /// Path tricks that once reached another device (issue 11): each is 404 or names a different id, never `p`.
    @Test(arguments: [
        ("DELETE", "/push/devices/p/"), ("DELETE", "/push/devices/x/../p"), ("DELETE", "/push/devices/%2e/p"),
        ("DELETE", "/push/devices/./p"), ("DELETE", "/push/devices//p"), ("POST", "/push/devices/p//test"),
        ("POST", "/push/devices/p/test/"), ("POST", "/push//devices"), ("POST", "/push/devices/"),
        ("DELETE", "/push/devices/%2e"), ("DELETE", "/push/devices/%2E%2E"), ("DELETE", "/push/devices/.."),
        ("GET", "/push/health/"), ("GET", "/push/./health"), ("GET", "/push/he%61lth"), ("GET", "/push%2Fhealth"),
        ("GET", "//push/health"), ("PUT", "/push/devices/p/activities/r/"), ("PUT", "/push/devices/p/activities//r"),
    ])
    func pathTricksAre404(_ method: String, _ path: String) {
        guard case .failure(let error) = router.route(method: method, rawPath: path) else {
            Issue.record("\(method) \(path) should be 404")
            return
        }
        #expect(error.status == 404)
    }

    @Test(arguments: ["/push/devices/p%2F", "/push/devices/p%2f", "/push/devices/%2Fp", "/push/devices/p%2F..%2Fq"])
    func encodedSlashNeverSplits(_ path: String) throws {
        let route = try router.route(method: "DELETE", rawPath: path).get()
        #expect(route != .unregisterDevice(id: "p"))
        guard case .unregisterDevice(let id) = route else { Issue.record("\(route)"); return }
        #expect(id.contains("/"))
    }

    /// Ids that are not printable, in the path: 400, never stored or looked up.
    @Test(arguments: ["%E2%80%AE", "a%E2%80%8Bb", "%EF%BF%BF", "%EF%BF%BE", "%E2%80%A8", "%E2%80%A9", "%EE%80%80",
                      "%7F", "%C2%85", "%0A", "%00", "%ED%A0%80", "%FF", "%C0%AF"])
    func unprintableIDsInPath(_ escaped: String) {
        guard case .failure(let error) = router.route(method: "DELETE", rawPath: "/push/devices/\(escaped)") else {
            Issue.record("\(escaped) should be refused")
            return
        }
        #expect(error.status == 400)
    }

    /// Only the two health routes are open without a credential.
    @Test func credentialRule() {
        #expect(!Route.health.needsCredential && !Route.live.needsCredential)
        #expect(Route.metrics.needsCredential && Route.registerDevice.needsCredential)
    }

    @Test func emptyBasePath() throws {
        #expect(try Router(basePath: "").route(method: "GET", rawPath: "/health").get() == .health)
    }

    @Test func idLength() throws {
        let long = String(repeating: "x", count: 201)
        #expect(throws: APIError.self) { try router.route(method: "DELETE", rawPath: "/push/devices/\(long)").get() }
        #expect(try router.route(method: "DELETE", rawPath: "/push/devices/\(long.dropLast())").get()
            == .unregisterDevice(id: String(long.dropLast())))
    }
}

/// A one-scalar string built at run time (the compiler refuses some noncharacters in literals).
private func scalar(_ value: UInt32) -> String { String(Character(Unicode.Scalar(value)!)) }

@Suite struct IdentifierTests {
    @Test(arguments: [
        "\u{202E}", "a\u{200B}b", "\u{FEFF}x", "\u{2066}", scalar(0xFFFF), scalar(0xFFFE), scalar(0xFDD0), scalar(0x10FFFF),
        "\u{2028}", "\u{2029}", "\u{E000}", "\u{F0000}", "\u{0378}", "\u{0}", "\u{1B}[31m", "\u{7F}", "\u{85}", "👨‍👩‍👧",  // ZWJ is a format character
        "x\ny", "tab\there", "\u{E0001}", "\u{00AD}",
    ])
    func refused(_ id: String) {
        #expect(Validation.identifier(id) == nil)
        let body: JSONValue = ["id": .string(id), "token": .string(String(repeating: "ab", count: 32)),
                               "environment": "production", "server_id": "srv"]
        #expect(throws: APIError.self) { try Validation.registration(body).get() }
    }

    @Test(arguments: ["phone-1", "a b", "café", "👩🏽", "日本語", "100%", "x/y", "e\u{301}", "ÅÄÖ", "\u{1F600}"])
    func accepted(_ id: String) {
        #expect(Validation.identifier(id) == id)
    }
}

@Suite struct ValidationTests {
    let token = String(repeating: "ab", count: 32)

    func registration(_ members: [String: JSONValue]) -> Result<DeviceRegistration, APIError> {
        Validation.registration(.object(members))
    }

    var good: [String: JSONValue] {
        ["id": "phone-1", "token": .string(token), "environment": "production", "server_id": "srv"]
    }

    @Test func acceptsAGoodRegistration() throws {
        var body = good
        body["start_token"] = .string(token.uppercased())
        body["extra"] = ["ignored": true]
        let r = try registration(body).get()
        #expect(r == DeviceRegistration(id: "phone-1", token: token, startToken: token, environment: .production,
                                        serverID: "srv"))
        body["start_token"] = .null
        #expect(try registration(body).get().startToken == nil)
    }

    @Test(arguments: [
        ("id", JSONValue.null, "id is required"), ("id", 5, "id must be"), ("id", "", "id must be"),
        ("token", "xyz", "token must be"), ("token", "abc", "token must be"), ("token", "abcd", "token must be"),
        ("token", .string(String(repeating: "a", count: 402)), "token must be"), ("token", [1], "token must be"),
        ("start_token", "zz", "start_token must be"), ("start_token", 1, "start_token must be"),
        ("environment", "staging", "environment must be"), ("environment", .null, "environment is required"),
        ("server_id", .string(String(repeating: "s", count: 201)), "server_id must be"), ("server_id", "a\u{7}b", "server_id must be"),
    ] as [(String, JSONValue, String)])
    func refusesBadFields(_ field: String, _ value: JSONValue, _ message: String) {
        var body = good
        body[field] = value == .null ? nil : value
        guard case .failure(let error) = registration(body) else { Issue.record("\(field)=\(value) accepted"); return }
        #expect(error.status == 400)
        #expect(error.message.hasPrefix(message))
    }

    @Test func refusesNonObjects() {
        for body: JSONValue in [[1, 2], "x", 3, .null] {
            #expect(throws: APIError.self) { try Validation.registration(body).get() }
            #expect(throws: APIError.self) { try Validation.activityToken(body).get() }
        }
    }

    @Test func activityToken() throws {
        #expect(try Validation.activityToken(["token": .string(token)]).get() == token)
        #expect(throws: APIError.self) { try Validation.activityToken(["token": "nothex!"]).get() }
    }

    @Test func contentTypes() {
        #expect(Validation.isJSONContentType("application/json"))
        #expect(Validation.isJSONContentType("Application/JSON; charset=utf-8"))
        #expect(Validation.isJSONContentType("application/merge-patch+json"))
        #expect(!Validation.isJSONContentType("text/plain"))
        #expect(!Validation.isJSONContentType(nil))
    }
}
