/// The HTTP/1.1 request side of the API, byte by byte (RFC 9112), so every answer is the relay's own: a bad
/// request line is 400, an unknown method 405, another HTTP version 505, too many or too big headers 431, and
/// never a closed connection without a status. Pure: the server feeds it what the socket read and writes what
/// it returns; the fuzz harness feeds it anything.
///
/// One request at a time: after `.request`, the caller answers before asking for the next frame (pipelined bytes
/// wait in the buffer). After a frame whose `close` is true, the caller writes it and closes.
public struct HTTPFramer: Sendable {
    public struct Limits: Sendable {
        /// Request line (method, target, version).
        public var requestLine = 8 * 1024
        /// The whole head: request line plus header lines.
        public var head = 16 * 1024
        public var headerCount = 100
        public var body = Validation.maxBody

        public init() {}
    }

    /// A framed request: routed, with its body read.
    public struct Request: Sendable, Equatable {
        public var method: String
        public var target: String
        public var route: Route
        public var authorization: String?
        public var body: [UInt8]
        /// Whether the connection stays open after the answer (HTTP/1.1 without `Connection: close`).
        public var keepAlive: Bool
        /// Every `X-Forwarded-For` line, in order; only a trusted proxy's are read (`TrustedProxies.client`).
        public var forwardedFor: [String] = []
        public var isHead: Bool { method == "HEAD" }
    }

    public enum Frame: Sendable, Equatable {
        /// A complete request to dispatch.
        case request(Request)
        /// An answer the framer chose itself (a malformed request, a route error, a body over the limit), and
        /// whether the connection must close after it (when what follows on the wire can't be trusted).
        case reject(APIResponse, close: Bool, head: Bool)
        /// `100 Continue`: the client asked before sending its body (`Expect: 100-continue`).
        case proceed
    }

