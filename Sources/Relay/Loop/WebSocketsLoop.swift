import CShims
import COpenSSL
import CWebSockets
import Glibc
import RelayCore
import Synchronization

/// Something that handles one libwebsockets protocol's callbacks. Called only on the loop thread.
protocol LWSHandler: AnyObject {
    /// The protocol name the handler registers (also the subprotocol offered by a ws client).
    var protocolName: String { get }
    func handle(wsi: OpaquePointer?, reason: lws_callback_reasons, input: UnsafeMutableRawPointer?, length: Int) -> Int32
    /// Told once, by the loop it was handed to, which loop that is (a handler that reaches its loop keeps it weakly).
    func attach(to loop: WebSocketsLoop)
}

extension LWSHandler {
    func attach(to loop: WebSocketsLoop) {}
}

/// Owns one `lws_context` and the thread that services it: the relay runs two, one for the Prefect events socket
/// (no listener; the REST reads have a pool and thread of their own, `HTTPPool`) and one for the HTTP API server (a
/// raw listener, `ListeningSocket`), so clients of the API can never starve the events socket of service time or lws
/// resources (lws is one thread per context). From any other thread only `perform(_:)` and `stop()` are safe; they queue work under a lock and wake the loop with `lws_cancel_service`, and the loop drains
/// the queue in `LWS_CALLBACK_EVENT_WAIT_CANCELLED`.
///
/// `@unchecked Sendable`: every lws call happens on the loop thread; the only shared state is the `Locked` queue
/// and the atomic flags.
final class WebSocketsLoop: @unchecked Sendable {
    struct Settings {
        /// -1: no listener. Otherwise the listener's port (0 picks a free one); it hands every accepted socket, raw,
        /// to the first handler (the HTTP API frames HTTP itself): no lws HTTP parsing, header-table pool or WebSocket
        /// upgrade on that port.
        var port: Int = -1
        var clientCAFile: String? = nil
        /// Whether any client connection uses TLS (an https Prefect). Without it lws sets up no OpenSSL client
        /// context at all; with it, the context reads the system roots as `SystemRoots` says.
        var clientTLS = true
        /// With a listener: the connections it may hold. Once lws's table for the thread is full (this many plus a
        /// few of its own), the listener pauses, so a full API waits in the kernel's backlog (`ListeningSocket`).
        var maxConnections: Int? = nil
        /// The proxy every client connection of this context goes through (lws's per-vhost proxy, a CONNECT
        /// tunnel), as `ProxyRule` decided for the one host it connects to; nil: direct. lws's own reading of
        /// `http_proxy` is switched off at start-up (`RelayMain.launch`), so nil means direct.
        var clientProxy: ProxyEndpoint? = nil
        /// The address the listener binds (IPv4 or IPv6 text, `Config.bindAddress`); nil: every IPv4 interface.
        var bindAddress: String? = nil
        /// The variables a failed listen is blamed on: the port's, and the bind address's.
        var portVariable = "PORT"
        var bindVariable = "API_BIND"
        /// The service thread's name (`nameThisThread`).
        var threadName = "pp-lws"
    }

    /// The descriptors a context without a listener may hold: the events socket, the one it replaces while that
    /// closes, lws's wake-up pipe, with room to spare. Left unset, lws sizes two tables by the descriptor limit and
    /// zeroes them: 16 bytes per descriptor, 1 MiB resident at the 65,536 the relay raises the limit to, for one
    /// socket. Set, lws finds a socket's entry by scanning these few.
    static let clientOnlyDescriptors: UInt32 = 16

    private var context: OpaquePointer?
    private let protocols: UnsafeMutablePointer<lws_protocols>
    private let protocolCount: Int
    /// The handlers, with the listener last when there is one (`firstHandler` is the caller's first).
    private let handlers: [LWSHandler]
    /// The listening socket, bound here, not by lws (`ListeningSocket` says why); lws polls it once adopted.
    private let listener: ListeningSocket?
    private let commands = Locked<[@Sendable () -> Void]>([])
    private let stopping = Atomic<Bool>(false)
    private var thread: pthread_t?
    /// The service thread's kernel id, once it runs (`isLoopThread`).
    private let loopThreadID = Atomic<Int32>(0)
    /// The hashed roots directory lws's client TLS context reads a root at a time from (`SystemRoots`), loaded in
    /// `LWS_CALLBACK_OPENSSL_LOAD_EXTRA_CLIENT_VERIFY_CERTS`; nil: lws parses the system bundle itself, as before.
    private let clientRootsDirectory: String?
    private let threadName: String

