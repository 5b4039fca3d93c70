import Glibc
@testable import Relay
@testable import RelayCore

/// A deliberately small HTTP/1.1 client over a raw socket, so tests can also send what a proper client never
/// would (truncated bodies, lies in Content-Length, slow senders). Loopback only (127.0.0.1, or ::1 for the IPv6
/// listener's tests); every read has a deadline.
struct TestHTTP {
    struct Reply {
        var status: Int
        var headers: [String: String]
        var body: String
        var json: JSONValue? { try? JSONParser.parse(body) }
    }

    let port: Int
    var host = "127.0.0.1"

    func request(_ method: String, _ path: String, headers: [String: String] = [:], body: String? = nil,
                 timeout: Double = 10) throws -> Reply {
        let authority = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        var head = "\(method) \(path) HTTP/1.1\r\nHost: \(authority)\r\nConnection: close\r\n"
        var headers = headers
        if let body {
            if headers["Content-Type"] == nil { headers["Content-Type"] = "application/json" }
            if headers["Content-Length"] == nil { headers["Content-Length"] = String(body.utf8.count) }
        }
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) { head += "\(name): \(value)\r\n" }
        head += "\r\n"
        return try raw(Array(head.utf8) + Array((body ?? "").utf8), timeout: timeout)
    }

    /// Sends `bytes` as they are, then reads until the server closes or answers completely.
    func raw(_ bytes: [UInt8], closeWrite: Bool = false, timeout: Double = 10) throws -> Reply {
        let fd = try host.contains(":") ? TestSocket.connect6(port: port, host: host) : TestSocket.connect(port: port)
        defer { close(fd) }
        try TestSocket.send(fd, bytes)
        if closeWrite { shutdown(fd, Int32(SHUT_WR)) }
        return try TestHTTP.parse(TestSocket.receiveAll(fd, timeout: timeout))
    }

    static func parse(_ data: [UInt8]) throws -> Reply {
        let text = String(decoding: data, as: UTF8.self)
        guard let split = text.range(of: "\r\n\r\n") else { throw TestFailure("no complete HTTP answer: \(text.prefix(200))") }
        let lines = text[..<split.lowerBound].split(separator: "\r\n")
        guard let statusLine = lines.first, statusLine.hasPrefix("HTTP/1.1 "),
              let status = Int(statusLine.dropFirst(9).prefix(3)) else {
            throw TestFailure("bad status line: \(lines.first ?? "")")
        }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = String(line[line.index(after: colon)...]).trimmingWhitespace()
        }
        var body = String(text[split.upperBound...])
        if let length = headers["content-length"].flatMap(Int.init), body.utf8.count > length {
            body = String(decoding: Array(body.utf8).prefix(length), as: UTF8.self)
        }
        if headers["transfer-encoding"]?.lowercased() == "chunked" { body = try dechunk(Array(body.utf8)) }
        return Reply(status: status, headers: headers, body: body)
    }

    /// A chunked body (other servers than the relay, e.g. Prometheus, send large answers so), joined.
    static func dechunk(_ bytes: [UInt8]) throws -> String {
        var out: [UInt8] = []
        var at = 0
        while true {
            guard let end = (at..<max(at, bytes.count - 1)).first(where: { bytes[$0] == 13 && bytes[$0 + 1] == 10 }),
                  let size = Int(String(String(decoding: bytes[at..<end], as: UTF8.self).prefix { $0 != ";" })
                    .trimmingWhitespace(), radix: 16),
                  end + 2 + size <= bytes.count else { throw TestFailure("bad chunked body") }
            if size == 0 { return String(decoding: out, as: UTF8.self) }
            out += bytes[(end + 2)..<(end + 2 + size)]
            at = end + 2 + size + 2
        }
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

enum TestSocket {
    /// A close-on-exec listener on `host` at a free port, with that port; nil when it could not listen.
    static func listen(host: String = "127.0.0.1", backlog: Int32 = 64) -> (fd: Int32, port: Int)? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr(host)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Bool in
                bind(fd, pointer, length) == 0 && Glibc.listen(fd, backlog) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else {
            close(fd)
            return nil
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    static func connect(port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket: \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        // Linux bounds a blocking connect and send by SO_SNDTIMEO: a server that stops accepting or reading can't
        // hold a test forever.
        var bound = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &bound, socklen_t(MemoryLayout<timeval>.size))
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else {
            close(fd)
            throw TestFailure("connect to 127.0.0.1:\(port) failed: errno \(errno)")
        }
        return fd
    }

    /// An IPv6 connection to `host` (a loopback literal such as ::1).
    static func connect6(port: Int, host: String = "::1") throws -> Int32 {
        let fd = socket(AF_INET6, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket(AF_INET6): errno \(errno)") }
        var address = sockaddr_in6()
        address.sin6_family = sa_family_t(AF_INET6)
        address.sin6_port = in_port_t(UInt16(port).bigEndian)
        guard inet_pton(AF_INET6, host, &address.sin6_addr) == 1 else {
            close(fd)
            throw TestFailure("\(host) is not an IPv6 address")
        }
        var bound = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &bound, socklen_t(MemoryLayout<timeval>.size))
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
        }
        guard rc == 0 else {
            close(fd)
            throw TestFailure("connect to [\(host)]:\(port) failed: errno \(errno)")
        }
        return fd
    }

    /// Why this machine can't test IPv6 loopback (no ::1 to bind), or nil when it can.
    static let ipv6LoopbackMissing: String? = {
        let fd = socket(AF_INET6, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return "no IPv6 sockets here (socket(AF_INET6): errno \(errno))" }
        defer { close(fd) }
        var address = sockaddr_in6()
        address.sin6_family = sa_family_t(AF_INET6)
        address.sin6_addr = in6addr_loopback
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
        }
        return rc == 0 ? nil : "::1 can't be bound here (errno \(errno)): no IPv6 loopback (see `ip -6 addr show lo`)"
    }()

    static func send(_ fd: Int32, _ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                throw TestFailure("send: the server read none of \(bytes.count - offset) bytes for 10 s")
            }
            if n <= 0 { return }  // the server may close early (e.g. after a 413): that's an answer, not an error
            offset += n
        }
    }

    static func receiveAll(_ fd: Int32, timeout: Double) throws -> [UInt8] {
        var data: [UInt8] = []
        let deadline = SystemClock.monotonic() + timeout
        var buffer = [UInt8](repeating: 0, count: 65536)
        while SystemClock.monotonic() < deadline {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&pfd, 1, 100)
            if ready == 0 {
                if TestHTTP.isComplete(data) { break }
                continue
            }
            let n = recv(fd, &buffer, buffer.count, 0)
            if n <= 0 { break }
            data += buffer[0..<n]
            if TestHTTP.isComplete(data) { break }
        }
        return data
    }

    /// Whether the peer closed `fd` (end of stream or a reset) within `timeout`, with nothing sent first: a silent
    /// peer is not a closed one.
    static func closedByPeer(_ fd: Int32, timeout: Double) -> Bool {
        let deadline = SystemClock.monotonic() + timeout
        var byte: UInt8 = 0
        while SystemClock.monotonic() < deadline {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 100) > 0 else { continue }
            return recv(fd, &byte, 1, 0) <= 0
        }
        return false
    }

    static func freePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Int32 in
                _ = bind(fd, pointer, length)
                return getsockname(fd, pointer, &length)
            }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

extension TestHTTP {
    /// Whether `data` holds a whole answer (headers plus Content-Length bytes, or a bodiless status).
    static func isComplete(_ data: [UInt8]) -> Bool {
        let text = String(decoding: data, as: UTF8.self)
        guard let split = text.range(of: "\r\n\r\n") else { return false }
        let head = text[..<split.lowerBound].lowercased()
        if let line = head.split(separator: "\r\n").first(where: { $0.hasPrefix("content-length:") }),
           let length = Int(line.dropFirst(15).trimmingCharacters()) {
            return text[split.upperBound...].utf8.count >= length
        }
        return head.hasPrefix("http/1.1 204") || head.hasPrefix("http/1.1 304")
    }
}
