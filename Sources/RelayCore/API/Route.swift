/// The HTTP API's routes (README "API"), matched from a method and a raw path under `BASE_PATH`.
public enum Route: Sendable, Equatable {
    case health
    /// Liveness: the process serves and its actor answers; says nothing about Prefect, APNs or the store.
    case live
    case metrics
    case registerDevice
    case unregisterDevice(id: String)
    case putActivity(deviceID: String, runID: String)
    case testPush(deviceID: String)

    /// Whether the route reads a JSON body (and so needs Content-Length and a JSON content type).
    public var takesBody: Bool {
        switch self {
        case .registerDevice, .putActivity: return true
        default: return false
        }
    }

    public var needsCredential: Bool { self != .health && self != .live }

    /// A short, bounded name for logs and metrics.
    public var name: String {
        switch self {
        case .health: return "health"
        case .live: return "live"
        case .metrics: return "metrics"
        case .registerDevice: return "register"
        case .unregisterDevice: return "unregister"
        case .putActivity: return "activity"
        case .testPush: return "test"
        }
    }
}

/// Matches requests to routes. Pure: no sockets, so every path rule is unit-tested.
public struct Router: Sendable {
    public let basePath: String

    public init(basePath: String) { self.basePath = basePath }

    /// The route for `method` and `rawPath` (query string allowed), or the API error to answer with
    /// (404 for an unknown path, 405 for a known path with the wrong method, 400 for a malformed escape).
    ///
    /// The path is matched as sent, never normalised: the base path and the fixed segments compare raw, and only
    /// an id segment is percent-decoded, once (`%2525` is the id `%25`). So a trailing slash, an empty segment, a
    /// dot segment (`.`, `..`, `%2e`) or an encoded slash can't reach another device: they are 404, or name an id
    /// that isn't the one they spell around (`x%2Fy` is the id `x/y`, never two segments).
    public func route(method: String, rawPath: String) -> Result<Route, APIError> {
        var path = Substring(rawPath)
        if let query = path.firstIndex(of: "?") { path = path[..<query] }
        guard path.hasPrefix(basePath) else { return .failure(notFound(path)) }
        path = path.dropFirst(basePath.count)
        guard path.hasPrefix("/") else { return .failure(notFound(rawPath)) }
        let segments = path.dropFirst().split(separator: "/", omittingEmptySubsequences: false)
        // Empty segments ("//", a trailing "/") and dot segments are never a route.
        if segments.contains(where: { $0.isEmpty || $0 == "." || $0 == ".." }) { return .failure(notFound(rawPath)) }

        func only(_ allowed: String, _ route: Route) -> Result<Route, APIError> {
            method == allowed || (allowed == "GET" && method == "HEAD")
                ? .success(route) : .failure(.methodNotAllowed(method: method, allowed: allowed))
        }
        func id(_ raw: Substring, _ field: String) -> Result<String, APIError> {
            guard let decoded = percentDecode(raw) else {
                return .failure(.badRequest("the path has a malformed %-escape or is not UTF-8"))
            }
            if decoded == "." || decoded == ".." { return .failure(notFound(rawPath)) }
            guard let valid = Validation.identifier(decoded) else { return .failure(.badRequest(Validation.idRule(field))) }
            return .success(valid)
        }

        switch segments.count {
        case 1 where segments[0] == "health": return only("GET", .health)
        case 2 where segments[0] == "health" && segments[1] == "live": return only("GET", .live)
        case 1 where segments[0] == "metrics": return only("GET", .metrics)
        case 1 where segments[0] == "devices": return only("POST", .registerDevice)
        case 2 where segments[0] == "devices":
            return id(segments[1], "id").flatMap { only("DELETE", .unregisterDevice(id: $0)) }
        case 3 where segments[0] == "devices" && segments[2] == "test":
            return id(segments[1], "id").flatMap { only("POST", .testPush(deviceID: $0)) }
        case 4 where segments[0] == "devices" && segments[2] == "activities":
            return id(segments[1], "id").flatMap { device in
                id(segments[3], "run_id").flatMap { only("PUT", .putActivity(deviceID: device, runID: $0)) }
            }
        default:
            return .failure(notFound(rawPath))
        }
    }

    private func notFound(_ path: some StringProtocol) -> APIError { .notFound("no such route: \(clip(path))") }

    private func clip(_ s: some StringProtocol) -> String {
        let printable = s.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7f }
        return String(String.UnicodeScalarView(printable.prefix(100)))
    }

    /// Percent-decodes one path segment, once; nil when an escape is malformed or the bytes aren't UTF-8.
    func percentDecode(_ segment: Substring) -> String? {
        guard segment.contains("%") else { return String(segment) }
        var bytes: [UInt8] = []
        var iterator = segment.utf8.makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%") {
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                    return nil
                }
                bytes.append(high << 4 | low)
            } else {
                bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
