// CShims too: the socket constants (SOCK_STREAM, IPPROTO_TCP) come from headers libwebsockets.h also includes, and
// which module a batch of files finds them in varies (a build once failed with them "not in scope" under Glibc alone).
import CShims
import Glibc
import RelayCore

// Opening connections. A host given as an IP address (Prefect on 127.0.0.1 or a LAN address, the usual case) is
// connected on the loop thread without blocking: TCP connect, then for https the TLS handshake, each step when
// poll() says the socket is ready. A host name needs getaddrinfo, which blocks, so that connection is opened on a
// short-lived thread of its own and handed back through the inbox. (A thread costs ~0.1-1 ms to get scheduled on a
// busy 2-core machine, which is why addresses don't take that path.)

/// A connection being opened on the loop thread. Loop thread only. It owns its socket until it hands it on: a
/// plain fd is closed in `deinit` unless `handOver()` took it; a `TLSSocket` closes its own.
final class PendingConnect {
    enum Phase {
        case tcp(fd: Int32)
        case tls(TLSSocket)
        /// The socket went to a stream.
        case handedOver
    }

    let id: HTTPPoolStateMachine.ConnectionID
    let origin: HTTPPool.Origin
    var phase: Phase
    /// What to poll for next.
    var events = Int16(POLLOUT)

    init(id: HTTPPoolStateMachine.ConnectionID, origin: HTTPPool.Origin, fd: Int32) {
        self.id = id
        self.origin = origin
        self.phase = .tcp(fd: fd)
    }

    deinit {
        if case .tcp(let fd) = phase { close(fd) }
    }

    var fd: Int32 {
        switch phase {
        case .tcp(let fd): return fd
        case .tls(let socket): return socket.fd
        case .handedOver: return -1
        }
    }

    /// Gives the plain fd to its stream: from here on the stream closes it.
    func handOver(_ fd: Int32) -> Int32 {
        phase = .handedOver
        return fd
    }
}

extension HTTPPool {
    /// Starts opening one connection to `origin`; the outcome reaches `adopt`. Its deadline is the machine's
    /// (`abortConnect`), for a connecting thread too: one still stuck in DNS then delivers to nobody.
    func startConnect(_ id: HTTPPoolStateMachine.ConnectionID, to origin: Origin) {
        connecting[id] = origin
        var tls: TLSContext?
        if origin.tls {
            if tlsContext == nil {
                let http11: [UInt8] = [8] + Array("http/1.1".utf8)
                do {
                    tlsContext = try TLSContext(caFile: options.caFile, alpn: http11, caVariable: "PREFECT_CA_FILE")
                } catch {
                    return adopt(Connected(id: id, result: .failure(TransportError(error.description))), now: monotonicMs())
                }
            }
            tls = tlsContext
        }
        // Through a proxy, plain http as well as https goes in a CONNECT tunnel, opened on a thread of its own.
        let proxy = options.proxy.route(tls: origin.tls, host: origin.host, port: origin.port).endpoint
        if proxy == nil, startInline(id: id, origin: origin) { return }
        let job = ConnectJob(pool: self, id: id, origin: origin, tls: tls, timeoutMs: options.connectTimeoutMs,
                             proxy: proxy)
        // The thread owns the job (and through it the pool) until it has delivered.
        do {
            try RelayThread.spawn("pp-rest-connect", detached: true) { job.run() }
        } catch {
            adopt(Connected(id: id, result: .failure(TransportError(error.description))), now: monotonicMs())
        }
    }

    /// A connection attempt is over: reported to the machine (a result for a connect it gave up on is dropped,
    /// its socket closing with it).
    func adopt(_ connected: Connected, now: Int64) {
        assertOnLoop()
        guard let origin = connecting.removeValue(forKey: connected.id) else { return }
        switch connected.result {
        case .success(let stream):
            counts.connectionsOpened.add(1, ordering: .relaxed)
            connections.append(HTTPConnection(id: connected.id, origin: origin, stream: stream))
            machine.connected(connected.id, now: now)
            Log.debug("prefect.http_connected", ["host": origin.authority, "connection": String(connected.id.value),
                                                 "open": String(connections.count { $0.origin == origin }),
                                                 "via": options.proxy.route(tls: origin.tls, host: origin.host,
                                                                            port: origin.port).endpoint?.description ?? "direct"])
        case .failure(let error):
            Log.warn("prefect.http_connect_failed", ["host": origin.authority, "error": error.description])
            machine.connectFailed(connected.id, error.description, into: &actions)
        }
    }

    // MARK: - On the loop thread

