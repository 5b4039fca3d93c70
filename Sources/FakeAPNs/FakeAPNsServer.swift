import COpenSSL
import CShims
import Glibc
import Relay

/// The fake's loop: listening socket, eventfd, server `SSL_CTX` and the live connections, all driven by one
/// `poll()` thread. Owns its C handles and frees them in reverse creation order.
///
/// `@unchecked Sendable`: handed to the loop thread once; after `init` only that thread touches it, except
/// `wake()`, which only writes the eventfd.
final class FakeAPNsServer: @unchecked Sendable {
    let port: Int
    let ledger: FakeAPNsLedger
    let maxConcurrentStreams: UInt32
    private let listenFD: Int32
    private let wakeFD: Int32
    private let sslContext: OpaquePointer
    private let verifier: JWTVerifier
    private let identity: FakeAPNs.Identity
    private var checkedTokens: [String: Bool] = [:]
    /// The last `authorization` header checked and its verdict (loop thread only, like `checkedTokens`).
    private var lastAuthorization: (header: String, valid: Bool)?
    private var connections: [FakeAPNsConnection] = []
    /// Answers scripted as `.slow`, due at a monotonic time.
    var delayed: [(due: Int64, connection: FakeAPNsConnection, stream: Int32, answer: FakeAPNs.Answer)] = []

    init(ledger: FakeAPNsLedger, maxConcurrentStreams: UInt32, identity: FakeAPNs.Identity,
         port requestedPort: Int = 0) throws {
        self.identity = identity
        verifier = JWTVerifier(publicKeyPath: identity.jwtPublicKeyPath)
        self.ledger = ledger
        self.maxConcurrentStreams = maxConcurrentStreams
        signal(SIGPIPE, SIG_IGN)  // a client hanging up must give EPIPE, not kill the test process
        listenFD = try IOError.check("socket") { socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0) }
        var one: Int32 = 1
        setsockopt(listenFD, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(requestedPort).bigEndian)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let fd = listenFD
        try withUnsafeMutablePointer(to: &address) { pointer in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                try IOError.check("bind") { bind(fd, raw, length) }
                try IOError.check("listen") { listen(fd, 128) }
                try IOError.check("getsockname") { getsockname(fd, raw, &length) }
            }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        wakeFD = try IOError.check("eventfd") { eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC)) }
        guard let context = SSL_CTX_new(TLS_server_method()) else { throw TLSError("SSL_CTX_new") }
        sslContext = context
        try TLSError.check(SSL_CTX_use_certificate_chain_file(context, identity.certificateChainPath), "use_certificate")
        try TLSError.check(SSL_CTX_use_PrivateKey_file(context, identity.privateKeyPath, SSL_FILETYPE_PEM), "use_PrivateKey")
        SSL_CTX_set_alpn_select_cb(context, fakeSelectH2, nil)
        let mode = Int(SSL_MODE_ENABLE_PARTIAL_WRITE) | Int(SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER)
        _ = SSL_CTX_ctrl(context, SSL_CTRL_MODE, mode, nil)
    }

    deinit {
        connections.removeAll()
        SSL_CTX_free(sslContext)
        close(wakeFD)
        close(listenFD)
    }

    func wake() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    /// Whether `authorization` carries a provider token signed by the test key, with numeric `iat`.
    func isValid(authorization: String?) -> Bool {
        guard let authorization else { return false }
        // A client sends the same provider token for up to an hour: the last header checked is compared whole first,
        // before the token is cut out and hashed for `checkedTokens`.
        if let last = lastAuthorization, last.header == authorization { return last.valid }
        let valid = checkedToken(authorization)
        lastAuthorization = (authorization, valid)
        return valid
    }

    private func checkedToken(_ authorization: String) -> Bool {
        guard authorization.hasPrefix("bearer ") else { return false }
        let token = String(authorization.dropFirst(7))
        if let known = checkedTokens[token] { return known }
        var valid = false
        if let parsed = verifier.verify(token) {
            valid = parsed.header["alg"]?.string == "ES256" && parsed.header["kid"]?.string == identity.keyID
                && parsed.claims["iss"]?.string == identity.teamID && parsed.claims["iat"].map { value in
                    if case .int = value { return true } else { return false }
                } == true
        }
        checkedTokens[token] = valid
        return valid
    }

    // MARK: - Loop

    func run() {
        while !ledger.isStopping {
            ledger.state.withLock { $0.turns += 1 }
            if ledger.takeDropRequest() { connections.removeAll() }
            let live = connections.filter(isServed)
            var fds = [pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0)]
            for connection in live {
                let write = connection.wantsWrite ? Int16(POLLOUT) : 0
                fds.append(pollfd(fd: connection.socket.fd, events: Int16(POLLIN) | write, revents: 0))
            }
            let now = monotonicMs()
            let timeout = delayed.map { max(0, $0.due - now) }.min() ?? 100
            _ = poll(&fds, nfds_t(fds.count), Int32(min(timeout, 100)))
            if fds[0].revents != 0 {
                var count: UInt64 = 0
                _ = read(wakeFD, &count, 8)
            }
            if fds[1].revents != 0 { acceptAll() }
            // Re-read after poll(): a freeze asked for while we slept applies before any byte is read.
            let stillLive = connections.filter(isServed)
            for connection in stillLive { connection.service() }
            fireDelayed(now: monotonicMs())
            for connection in stillLive { connection.transmit() }
            connections.removeAll { $0.isClosed }
        }
        delayed.removeAll()
        connections.removeAll()
    }

    /// Whether the loop reads and writes `connection` now: not frozen, and not silenced once established.
    private func isServed(_ connection: FakeAPNsConnection) -> Bool {
        connection.id > ledger.frozenUpTo && !(ledger.silenced && connection.isEstablished)
    }

    private func acceptAll() {
        while true {
            let fd = acceptCloseOnExec(listenFD, nonBlocking: true)
            if fd < 0 { return }
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            guard let ssl = SSL_new(sslContext) else {
                close(fd)
                continue
            }
            connections.append(FakeAPNsConnection(id: ledger.newConnectionID(), socket: TLSSocket(fd: fd, ssl: ssl), server: self))
        }
    }

    private func fireDelayed(now: Int64) {
        let due = delayed.filter { $0.due <= now }
        delayed.removeAll { $0.due <= now }
        for item in due where !item.connection.isClosed && isServed(item.connection) {
            item.connection.respond(item.stream, item.answer)
        }
    }
}

