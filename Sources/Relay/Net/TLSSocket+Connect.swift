import COpenSSL
// CShims too: the socket constants (SOCK_STREAM, IPPROTO_TCP) come from headers libwebsockets.h also includes, and
// which module a batch of files finds them in varies (a build once failed with them "not in scope" under Glibc alone).
import CShims
import Glibc
import RelayCore

/// Why a connection attempt or a live connection failed, as one line for logs and outcomes.
package struct TransportError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}

extension TLSSocket {
    /// Resolves `host` afresh (so a reconnect can land on another APNs server), connects without blocking
    /// past `timeoutMs`, and completes the TLS handshake, requiring ALPN `requireALPN` (`h2` for APNs; nil accepts
    /// whatever the server chose, or no ALPN, as an HTTP/1.1 peer may). With `proxy`, TLS runs inside its CONNECT
    /// tunnel, still with SNI and verification against `host`. Blocks the calling thread.
    static func connect(host: String, port: Int, tls: TLSContext, timeoutMs: Int, requireALPN: String? = "h2",
                        proxy: ProxyEndpoint? = nil) throws(TransportError) -> TLSSocket {
        let deadline = monotonicMs() + Int64(timeoutMs)
        let fd = try connectTCP(host: host, port: port, via: proxy, deadline: deadline)
        let ssl: OpaquePointer
        do { ssl = try tls.makeSSL(host: host) } catch {
            close(fd)
            throw TransportError(error.description)
        }
        let socket = TLSSocket(fd: fd, ssl: ssl)
        while true {
            let progress: Progress
            do { progress = try socket.handshake(asClient: true) } catch { throw TransportError(error.description) }
            let events: Int16
            switch progress {
            case .done:
                if let requireALPN, socket.alpn != requireALPN {
                    throw TransportError(requireALPN == "h2" ? "\(host) did not agree to HTTP/2 (ALPN h2)"
                                                             : "\(host) did not agree to ALPN \(requireALPN)")
                }
                return socket
            case .wantRead: events = Int16(POLLIN)
            case .wantWrite: events = Int16(POLLOUT)
            }
            try waitFor(fd: fd, events: events, deadline: deadline, what: "TLS handshake with \(host)")
        }
    }

    /// A TCP connection to `host:port`, direct or through `proxy`'s CONNECT tunnel: the one place every blocking
    /// connect of the relay (APNs, REST reads on a thread) picks its route.
    static func connectTCP(host: String, port: Int, via proxy: ProxyEndpoint?,
                           deadline: Int64) throws(TransportError) -> Int32 {
        guard let proxy else { return try connectTCP(host: host, port: port, deadline: deadline) }
        return try connectTunnel(through: proxy, to: host, port: port, deadline: deadline)
    }

    /// A non-blocking TCP socket to `host:port` with TCP_NODELAY, connected by `deadline` (monotonic ms).
    static func connectTCP(host: String, port: Int, deadline: Int64) throws(TransportError) -> Int32 {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else {
            throw TransportError("resolve \(host): " + String(cString: gai_strerror(status)))
        }
        defer { freeaddrinfo(list) }
        var lastError = "no addresses for \(host)"
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let info = entry {
            entry = info.pointee.ai_next
            let fd = socket(info.pointee.ai_family, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
            if fd < 0 { lastError = "socket: " + String(cString: strerror(errno)); continue }
            if Glibc.connect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 || errno == EINPROGRESS {
                do {
                    try waitFor(fd: fd, events: Int16(POLLOUT), deadline: deadline, what: "connect to \(host):\(port)")
                    var soError: Int32 = 0
                    var length = socklen_t(MemoryLayout<Int32>.size)
                    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soError, &length)
                    if soError == 0 {
                        var one: Int32 = 1
                        // Pushes are small and latency-bound; don't let Nagle hold them back.
                        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                        return fd
                    }
                    lastError = "connect to \(host):\(port): " + String(cString: strerror(soError))
                } catch {
                    lastError = error.description
                }
            } else {
                lastError = "connect to \(host):\(port): " + String(cString: strerror(errno))
            }
            close(fd)
        }
        throw TransportError(lastError)
    }

    /// Waits (bounded by `deadline`, monotonic ms) until `fd` is ready for `events`; shared with the proxy tunnel.
    static func waitFor(fd: Int32, events: Int16, deadline: Int64, what: String) throws(TransportError) {
        while true {
            let remaining = deadline - monotonicMs()
            guard remaining > 0 else { throw TransportError("\(what) timed out") }
            var entry = pollfd(fd: fd, events: events, revents: 0)
            let ready = poll(&entry, 1, Int32(remaining))
            if ready > 0 { return }
            if ready < 0 && errno != EINTR { throw TransportError("poll: " + String(cString: strerror(errno))) }
        }
    }
}
