/// Validation of API input (README "API"). Every failure names the field and the rule, so a caller can fix it.
public enum Validation {
    public static let maxBody = 64 * 1024

    static func idRule(_ field: String) -> String { "\(field) must be 1-200 printable characters (no control, format, private-use or unassigned characters)" }

    /// 1–200 printable characters. Refused: control (Cc), format (Cf: zero-width space, bidi overrides, …),
    /// surrogate (Cs), private-use (Co), unassigned (Cn, which includes the noncharacters U+FFFE and U+FFFF),
    /// line and paragraph separators (Zl, Zp). An id is shown in logs and kept in the store: nothing in it may
    /// hide, reorder or break a line.
    public static func identifier(_ s: String) -> String? {
        let count = s.unicodeScalars.count
        guard count >= 1, count <= 200 else { return nil }
        guard s.unicodeScalars.allSatisfy(isPrintable) else { return nil }
        return s
    }

    /// Whether one scalar may appear in an id (see `identifier`).
    static func isPrintable(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .format, .surrogate, .privateUse, .unassigned, .lineSeparator, .paragraphSeparator:
            return false
        default:
            return !scalar.properties.isNoncharacterCodePoint
        }
    }

    /// Hex string of even length, 16–400 characters; stored lowercased as APNs expects.
    public static func token(_ s: String) -> String? {
        let count = s.utf8.count
        guard count >= 16, count <= 400, count % 2 == 0 else { return nil }
        guard s.utf8.allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) || ($0 >= 65 && $0 <= 70) })
        else { return nil }
        return s.lowercased()
    }

    /// The body of `POST /devices`: `{"id","token","start_token"?,"environment","server_id"}`. Unknown fields are ignored.
    public static func registration(_ body: JSONValue) -> Result<DeviceRegistration, APIError> {
        guard case .object = body else { return .failure(.badRequest("the body must be a JSON object")) }
        guard let id = requiredString(body, "id") else { return .failure(missing(body, "id", "a string")) }
        guard let id = identifier(id) else { return .failure(.badRequest(idRule("id"))) }
        guard let token = requiredString(body, "token") else {
            return .failure(missing(body, "token", "a hex string"))
        }
        guard let token = self.token(token) else {
            return .failure(.badRequest("token must be a hex string of even length, 16-400 characters"))
        }
        var startToken: String?
        switch body["start_token"] {
        case nil, .null?: startToken = nil
        case .string(let s)?:
            guard let t = self.token(s) else {
                return .failure(.badRequest("start_token must be a hex string of even length, 16-400 characters"))
            }
            startToken = t
        default: return .failure(.badRequest("start_token must be a hex string or omitted"))
        }
        guard let env = requiredString(body, "environment") else {
            return .failure(missing(body, "environment", "\"development\" or \"production\""))
        }
        guard let environment = APNsEnvironment(rawValue: env) else {
            return .failure(.badRequest("environment must be \"development\" or \"production\" (the app's aps-environment)"))
        }
        guard let server = requiredString(body, "server_id") else {
            return .failure(missing(body, "server_id", "a string"))
        }
        guard let serverID = identifier(server) else { return .failure(.badRequest(idRule("server_id"))) }
        return .success(DeviceRegistration(id: id, token: token, startToken: startToken, environment: environment,
                                           serverID: serverID))
    }

    /// The body of `PUT /devices/{id}/activities/{run_id}`: `{"token"}`.
    public static func activityToken(_ body: JSONValue) -> Result<String, APIError> {
        guard case .object = body else { return .failure(.badRequest("the body must be a JSON object")) }
        guard let raw = requiredString(body, "token") else { return .failure(missing(body, "token", "a hex string")) }
        guard let token = token(raw) else {
            return .failure(.badRequest("token must be a hex string of even length, 16-400 characters"))
        }
        return .success(token)
    }

    /// Whether a Content-Type names JSON (`application/json`, optionally with parameters, or `+json`).
    public static func isJSONContentType(_ value: String?) -> Bool {
        guard let value else { return false }
        let media = value.split(separator: ";", maxSplits: 1).first.map { $0.trimmingCharacters() } ?? ""
        let lower = media.lowercased()
        return lower == "application/json" || (lower.hasPrefix("application/") && lower.hasSuffix("+json"))
    }

    private static func requiredString(_ body: JSONValue, _ key: String) -> String? { body[key]?.string }

    private static func missing(_ body: JSONValue, _ key: String, _ expected: String) -> APIError {
        body[key] == nil || body[key] == .null
            ? .badRequest("\(key) is required (\(expected))")
            : .badRequest("\(key) must be \(expected)")
    }
}

extension Substring {
    func trimmingCharacters() -> String { String(self).trimmingWhitespace() }
}
