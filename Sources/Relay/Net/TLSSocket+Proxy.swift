// CShims too: the socket constants (SOCK_STREAM, IPPROTO_TCP) come from headers libwebsockets.h also includes, and
// which module a batch of files finds them in varies (a build once failed with them "not in scope" under Glibc alone).
import CShims
import Glibc
import RelayCore

extension TLSSocket {
    /// The most a proxy's answer to CONNECT may take (status line and headers).
    static let maxProxyAnswer = 8 * 1024

    /// A TCP connection to `host:port` through `proxy`'s CONNECT tunnel, ready for TLS (or plain HTTP) to the target:
    /// connects to the proxy, sends `CONNECT` with `Host` and, with credentials, `Proxy-Authorization: Basic`, and
    /// reads the proxy's answer, all by `deadline` (monotonic ms). Anything but 2xx is an error naming the proxy
    /// (never its credentials), the target and the proxy's status line. Blocks the calling thread.
    static func connectTunnel(through proxy: ProxyEndpoint, to host: String, port: Int,
                              deadline: Int64) throws(TransportError) -> Int32 {
        let target = (host.contains(":") ? "[\(host)]" : host) + ":\(port)"
        let fd: Int32
        do { fd = try connectTCP(host: proxy.host, port: proxy.port, deadline: deadline) } catch {
            throw TransportError("proxy \(proxy) for \(target): \(error.description)")
        }
        do throws(TransportError) {
            var request = "CONNECT \(target) HTTP/1.1\r\nHost: \(target)\r\n"
            if let authorization = proxy.authorization { request += "Proxy-Authorization: \(authorization)\r\n" }
            request += "\r\n"
            try sendAll(fd: fd, Array(request.utf8), deadline: deadline, what: "proxy \(proxy) for \(target)")
            let head = try readProxyAnswer(fd: fd, deadline: deadline, what: "proxy \(proxy) for \(target)")
            let statusLine = String(decoding: head.utf8.prefix { $0 != 13 && $0 != 10 }, as: UTF8.self)
            let parts = statusLine.split(separator: " ", maxSplits: 2)
            guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]) else {
                throw TransportError("proxy \(proxy) for \(target) answered CONNECT with \"\(statusLine.prefix(80))\", "
                                     + "not HTTP; is it an HTTP proxy?")
            }
            guard (200...299).contains(status) else {
                let advice = switch status {
                case 407: proxy.username == nil ? "it wants credentials: put user:pass@ in the proxy URL"
                                                : "it refused the credentials in the proxy URL"
                case 403: "it does not allow this target; ask for \(target) to be allowed, or list the host in NO_PROXY"
                default: "check that the proxy can reach \(target)"
                }
                throw TransportError("proxy \(proxy) refused CONNECT to \(target): \(statusLine.prefix(120)); \(advice)")
            }
            return fd
        } catch {
            close(fd)
            throw error
        }
    }

    private static func sendAll(fd: Int32, _ bytes: [UInt8], deadline: Int64, what: String) throws(TransportError) {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n > 0 { sent += n; continue }
            guard n < 0, errno == EAGAIN || errno == EINTR else {
                throw TransportError("\(what): send: " + String(cString: strerror(errno)))
            }
            try waitFor(fd: fd, events: Int16(POLLOUT), deadline: deadline, what: what)
        }
    }

    /// The answer's head, read up to its blank line and no further: after it come the target's own bytes.
    private static func readProxyAnswer(fd: Int32, deadline: Int64, what: String) throws(TransportError) -> String {
        var buffer = [UInt8](repeating: 0, count: maxProxyAnswer)
        while true {
            try waitFor(fd: fd, events: Int16(POLLIN), deadline: deadline, what: "\(what): the answer to CONNECT")
            let peeked = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_PEEK)) }
            if peeked == 0 { throw TransportError("\(what) closed the connection before answering CONNECT") }
            if peeked < 0 {
                if errno == EAGAIN || errno == EINTR { continue }
                throw TransportError("\(what): recv: " + String(cString: strerror(errno)))
            }
            if let end = headEnd(buffer[..<peeked]) {
                // Take exactly the head off the socket.
                var taken = 0
                while taken < end {
                    let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + taken, end - taken, 0) }
                    if n <= 0 { throw TransportError("\(what): recv failed while reading the answer to CONNECT") }
                    taken += n
                }
                return String(decoding: buffer[..<end], as: UTF8.self)
            }
            if peeked >= maxProxyAnswer { throw TransportError("\(what) sent an answer to CONNECT over 8 KiB") }
            // Not all there yet: wait for more (poll says readable again only once more has arrived).
            try waitMore(fd: fd, have: peeked, deadline: deadline, what: what)
        }
    }

    private static func headEnd(_ bytes: ArraySlice<UInt8>) -> Int? {
        let crlf: [UInt8] = [13, 10, 13, 10]
        guard bytes.count >= 4 else { return nil }
        for i in bytes.startIndex...(bytes.endIndex - 4) where bytes[i..<(i + 4)].elementsEqual(crlf) { return i + 4 }
        return nil
    }

    /// With data peeked but not consumed, poll stays readable: sleep briefly until more bytes are queued.
    private static func waitMore(fd: Int32, have: Int, deadline: Int64, what: String) throws(TransportError) {
        var probe = [UInt8](repeating: 0, count: have + 1)
        while monotonicMs() < deadline {
            let n = probe.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_PEEK | MSG_DONTWAIT)) }
            if n > have || n == 0 { return }
            usleep(2_000)
        }
        throw TransportError("\(what): the answer to CONNECT timed out")
    }
}