    /// Methods the API knows; any other is 405.
    public static let knownMethods: Set<String> = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]

    public let limits: Limits
    private let router: Router
    private var buffer: [UInt8] = []
    /// Where the next unread byte is (bytes before it are consumed and dropped lazily).
    private var start = 0
    private var pendingBody: (request: Request, length: Int, discard: Bool)?
    private var failed = false
    /// Where the search for the end of the head resumes (so a byte-at-a-time client costs linear time).
    private var scanned = 0

    public init(router: Router, limits: Limits = Limits()) {
        self.router = router
        self.limits = limits
    }

    /// Bytes read from the socket.
    public mutating func append(_ bytes: some Collection<UInt8>) {
        if start > 0 && start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
            scanned = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// Bytes received and not yet framed.
    public var buffered: Int { buffer.count - start }

    /// Whether the head is done and the body is being read.
    public var isReadingBody: Bool { pendingBody != nil }

    /// The next frame, or nil until more bytes arrive.
    public mutating func next() -> Frame? {
        if failed { return nil }
        if let pending = pendingBody { return body(pending) }
        // Empty lines before a request line are ignored (RFC 9112 §2.2).
        while buffered >= 2 && buffer[start] == 13 && buffer[start + 1] == 10 { start += 2 }
        while buffered >= 1 && buffer[start] == 10 { start += 1 }
        scanned = max(scanned, start)
        guard let headEnd = findHeadEnd() else {
            if buffered > limits.head { return fail(431, "the request head is over \(limits.head / 1024) KiB") }
            if firstLineEnd() == nil && buffered > limits.requestLine {
                return fail(414, "the request line is over \(limits.requestLine / 1024) KiB")
            }
            return nil
        }
        if headEnd.lowerBound - start > limits.head {
            return fail(431, "the request head is over \(limits.head / 1024) KiB")
        }
        let head = Array(buffer[start..<headEnd.lowerBound])
        start = headEnd.upperBound
        scanned = start
        return frame(head)
    }

    // MARK: - Head

    /// A part of the head that is wrong: the status to answer and why (the connection then closes).
    private struct Refusal: Error {
        let status: Int
        let message: String
        init(_ status: Int, _ message: String) {
            self.status = status
            self.message = message
        }
    }

    private mutating func frame(_ head: [UInt8]) -> Frame? {
        var lines = split(head)
        let requestLine = lines.removeFirst()
        let method: String, path: String, keepAlive: Bool, headers: Headers
        do {
            let start = try parseRequestLine(requestLine, headerLines: lines.count)
            (method, path) = (start.method, start.path)
            headers = try parseHeaders(lines)
            keepAlive = HTTPFramer.keepsAlive(headers, minor: start.version.minor)
        } catch {
            return fail(error.status, error.message)
        }
        if headers.all("transfer-encoding").count > 0 {
            // No chunked bodies: the API's bodies are small JSON with a Content-Length.
            return reject(APIError(status: 411, message: "send the JSON body with a Content-Length header"), close: true,
                          method: method)
        }
        let contentLength: Int?
        do { contentLength = try HTTPFramer.contentLength(headers) } catch { return fail(error.status, error.message) }
        let length = contentLength ?? 0
        let route: Route
        switch admit(method: method, path: path, headers: headers, contentLength: contentLength) {
        case .failure(let error):
            // Close after any refusal with a body on the wire: don't read a body that won't be used.
            return reject(error.error, close: error.close || length > 0 || !keepAlive, method: method)
        case .success(let matched):
            route = matched
        }
        let authorization = headers.all("authorization").first.map { String(decoding: $0, as: UTF8.self) }
        let request = Request(method: method, target: path, route: route, authorization: authorization, body: [],
                              keepAlive: keepAlive,
                              forwardedFor: headers.all("x-forwarded-for").map { String(decoding: $0, as: UTF8.self) })
        if length == 0 { return .request(request) }
        pendingBody = (request, length, !route.takesBody)
        if headers.text("expect")?.lowercased() == "100-continue" { return .proceed }
        return body(pendingBody!)
    }

    /// `METHOD /path HTTP/1.x`, within the limits on the line and on the number of header lines.
    private func parseRequestLine(_ line: ArraySlice<UInt8>, headerLines: Int) throws(Refusal)
        -> (method: String, path: String, version: (major: Int, minor: Int))
    {
        if line.count > limits.requestLine { throw Refusal(414, "the request line is over \(limits.requestLine / 1024) KiB") }
        if headerLines > limits.headerCount { throw Refusal(431, "more than \(limits.headerCount) header lines") }
        let parts = line.split(separator: 32, omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, parts[0].allSatisfy(HTTPSyntax.isTokenByte) else {
            throw Refusal(400, "the request line must be METHOD /path HTTP/1.1")
        }
        guard let version = HTTPFramer.version(parts[2]) else {
            throw Refusal(400, "the request line must end in HTTP/1.1")
        }
        guard version.major == 1 else {
            throw Refusal(505, "HTTP/\(version.major).\(version.minor) is not supported; use HTTP/1.1")
        }
        let target = parts[1]
        guard target.first == UInt8(ascii: "/"), target.allSatisfy({ $0 > 32 && $0 < 127 }) else {
            throw Refusal(400, "the request target must be a path (/...) of visible ASCII characters")
        }
        return (String(decoding: parts[0], as: UTF8.self), String(decoding: target, as: UTF8.self), version)
    }

    /// `name: value` lines: token names, no folding, no control characters in values but tab.
    private func parseHeaders(_ lines: [ArraySlice<UInt8>]) throws(Refusal) -> Headers {
        var headers = Headers()
        for line in lines {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex,
                  line[..<colon].allSatisfy(HTTPSyntax.isTokenByte) else {
                throw Refusal(400, "a header line is malformed (name: value, no folding)")
            }
            var value = line[(colon + 1)...]
            while let first = value.first, first == 32 || first == 9 { value = value.dropFirst() }
            while let last = value.last, last == 32 || last == 9 { value = value.dropLast() }
            // NUL, CR and LF alone are smuggling tools.
            guard value.allSatisfy({ $0 == 9 || ($0 >= 32 && $0 != 127) }) else {
                throw Refusal(400, "a header value holds a control character")
            }
            headers.add(String(decoding: line[..<colon], as: UTF8.self).lowercased(), Array(value))
        }
        return headers
    }

    private static func keepsAlive(_ headers: Headers, minor: Int) -> Bool {
        var keepAlive = minor >= 1
        if let connection = headers.text("connection")?.lowercased() {
            let options = connection.split(separator: ",").map { $0.trimmingCharacters() }
            if options.contains("close") { keepAlive = false } else if options.contains("keep-alive") { keepAlive = true }
        }
        return keepAlive
    }

    /// The one Content-Length (repeats must agree), or nil when there is none.
    private static func contentLength(_ headers: Headers) throws(Refusal) -> Int? {
        let lengths = headers.all("content-length")
        guard !lengths.isEmpty else { return nil }
        let distinct = Set(lengths)
        guard distinct.count == 1, let only = distinct.first, !only.isEmpty, only.count <= 18,
              only.allSatisfy({ $0 >= 48 && $0 <= 57 }), let parsed = Int(String(decoding: only, as: UTF8.self))
        else {
            throw Refusal(400, "Content-Length must be one decimal number")
        }
        return parsed
    }

    /// A refused request: the answer, and whether the connection must close whatever else holds.
    private struct Refused: Error {
        var error: APIError
        var close: Bool
    }

    /// The method, the route and the body rules: the route to serve, or the answer that refuses it.
    private func admit(method: String, path: String, headers: Headers, contentLength: Int?) -> Result<Route, Refused> {
        let length = contentLength ?? 0
        guard HTTPFramer.knownMethods.contains(method) else {
            var error = APIError(status: 405, message: "method \(HTTPFramer.shown(method)) is not supported",
                                 allow: "GET, HEAD, POST, PUT, DELETE")
            if case .failure(let routed) = router.route(method: method, rawPath: path), let allow = routed.allow {
                error.allow = allow
            }
            return .failure(Refused(error: error, close: false))
        }
        let route: Route
        switch router.route(method: method, rawPath: path) {
        case .failure(let error): return .failure(Refused(error: error, close: false))
        case .success(let matched): route = matched
        }
        if route.takesBody && contentLength == nil {
            return .failure(Refused(error: APIError(status: 411, message: "send the JSON body with a Content-Length header"),
                                    close: true))
        }
        if length > limits.body {
            return .failure(Refused(error: APIError(status: 413, message: "the body is \(length) bytes; the limit is 64 KiB"),
                                    close: true))
        }
        if route.takesBody && !Validation.isJSONContentType(headers.text("content-type")) {
            return .failure(Refused(error: APIError(status: 415, message: "send the body as Content-Type: application/json"),
                                    close: false))
        }
        return .success(route)
    }

    // MARK: - Body

    private mutating func body(_ pending: (request: Request, length: Int, discard: Bool)) -> Frame? {
        guard buffered >= pending.length else { return nil }
        var request = pending.request
        if !pending.discard { request.body = Array(buffer[start..<(start + pending.length)]) }
        start += pending.length
        pendingBody = nil
        return .request(request)
    }

    // MARK: - Helpers

    private mutating func fail(_ status: Int, _ message: String) -> Frame {
        failed = true  // what follows can't be framed: answer and close
        return .reject(APIError(status: status, message: message).response, close: true, head: false)
    }

    private mutating func reject(_ error: APIError, close: Bool, method: String) -> Frame {
        if close { failed = true }
        return .reject(error.response, close: close, head: method == "HEAD")
    }

    /// The range of the blank line that ends the head (CRLF CRLF, or LF LF from a lax client).
    private mutating func findHeadEnd() -> Range<Int>? {
        var index = max(start, scanned - 3)
        let end = buffer.count
        defer { scanned = max(start, end) }
        while index < end {
            if buffer[index] == 10 {
                if index + 1 < end && buffer[index + 1] == 10 { return index..<(index + 2) }
                if index + 2 < end && buffer[index + 1] == 13 && buffer[index + 2] == 10 { return index..<(index + 3) }
            }
            index += 1
        }
        return nil
    }

    private func firstLineEnd() -> Int? { buffer[start...].firstIndex(of: 10) }

    /// Lines of a head, without their CR.
    private func split(_ head: [UInt8]) -> [ArraySlice<UInt8>] {
        head.split(separator: 10, omittingEmptySubsequences: false).map { line in
            line.last == 13 ? line.dropLast() : line
        }
    }

    static func version(_ text: ArraySlice<UInt8>) -> (major: Int, minor: Int)? {
        let bytes = Array(text)
        guard bytes.count == 8, bytes[0...4].elementsEqual("HTTP/".utf8), bytes[6] == UInt8(ascii: "."),
              (48...57).contains(bytes[5]), (48...57).contains(bytes[7]) else { return nil }
        return (Int(bytes[5] - 48), Int(bytes[7] - 48))
    }

    static func shown(_ method: String) -> String {
        String(method.prefix(16).filter { $0.isASCIILetter || $0 == "-" })
    }

    /// Header fields by lowercased name, in order.
    private struct Headers {
        var fields: [(String, [UInt8])] = []
        mutating func add(_ name: String, _ value: [UInt8]) { fields.append((name, value)) }
        func all(_ name: String) -> [[UInt8]] { fields.filter { $0.0 == name }.map(\.1) }
        func text(_ name: String) -> String? { all(name).first.map { String(decoding: $0, as: UTF8.self) } }
    }
}

/// An answer as HTTP/1.1 bytes: status line, `content-type`, `content-length` (none on a 204), `cache-control:
/// no-store`, extra headers, `connection: close` when the connection ends after it, then the body (none for HEAD).
public enum HTTPResponseWriter {
    public static func render(_ response: APIResponse, head: Bool, close: Bool) -> [UInt8] {
        var text = "HTTP/1.1 \(response.status) \(reason(response.status))\r\n"
        let body = Array((response.body ?? "").utf8)
        if response.status != 204 {
            text += "content-type: \(response.contentType)\r\ncontent-length: \(body.count)\r\n"
        }
        text += "cache-control: no-store\r\n"
        for (name, value) in response.headers where !(name + value).utf8.contains(where: { $0 == 13 || $0 == 10 }) {
            text += "\(name): \(value)\r\n"
        }
        if close { text += "connection: close\r\n" }
        text += "\r\n"
        var bytes = Array(text.utf8)
        if !head && response.status != 204 { bytes += body }
        return bytes
    }

    public static let continueLine = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)

    static func reason(_ status: Int) -> String {
        switch status {
        case 200: return "OK"
        case 204: return "No Content"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 408: return "Request Timeout"
        case 409: return "Conflict"
        case 411: return "Length Required"
        case 413: return "Content Too Large"
        case 414: return "URI Too Long"
        case 415: return "Unsupported Media Type"
        case 429: return "Too Many Requests"
        case 431: return "Request Header Fields Too Large"
        case 500: return "Internal Server Error"
        case 503: return "Service Unavailable"
        case 505: return "HTTP Version Not Supported"
        default: return "Status"
        }
    }
}
