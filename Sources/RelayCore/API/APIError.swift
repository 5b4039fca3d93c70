/// An API answer that is an error: the status and a message that says what is wrong and how to fix it.
/// Rendered as `{"error": "..."}` (README "API" lists the statuses).
public struct APIError: Error, Sendable, Equatable {
    public let status: Int
    public let message: String
    public var allow: String? = nil

    public init(status: Int, message: String, allow: String? = nil) {
        self.status = status
        self.message = message
        self.allow = allow
    }

    public static func badRequest(_ m: String) -> APIError { APIError(status: 400, message: m) }
    public static func notFound(_ m: String) -> APIError { APIError(status: 404, message: m) }
    public static func unauthorized(_ m: String) -> APIError { APIError(status: 401, message: m) }
    public static func unavailable(_ m: String) -> APIError { APIError(status: 503, message: m) }
    public static func methodNotAllowed(method: String, allowed: String) -> APIError {
        APIError(status: 405, message: "method \(HTTPFramer.shown(method)) is not allowed here; use \(allowed)",
                 allow: allowed)
    }

    public var response: APIResponse {
        var response = APIResponse(status: status, json: ["error": .string(message)])
        if let allow { response.headers.append(("allow", allow)) }
        return response
    }
}

/// What the API answers: a status, an optional JSON body, extra headers. Rendering to bytes happens at the edge.
public struct APIResponse: Sendable {
    public var status: Int
    public var body: String?
    public var contentType: String
    public var headers: [(String, String)] = []

    public init(status: Int, json: JSONValue?) {
        self.status = status
        self.body = json?.encoded()
        self.contentType = "application/json"
    }

    public init(status: Int, text: String, contentType: String) {
        self.status = status
        self.body = text
        self.contentType = contentType
    }

    public static let noContent = APIResponse(status: 204, json: nil)
}

extension APIResponse: Equatable {
    public static func == (a: APIResponse, b: APIResponse) -> Bool {
        a.status == b.status && a.body == b.body && a.contentType == b.contentType
            && a.headers.map(\.0) == b.headers.map(\.0) && a.headers.map(\.1) == b.headers.map(\.1)
    }
}