    /// The port the server listens on (useful with port 0), or nil without a listener.
    var listenPort: Int? { listener?.port }
    /// The address and port the listener is bound to, as `getsockname` reads them, or nil without a listener.
    var listenAddress: String? { listener?.authority }

    /// `handlers` are handed over (`sending`): from here on they belong to the loop's thread, reached from other
    /// threads only through `perform(onHandler:)`.
    init(settings: Settings, handlers: sending [LWSHandler]) throws(StartupError) {
        threadName = settings.threadName
        // Bound first: a taken port or a foreign address stops start-up before any lws context exists.
        let listener = settings.port >= 0
            ? try ListeningSocket(address: settings.bindAddress ?? "0.0.0.0", port: settings.port,
                                  portVariable: settings.portVariable, bindVariable: settings.bindVariable)
            : nil
        self.listener = listener
        self.handlers = handlers + (listener.map { [$0] } ?? [])
        let usesClientTLS = settings.clientTLS || settings.clientCAFile != nil
        if usesClientTLS, case .hashedDirectory(let directory) = SystemRoots.forProcess {
            clientRootsDirectory = directory
        } else {
            clientRootsDirectory = nil
        }
        protocolCount = self.handlers.count
        protocols = WebSocketsLoop.makeProtocols(self.handlers)
        // Every stored property is set by now, so deinit runs for a failed init below and frees the protocols and
        // strings; freeing them here too would be a double free.

        // lws only logs a CA file it can't load and then fails every TLS connection; say so at start-up.
        if let caFile = settings.clientCAFile, let problem = WebSocketsLoop.pemProblem(caFile) {
            throw StartupError("PREFECT_CA_FILE", "\(problem); point it (or PREFECT_API_SSL_CERT_FILE, the same setting) at a readable PEM file, or unset it")
        }
        WebSocketsLoop.routeLibraryLogs()
        guard let created = WebSocketsLoop.createContext(creationInfo(settings, usesClientTLS: usesClientTLS),
                                                         settings: settings) else {
            throw StartupError(settings.portVariable, "could not create the libwebsockets context")
        }
        context = created
        if let listener {
            guard let vhost = lws_get_vhost_by_name(created, "default") else {
                throw StartupError(settings.portVariable, "libwebsockets made no vhost for the listener")
            }
            // Borrowed: the name is the first protocol's, freed after the context.
            try listener.adopt(into: vhost, connectionsTo: protocols[0].name)
        }
        self.handlers.forEach { $0.attach(to: self) }
    }

    /// One `lws_protocols` entry per handler plus lws's zeroed terminator; freed by `freeProtocols`.
    private static func makeProtocols(_ handlers: [LWSHandler]) -> UnsafeMutablePointer<lws_protocols> {
        let protocols = UnsafeMutablePointer<lws_protocols>.allocate(capacity: handlers.count + 1)
        protocols.initialize(repeating: lws_protocols(), count: handlers.count + 1)
        for (index, handler) in handlers.enumerated() {
            protocols[index].name = UnsafePointer(strdup(handler.protocolName))
            protocols[index].callback = webSocketsCallback
            protocols[index].rx_buffer_size = 16 * 1024
            // Borrowed: the loop keeps `handlers` alive until the context is destroyed.
            protocols[index].user = Unmanaged.passUnretained(handler as AnyObject).toOpaque()
        }
        return protocols
    }

