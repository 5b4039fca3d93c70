/// One HTTP/1.1 response as read off a client connection: status, headers, body, and whether the connection may
/// carry another request.
public struct HTTP1Response: Sendable, Equatable {
    public struct Header: Sendable, Equatable {
        public var name: String
        public var value: String
    }

    public var status: Int
    public var headers: [Header]
    public var body: [UInt8]
    /// HTTP/1.1 without `Connection: close`, with a length-delimited body and nothing read past its end.
    public var reusable: Bool

    /// The first header named `name`, compared case-insensitively (ASCII).
    public func header(_ name: String) -> String? {
        headers.first { HTTP1ResponseParser.sameToken($0.name, name) }?.value
    }
}

/// An incremental HTTP/1.1 response parser (RFC 9112) for a client that sends one request at a time: feed it
/// whatever each read returned, in order, then `finishAtEOF()` when the peer closes. Pure and socket-free, so it
/// is tested and fuzzed on bytes split at any boundary.
///
/// Reads the status line and headers (at most `maxHeaderBytes`, trailers counted separately against the same
/// limit), skips 1xx interim responses, and takes the body by `Transfer-Encoding: chunked` (extensions ignored,
/// trailers read and dropped), by `Content-Length`, or up to the close (RFC 9112 §6.3). A body over `maxBody`
/// fails. The request was not HEAD (the relay never sends one), so only 1xx/204/304 have no body.
public struct HTTP1ResponseParser: Sendable {
    public enum Progress: Sendable, Equatable {
        case needMore
        case complete(HTTP1Response)
        case failed(String)
    }

    private enum State: Sendable {
        case head
        case fixed(remaining: Int)
        case chunkSize
        case chunkData(remaining: Int)
        case chunkEnd
        case trailers
        case untilClose
        case done
        case failed(String)
    }

    public let maxHeaderBytes: Int
    public let maxBody: Int

    private var state = State.head
    private var buffer: [UInt8] = []
    /// Bytes of `buffer` already consumed; compacted at the end of each `feed`.
    private var start = 0
    /// Where the search for the end of the current line or header block resumes.
    private var scan = 0
    private var status = 0
    private var headers: [HTTP1Response.Header] = []
    private var body: [UInt8] = []
    private var keepAlive = true
    private var result: HTTP1Response?
    /// Any byte arrived at all (a reused connection that closes before this may retry its request).
    public private(set) var receivedAny = false

    public init(maxHeaderBytes: Int = 64 * 1024, maxBody: Int = 8 * 1024 * 1024) {
        self.maxHeaderBytes = maxHeaderBytes
        self.maxBody = maxBody
    }

    public var progress: Progress {
        switch state {
        case .done: return .complete(result!)
        case .failed(let reason): return .failed(reason)
        default: return .needMore
        }
    }

    public mutating func feed(_ bytes: [UInt8]) -> Progress {
        bytes.withUnsafeBufferPointer { feed($0) }
    }

    /// Takes the next bytes read from the connection. Bytes after a complete response make it not reusable.
    public mutating func feed(_ bytes: UnsafeBufferPointer<UInt8>) -> Progress {
        guard !bytes.isEmpty else { return progress }
        receivedAny = true
        switch state {
        case .failed: return progress
        case .done:
            result?.reusable = false
            return progress
        default: break
        }
        buffer.append(contentsOf: bytes)
        run()
        if case .done = state, start < buffer.count { result?.reusable = false }
        if case .failed = state {
            buffer = []
            start = 0
            scan = 0
        } else if start > 0 {
            buffer.removeFirst(start)
            scan -= start
            start = 0
        }
        return progress
    }

    /// The peer closed the connection: completes a body that runs to the close; anything else unfinished fails.
    public mutating func finishAtEOF() -> Progress {
        switch state {
        case .untilClose:
            finish()
        case .head:
            if !receivedAny { state = .failed("the connection closed before any answer") }
            else { state = .failed("the connection closed inside the response headers") }
        case .done, .failed:
            break
        default:
            state = .failed("the connection closed before the response body ended")
        }
        return progress
    }

    // MARK: - States

    private mutating func run() {
        while step() {}
    }

    /// The current state's work on what is buffered; false when it needs more bytes, or is done or failed.
    private mutating func step() -> Bool {
        switch state {
        case .head: return head()
        case .fixed(let remaining): return fixed(remaining)
        case .chunkSize: return chunkSize()
        case .chunkData(let remaining): return chunkData(remaining)
        case .chunkEnd: return chunkEnd()
        case .trailers: return trailers()
        case .untilClose: return untilClose()
        case .done, .failed: return false
        }
    }