    /// For a numeric host: a non-blocking socket with its connect under way (or failed already). False for a name.
    private func startInline(id: HTTPPoolStateMachine.ConnectionID, origin: Origin) -> Bool {
        var hints = addrinfo()
        hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(origin.host, String(origin.port), &hints, &list) == 0, let info = list else { return false }
        defer { freeaddrinfo(list) }
        let what = "connect to \(origin.authority)"
        let fd = socket(info.pointee.ai_family, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else {
            adopt(Connected(id: id, result: .failure(TransportError("socket: " + String(cString: strerror(errno))))),
                  now: monotonicMs())
            return true
        }
        guard Glibc.connect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 || errno == EINPROGRESS else {
            let error = TransportError("\(what): " + String(cString: strerror(errno)))
            Glibc.close(fd)
            adopt(Connected(id: id, result: .failure(error)), now: monotonicMs())
            return true
        }
        opening.append(PendingConnect(id: id, origin: origin, fd: fd))
        return true
    }

    /// One step of an inline connect, after poll() reported its socket.
    func step(_ pending: PendingConnect, now: Int64) {
        do throws(TransportError) {
            if case .tcp(let fd) = pending.phase {
                var soError: Int32 = 0
                var length = socklen_t(MemoryLayout<Int32>.size)
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &soError, &length)
                guard soError == 0 else {
                    throw TransportError("connect to \(pending.origin.authority): " + String(cString: strerror(soError)))
                }
                var one: Int32 = 1
                // Requests are small and latency-bound; don't let Nagle hold them back.
                setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                guard pending.origin.tls, let tlsContext else {
                    return finish(pending, .success(PlainSocket(fd: pending.handOver(fd))), now)
                }
                let ssl: OpaquePointer
                do { ssl = try tlsContext.makeSSL(host: pending.origin.host) } catch { throw TransportError(error.description) }
                pending.phase = .tls(TLSSocket(fd: fd, ssl: ssl))  // the TLSSocket owns the fd from here
            }
            guard case .tls(let socket) = pending.phase else { return }
            let progress: TLSSocket.Progress
            do { progress = try socket.handshake(asClient: true) } catch { throw TransportError(error.description) }
            switch progress {
            case .done: finish(pending, .success(socket), now)
            case .wantRead: pending.events = Int16(POLLIN)
            case .wantWrite: pending.events = Int16(POLLOUT)
            }
        } catch {
            finish(pending, .failure(error), now)  // dropped here: its socket closes with it
        }
    }

    /// Stops opening a connection the machine gave up on (`abortConnect`): an inline one's socket closes now, a
    /// connecting thread's result will be dropped.
    func abortConnect(_ id: HTTPPoolStateMachine.ConnectionID) {
        guard let origin = connecting.removeValue(forKey: id) else { return }
        opening.removeAll { $0.id == id }
        Log.warn("prefect.http_connect_failed", ["host": origin.authority,
                                                 "error": "connect to \(origin.authority) timed out"])
    }

    private func finish(_ pending: PendingConnect, _ result: Result<ByteStream, TransportError>, _ now: Int64) {
        opening.removeAll { $0 === pending }
        adopt(Connected(id: pending.id, result: result), now: now)
    }
}

// MARK: - On a thread of its own

/// What a connecting thread needs. The thread owns it (and so keeps the pool alive) until it has delivered.
private final class ConnectJob {
    let pool: HTTPPool
    let id: HTTPPoolStateMachine.ConnectionID
    let origin: HTTPPool.Origin
    let tls: TLSContext?
    let timeoutMs: Int
    let proxy: ProxyEndpoint?

    init(pool: HTTPPool, id: HTTPPoolStateMachine.ConnectionID, origin: HTTPPool.Origin, tls: TLSContext?, timeoutMs: Int, proxy: ProxyEndpoint?) {
        self.proxy = proxy
        self.pool = pool
        self.id = id
        self.origin = origin
        self.tls = tls
        self.timeoutMs = timeoutMs
    }

    /// Connecting thread: DNS, TCP and (for https) the TLS handshake with host name verification, all within
    /// `timeoutMs` (DNS excepted: getaddrinfo has no deadline; the call's own deadline still holds).
    func run() {
        let result: Result<ByteStream, TransportError>
        do throws(TransportError) {
            if let tls {
                result = .success(try TLSSocket.connect(host: origin.host, port: origin.port, tls: tls,
                                                        timeoutMs: timeoutMs, requireALPN: nil, proxy: proxy))
            } else {
                let deadline = monotonicMs() + Int64(timeoutMs)
                let fd = try TLSSocket.connectTCP(host: origin.host, port: origin.port, via: proxy, deadline: deadline)
                result = .success(PlainSocket(fd: fd))
            }
        } catch {
            result = .failure(error)
        }
        pool.deliver(HTTPPool.Connected(id: id, result: result))
    }
}