    /// The context's settings, every pointer in them owned by this loop (the per-call strings are
    /// `createContext`'s).
    private func creationInfo(_ settings: Settings, usesClientTLS: Bool) -> lws_context_creation_info {
        var info = lws_context_creation_info()
        // A listener's socket is `ListeningSocket`'s: lws gets a server vhost without one of its own.
        info.port = settings.port >= 0 ? CONTEXT_PORT_NO_LISTEN_SERVER : CONTEXT_PORT_NO_LISTEN
        info.protocols = UnsafePointer(protocols)
        // Only lws's own listeners and client connections read this; the API's listener is `ListeningSocket`'s and
        // serves IPv6 with it set (lws adopts a raw descriptor of any family).
        info.options = UInt64(LWS_SERVER_OPTION_DISABLE_IPV6)
        if usesClientTLS { info.options |= UInt64(LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT) }
        // lws would parse the whole system bundle into its client context (SSL_CTX_set_default_verify_paths);
        // the directory goes in instead, from the callback lws makes once the context exists.
        if clientRootsDirectory != nil { info.options |= UInt64(LWS_SERVER_OPTION_DISABLE_OS_CA_CERTS) }
        // The deadline of each stage of a client connection (TCP, TLS, the upgrade's answer): `EventsSocket`'s.
        info.timeout_secs = UInt32(EventsSession.stageTimeout)
        info.keepalive_timeout = 5
        info.max_http_header_data = 8192
        info.max_http_header_pool = 64
        // Borrowed: the loop outlives its context (deinit destroys the context first).
        info.user = Unmanaged.passUnretained(self).toOpaque()
        if settings.port >= 0 {
            // Liveness of API connections is the handler's own (header and body deadlines).
            info.timeout_secs = 5
            // The listener, lws's wake-up pipe and room for the one `HTTPServer.adopt` closes to make space.
            if let maxConnections = settings.maxConnections { info.fd_limit_per_thread = UInt32(maxConnections + 8) }
        } else {
            info.fd_limit_per_thread = WebSocketsLoop.clientOnlyDescriptors
        }
        return info
    }

    /// `lws_create_context` with the client CA path and proxy added: lws copies both into the vhost, so their C
    /// strings live only for this call.
    private static func createContext(_ info: lws_context_creation_info, settings: Settings) -> OpaquePointer? {
        var info = info
        let caCopy = settings.clientCAFile.map { strdup($0) }
        defer { caCopy.map { free($0) } }
        // user:pass@host:port; lws base64s the credentials itself.
        let proxyCopy = settings.clientProxy.map { proxy in
            strdup((proxy.username.map { "\($0):\(proxy.password ?? "")@" } ?? "") + proxy.authority)
        }
        defer {
            if let copy = proxyCopy ?? nil {
                memset(copy, 0, strlen(copy))  // it may hold the proxy password
                free(copy)
            }
        }
        if let proxyCopy = proxyCopy ?? nil, let proxy = settings.clientProxy {
            info.http_proxy_address = UnsafePointer(proxyCopy)
            info.http_proxy_port = UInt32(proxy.port)
        }
        if let caCopy { info.client_ssl_ca_filepath = UnsafePointer(caCopy) }
        return lws_create_context(&info)
    }

    deinit {
        stop()
        if let context { lws_context_destroy(context) }
        WebSocketsLoop.freeProtocols(protocols, count: protocolCount)
    }

    /// Starts the service thread (it holds the loop until it exits); a start-up error (the setting is the thread
    /// limit) when it can't.
    func start() throws(StartupError) {
        do {
            thread = try RelayThread.spawn(threadName) { self.run() }
        } catch {
            throw StartupError("thread \(threadName)", error.description)
        }
    }

    /// Stops the service thread and waits for it. Safe from any thread but the loop's own.
    func stop() {
        guard !stopping.exchange(true, ordering: .acquiringAndReleasing) else {
            return
        }
        if let context { lws_cancel_service(context) }
        if let thread { pthread_join(thread, nil) }
        thread = nil
    }

    /// Runs `work` on the loop thread, soon. Safe from any thread.
    func perform(_ work: @escaping @Sendable () -> Void) {
        commands.withLock { $0.append(work) }
        if let context { lws_cancel_service(context) }
    }

    /// Runs `work` on the loop thread, soon, with this loop's handler of type `Handler`: how other threads reach a
    /// handler, which belongs to the loop (it was handed over at `init`) and is not `Sendable`. Safe from any thread.
    func perform<Handler: LWSHandler & SendableMetatype>(onHandler type: Handler.Type, _ work: @escaping @Sendable (Handler) -> Void) {
        perform { [self] in
            guard let handler = handlers.lazy.compactMap({ $0 as? Handler }).first else {
                preconditionFailure("no \(Handler.self) was handed to this loop")
            }
            work(handler)
        }
    }

    /// Runs `work` with the object `bound` refers to on its loop's thread, soon (for work that waits on another
    /// thread first, then comes back). Safe from any thread.
    func perform<Owner: AnyObject>(on bound: LoopBound<Owner>, _ work: @escaping @Sendable (Owner) -> Void) {
        perform { work(bound.value) }
    }

    /// `owner`, to be carried through other threads and opened on this loop's thread only. Made on the loop's
    /// thread only (checked), where alone the owner may be reached.
    func bind<Owner: AnyObject>(_ owner: Owner) -> LoopBound<Owner> { LoopBound(owner, loop: self) }