    private mutating func head() -> Bool {
        guard let end = blockEnd() else {
            checkHeaderLimit()
            return false
        }
        guard end - start <= maxHeaderBytes else { return stop("response headers over \(maxHeaderBytes / 1024) KiB") }
        parseHead(buffer[start..<end])
        if case .failed = state { return false }
        start = end
        scan = start
        return true
    }

    private mutating func fixed(_ remaining: Int) -> Bool {
        let take = takeBody(upTo: remaining)
        guard take > 0 else { return false }
        if remaining == take { finish() } else { state = .fixed(remaining: remaining - take) }
        return true
    }

    /// Moves up to `limit` waiting bytes into the body; how many it moved (0: none is waiting).
    private mutating func takeBody(upTo limit: Int) -> Int {
        let take = min(limit, buffer.count - start)
        guard take > 0 else { return 0 }
        body.append(contentsOf: buffer[start..<start + take])
        start += take
        scan = start
        return take
    }

    private mutating func chunkSize() -> Bool {
        guard let end = lineEnd() else {
            if buffer.count - start > 4096 { fail("a chunk-size line over 4 KiB") }
            return false
        }
        let line = stripCR(buffer[start..<end - 1])
        start = end
        scan = start
        guard let size = Self.chunkSize(line) else { return stop("a malformed chunk size") }
        if size == 0 {
            state = .trailers
        } else if body.count + size > maxBody {
            return stop(overMax)
        } else {
            state = .chunkData(remaining: size)
        }
        return true
    }

    private mutating func chunkData(_ remaining: Int) -> Bool {
        let take = takeBody(upTo: remaining)
        guard take > 0 else { return false }
        state = remaining == take ? .chunkEnd : .chunkData(remaining: remaining - take)
        return true
    }

    private mutating func chunkEnd() -> Bool {
        guard let end = lineEnd() else {
            if buffer.count - start > 2 { fail("chunk data longer than its size") }
            return false
        }
        guard stripCR(buffer[start..<end - 1]).isEmpty else { return stop("chunk data longer than its size") }
        start = end
        scan = start
        state = .chunkSize
        return true
    }

    /// The trailer section ends at an empty line; with no trailers that line comes at once.
    private mutating func trailers() -> Bool {
        let waiting = buffer.count - start
        guard waiting > 0 else { return false }
        if buffer[start] == 0x0A || buffer[start] == 0x0D {
            guard buffer[start] == 0x0A || waiting >= 2 else { return false }
            guard buffer[start] == 0x0A || buffer[start + 1] == 0x0A else { return stop("a malformed trailer section") }
            start += buffer[start] == 0x0A ? 1 : 2
            scan = start
            finish()
            return true
        }
        guard let end = blockEnd() else {
            checkHeaderLimit()
            return false
        }
        guard end - start <= maxHeaderBytes else { return stop("response trailers over \(maxHeaderBytes / 1024) KiB") }
        start = end
        scan = start
        finish()
        return true
    }

    private mutating func untilClose() -> Bool {
        guard body.count + buffer.count - start <= maxBody else { return stop(overMax) }
        return takeBody(upTo: buffer.count - start) > 0
    }

    /// Fails with `reason`; false, so the state loop stops.
    private mutating func stop(_ reason: String) -> Bool {
        fail(reason)
        return false
    }

    private var overMax: String { "the answer was over \(maxBody / 1024 / 1024) MiB" }

    private mutating func fail(_ reason: String) {
        state = .failed(reason)
    }

    private mutating func finish() {
        result = HTTP1Response(status: status, headers: headers, body: body, reusable: keepAlive)
        state = .done
    }

    private mutating func checkHeaderLimit() {
        if buffer.count - start > maxHeaderBytes { fail("response headers over \(maxHeaderBytes / 1024) KiB") }
    }

    /// Index just past the LF that ends the current line, from `start`.
    private mutating func lineEnd() -> Int? {
        var index = max(scan, start)
        while index < buffer.count {
            if buffer[index] == 0x0A { return index + 1 }
            index += 1
        }
        scan = index
        return nil
    }

