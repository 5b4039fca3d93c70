import Testing
@testable import RelayCore

@Suite struct RoutingTests {
    let router = Router(basePath: "/push")

    @Test(arguments: [
        ("GET", "/push/health", Route.health),
        ("HEAD", "/push/health", Route.health),
        ("GET", "/push/health?x=1", Route.health),
        ("GET", "/push/metrics", Route.metrics),
        ("POST", "/push/devices", Route.registerDevice),
        ("POST", "/push/devices/", Route.registerDevice),
        ("DELETE", "/push/devices/phone-1", Route.unregisterDevice(id: "phone-1")),
        ("DELETE", "/push/devices/a%20b", Route.unregisterDevice(id: "a b")),
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
    ])
    func refuses(_ method: String, _ path: String, _ status: Int) {
        guard case .failure(let error) = router.route(method: method, rawPath: path) else {
            Issue.record("\(method) \(path) should fail")
            return
        }
        #expect(error.status == status)
        if status == 405 { #expect(error.allow != nil) }
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