    /// Whether the caller is this loop's service thread.
    var isLoopThread: Bool { loopThreadID.load(ordering: .acquiring) == CShims_thread_id() }

    /// The context, for handlers creating client connections (loop thread only).
    var lwsContext: OpaquePointer { context! }

    private func run() {
        loopThreadID.store(CShims_thread_id(), ordering: .releasing)
        while !stopping.load(ordering: .acquiring) {
            if lws_service(context, 0) < 0 { break }
        }
        drain()
    }

    fileprivate func drain() {
        let work = commands.withLock { queue -> [@Sendable () -> Void] in
            let taken = queue
            queue.removeAll()
            return taken
        }
        for item in work { item() }
    }

    fileprivate var firstHandler: LWSHandler? { handlers.first }

    /// lws made its client `SSL_CTX` (during `lws_create_context`): the system roots go in as a lazily read directory.
    fileprivate func loadClientRoots(into sslContext: OpaquePointer) {
        guard let directory = clientRootsDirectory else { return }
        if SSL_CTX_load_verify_dir(sslContext, directory) != 1 {
            ERR_clear_error()
            Log.warn("tls.roots_failed", ["directory": directory,
                                          "fix": "install ca-certificates, or set SSL_CERT_FILE to a CA bundle"])
        }
    }

    private static func freeProtocols(_ protocols: UnsafeMutablePointer<lws_protocols>, count: Int) {
        for index in 0..<count { free(UnsafeMutableRawPointer(mutating: protocols[index].name)) }
        protocols.deinitialize(count: count + 1)
        protocols.deallocate()
    }

    /// Why `path` is not a usable CA file (unreadable, or no PEM certificate in it), or nil when it is.
    static func pemProblem(_ path: String) -> String? {
        guard let bio = BIO_new_file(path, "r") else {
            ERR_clear_error()
            return "\(path) can't be read (\(String(cString: strerror(errno))))"
        }
        defer { BIO_free(bio) }
        guard let certificate = PEM_read_bio_X509(bio, nil, nil, nil) else {
            ERR_clear_error()
            return "\(path) holds no PEM certificate"
        }
        X509_free(certificate)
        return nil
    }

    /// lws's own errors and warnings go through `Log`, one line each.
    private static func routeLibraryLogs() {
        lws_set_log_level(CShims_lws_log_levels(Log.isEnabled(.debug) ? 0 : 1)) { level, line in
            guard let line else { return }
            var text = String(cString: line)
            while text.last == "\n" || text.last == "\r" { text.removeLast() }
            if text.isEmpty { return }
            let isError = level & Int32(LLL_ERR) != 0
            if isError { Log.warn("lws.error", ["message": text]) } else { Log.debug("lws.log", ["message": text]) }
        }
    }
}

/// The one C entry point for every protocol. Runs on the loop thread. The handler is found through the
/// protocol's `user` pointer (borrowed; see `WebSocketsLoop.init`).
private func webSocketsCallback(
    wsi: OpaquePointer?, reason: lws_callback_reasons, user: UnsafeMutableRawPointer?,
    input: UnsafeMutableRawPointer?, length: Int
) -> Int32 {
    if reason == LWS_CALLBACK_OPENSSL_LOAD_EXTRA_CLIENT_VERIFY_CERTS {
        // Made with a stand-in wsi that has a context but no protocol; `user` is the client SSL_CTX.
        guard let wsi, let user, let context = lws_get_context(wsi), let loopRaw = lws_context_user(context) else { return 0 }
        Unmanaged<WebSocketsLoop>.fromOpaque(loopRaw).takeUnretainedValue().loadClientRoots(into: OpaquePointer(user))
        return 0
    }
    guard let wsi, let proto = lws_get_protocol(wsi), let raw = proto.pointee.user else {
        return 0
    }
    let handler = Unmanaged<AnyObject>.fromOpaque(raw).takeUnretainedValue() as! LWSHandler
    if reason == LWS_CALLBACK_EVENT_WAIT_CANCELLED {
        // Broadcast to every protocol; drain once, from the first.
        guard let context = lws_get_context(wsi), let loopRaw = lws_context_user(context) else { return 0 }
        let loop = Unmanaged<WebSocketsLoop>.fromOpaque(loopRaw).takeUnretainedValue()
        if loop.firstHandler === handler { loop.drain() }
        return 0
    }
    return handler.handle(wsi: wsi, reason: reason, input: input, length: length)
}