    /// Index just past the empty line that ends a header block beginning at `start` (LF LF or LF CR LF).
    private mutating func blockEnd() -> Int? {
        var index = max(scan, start)
        while index < buffer.count {
            if buffer[index] == 0x0A {
                if index + 1 < buffer.count, buffer[index + 1] == 0x0A { return index + 2 }
                if index + 2 < buffer.count, buffer[index + 1] == 0x0D, buffer[index + 2] == 0x0A { return index + 3 }
                // Not enough bytes yet to tell: look again from this LF next time.
                if index + 2 >= buffer.count { scan = index; return nil }
            }
            index += 1
        }
        scan = index
        return nil
    }

    private func stripCR(_ line: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        line.last == 0x0D ? line.dropLast() : line
    }

    // MARK: - Head

    private mutating func parseHead(_ block: ArraySlice<UInt8>) {
        var lines = block.split(separator: 0x0A, omittingEmptySubsequences: false).map { stripCR($0) }
        while lines.last?.isEmpty == true { lines.removeLast() }
        guard let statusLine = lines.first else { return fail("an empty status line") }
        // "HTTP/1.1 200 OK": version, space, three digits, then an optional reason.
        let bytes = Array(statusLine)
        guard bytes.count >= 12, bytes.starts(with: Array("HTTP/1.".utf8)), bytes[8] == 0x20,
              (bytes.count == 12 || bytes[12] == 0x20),
              bytes[9...11].allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            return fail("a malformed status line")
        }
        guard bytes[7] == 0x31 || bytes[7] == 0x30 else { return fail("an unsupported HTTP version") }
        let code = Int(bytes[9] - 0x30) * 100 + Int(bytes[10] - 0x30) * 10 + Int(bytes[11] - 0x30)
        guard code >= 100 else { return fail("a malformed status line") }
        var parsed: [HTTP1Response.Header] = []
        for line in lines.dropFirst() {
            if let first = line.first, first == 0x20 || first == 0x09 {
                // obs-fold: a continuation line joins the previous value with a space (RFC 9112 §5.2).
                guard !parsed.isEmpty else { return fail("a header continuation with no header") }
                parsed[parsed.count - 1].value += " " + Self.trimmed(line)
                continue
            }
            guard let colon = line.firstIndex(of: 0x3A), colon > line.startIndex else { return fail("a malformed header line") }
            let name = line[line.startIndex..<colon]
            guard name.allSatisfy(HTTPSyntax.isTokenByte) else { return fail("a malformed header name") }
            let value = line[line.index(after: colon)...]
            guard !value.contains(0x00) else { return fail("a NUL in a header value") }
            parsed.append(.init(name: String(decoding: name, as: UTF8.self), value: Self.trimmed(value)))
        }
        if code < 200 {
            // 1xx interim (100 Continue, 103 Early Hints): the real response follows. 101 would switch protocols,
            // which a REST read never asks for.
            guard code != 101 else { return fail("an unexpected 101 Switching Protocols") }
            state = .head
            return
        }
        status = code
        headers = parsed
        keepAlive = bytes[7] == 0x31
        for header in parsed where Self.sameToken(header.name, "connection") {
            if Self.tokens(header.value).contains(where: { Self.sameToken($0, "close") }) { keepAlive = false }
        }
        chooseBody()
    }

    /// RFC 9112 §6.3, for a response to a request other than HEAD or CONNECT.
    private mutating func chooseBody() {
        if status == 204 || status == 304 { return finish() }
        let encodings = headers.filter { Self.sameToken($0.name, "transfer-encoding") }.flatMap { Self.tokens($0.value) }
        if !encodings.isEmpty {
            // Chunked last: chunked framing. Anything else: the body runs to the close. Content-Length is ignored
            // either way, and a message that sent both can't be trusted to leave the connection clean.
            if headers.contains(where: { Self.sameToken($0.name, "content-length") }) { keepAlive = false }
            if Self.sameToken(encodings.last!, "chunked") {
                state = .chunkSize
            } else {
                keepAlive = false
                state = .untilClose
            }
            return
        }
        let lengths = headers.filter { Self.sameToken($0.name, "content-length") }.flatMap { Self.tokens($0.value) }
        if lengths.isEmpty {
            keepAlive = false
            state = .untilClose
            return
        }
        // Repeated Content-Length values are fine only when they agree.
        guard let length = Self.decimal(lengths[0]), lengths.allSatisfy({ $0 == lengths[0] }) else {
            return fail("a malformed Content-Length")
        }
        guard length <= maxBody else { return fail(overMax) }
        if length == 0 { return finish() }
        state = .fixed(remaining: length)
    }
}