/// ALPN: pick `h2` from the client's list, or refuse the handshake.
private func fakeSelectH2(_ ssl: OpaquePointer?, _ out: UnsafeMutablePointer<UnsafePointer<UInt8>?>?,
                          _ outLength: UnsafeMutablePointer<UInt8>?, _ input: UnsafePointer<UInt8>?, _ inputLength: UInt32,
                          _ argument: UnsafeMutableRawPointer?) -> Int32 {
    guard let input, let out, let outLength else { return SSL_TLSEXT_ERR_ALERT_FATAL }
    var index = 0
    while index < Int(inputLength) {
        let length = Int(input[index])
        if length == 2, index + 2 < Int(inputLength), input[index + 1] == UInt8(ascii: "h"), input[index + 2] == UInt8(ascii: "2") {
            out.pointee = input + index + 1
            outLength.pointee = 2
            return SSL_TLSEXT_ERR_OK
        }
        index += 1 + length
    }
    return SSL_TLSEXT_ERR_ALERT_FATAL
}

/// accept(2) with the new socket close-on-exec from the start (`CShims_accept_cloexec`): the tests accept on fake
/// servers while other tests spawn processes, and a connection a child inherits outlives its server's close.
public func acceptCloseOnExec(_ listener: Int32, nonBlocking: Bool) -> Int32 {
    CShims_accept_cloexec(listener, nonBlocking ? 1 : 0)
}
