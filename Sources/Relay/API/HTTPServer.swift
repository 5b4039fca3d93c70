import CShims
import CWebSockets
import Glibc
import RelayCore

/// One API request, framed and checked at the edge, handed to the async API logic.
struct APIRequest: Sendable {
    let route: Route
    let method: String
    let authorization: String?
    let body: [UInt8]
    /// Who sent it (`TrustedProxies.client`); nil when the socket could not name its peer.
    var client: ClientAddress? = nil
}

/// The HTTP API's server side: raw sockets on the API's own lws context (`WebSocketsLoop` with a listener), so
/// lws's HTTP parser, header-table pool and WebSocket upgrade never see a client. `HTTPFramer` frames each request
/// and chooses every error status; this class owns the sockets, the deadlines and the limits:
///
/// - a request head must be complete within `Limits.headerSeconds` of its first byte (or of the connection, or of
///   the previous answer), a body within `bodySeconds`; an idle keep-alive connection closes after `headerSeconds`;
/// - at most `maxConnections` connections, `maxPerAddress` from one peer address. Over either cap, the oldest
///   connection that has not finished sending a request head (from that address first) is closed to make room,
///   so slow clients can't lock out a fast one, and a fast one never loses a request it has sent;
/// - a proxy in `TRUSTED_PROXIES` carries many clients, so its connections count only against `maxConnections`; the
///   client each request names (`TrustedProxies.client`) may have at most `maxPerAddress` requests being answered
///   at once, and one more is a 429 on a connection that stays open. Direct clients meet the same request cap,
///   though their connection cap reaches it first. The connection cap has to be decided at accept time, before a
///   header is read; the request cap is where, behind an ingress, one client could otherwise hold all the relay's
///   work (credential checks wait on Prefect for up to `answerSeconds`).
///
/// Loop thread only, and not `Sendable`: answers reach it through `WebSocketsLoop.perform(on:)`, which opens it on
/// the loop's thread alone.
final class HTTPServer: LWSHandler {
    let protocolName = "http-api"
    typealias Reply = @Sendable (APIResponse) -> Void

    struct Limits {
        var maxConnections = 1024
        var maxPerAddress = 256
        var headerSeconds: Int32 = 5
        var bodySeconds: Int32 = 10
        /// While the relay works on an answer (a credential check can wait on Prefect).
        var answerSeconds: Int32 = 60
    }

    private enum Phase {
        /// Waiting for (the rest of) a request head: evictable.
        case head
        /// Reading a body.
        case body
        /// Dispatched, waiting for the relay's answer.
        case answering
        /// Writing an answer.
        case writing
    }

    private struct Connection {
        let wsi: OpaquePointer
        /// The peer's address (`?` when the socket could not say), the connection cap's key.
        let address: String
        let peer: IPAddress?
        /// A proxy in `TRUSTED_PROXIES`: outside the per-address connection cap.
        let trusted: Bool
        /// The client whose request is being answered here, counted in `inFlight` until the answer is written.
        var client: String?
        let opened: UInt64
        var framer: HTTPFramer
        var phase: Phase = .head
        var outbox: [UInt8] = []
        var closeAfterWrite = false
        var keepAlive = true
    }

    private(set) weak var loop: WebSocketsLoop?
    let limits: Limits
    private let router: Router
    private let onRequest: @Sendable (APIRequest, @escaping Reply) -> Void
    private var connections: [UInt64: Connection] = [:]
    private let trustedProxies: TrustedProxies
    private var perAddress: AddressTally
    private var inFlight: AddressTally
    private var nextID: UInt64 = 1
    /// Where each answer is counted, by route and code (`/metrics`); nil: not counted.
    private let requests: Locked<RequestCounts>?

    init(router: Router, limits: Limits = Limits(), trustedProxies: TrustedProxies = .none,
         requests: Locked<RequestCounts>? = nil,
         onRequest: @escaping @Sendable (APIRequest, @escaping Reply) -> Void) {
        self.router = router
        self.limits = limits
        self.trustedProxies = trustedProxies
        self.requests = requests
        perAddress = AddressTally(cap: limits.maxPerAddress)
        inFlight = AddressTally(cap: limits.maxPerAddress)
        self.onRequest = onRequest
    }

    func handle(wsi: OpaquePointer?, reason: lws_callback_reasons, input: UnsafeMutableRawPointer?, length: Int) -> Int32 {
        guard let wsi else { return 0 }
        switch reason {
        case LWS_CALLBACK_RAW_ADOPT:
            return adopt(wsi)
        case LWS_CALLBACK_RAW_RX:
            guard let id = connectionID(wsi), var connection = connections[id] else { return -1 }
            if let input, length > 0 {
                connection.framer.append(UnsafeRawBufferPointer(start: input, count: length))
            }
            connections[id] = connection
            return advance(id)
        case LWS_CALLBACK_RAW_WRITEABLE:
            guard let id = connectionID(wsi) else { return -1 }
            return writable(id)
        case LWS_CALLBACK_RAW_CLOSE:
            forget(wsi)
            return 0
        default:
            return 0
        }
    }

    // MARK: - Connections

    private func adopt(_ wsi: OpaquePointer) -> Int32 {
        // An IPv4 client of a dual-stack listener reads as its IPv4 address (`IPAddress`).
        let peer = SocketAddress.peer(of: lws_get_socket_fd(wsi))?.ip
        let address = peer?.description ?? "?"
        let trusted = peer.map(trustedProxies.trusts) ?? false
        // Over a cap: make room by closing the oldest connection still sending its head.
        if !trusted && perAddress.isFull(address) && !evictOldest(from: address) {
            return -1
        }
        if connections.count >= limits.maxConnections && !evictOldest(from: nil) { return -1 }
        let id = nextID
        nextID += 1
        connections[id] = Connection(wsi: wsi, address: address, peer: peer, trusted: trusted, opened: id,
                                     framer: HTTPFramer(router: router))
        if !trusted { perAddress.add(address) }
        lws_set_opaque_user_data(wsi, UnsafeMutableRawPointer(bitPattern: UInt(id)))
        lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, limits.headerSeconds)
        return 0
    }

    /// Closes the oldest connection in `.head` (from `address`, or from anyone); false when there is none.
    private func evictOldest(from address: String?) -> Bool {
        let victim = connections.filter { $0.value.phase == .head && (address == nil || $0.value.address == address) }
            .min { $0.value.opened < $1.value.opened }
        guard let (id, connection) = victim else { return false }
        Log.debug("api.evicted", ["address": connection.address, "open": String(connections.count)])
        forget(connection.wsi)
        _ = id
        // lws closes it on its next pass; the callback for it finds no state and does nothing more.
        lws_set_timeout(connection.wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
        return true
    }

    private func forget(_ wsi: OpaquePointer) {
        guard let id = connectionID(wsi), let connection = connections.removeValue(forKey: id) else { return }
        lws_set_opaque_user_data(wsi, nil)
        if !connection.trusted { perAddress.remove(connection.address) }
        if let client = connection.client { inFlight.remove(client) }
    }

    // MARK: - Requests

    /// Frames what has arrived and acts on it, unless an answer is pending (pipelined requests wait).
    private func advance(_ id: UInt64) -> Int32 {
        guard var connection = connections[id] else { return -1 }
        guard connection.phase == .head || connection.phase == .body else {
            // A client piling up bytes while its answer is pending has no business doing so.
            return connection.framer.buffered > connection.framer.limits.head + connection.framer.limits.body ? -1 : 0
        }
        let frame = connection.framer.next()
        switch frame {
        case nil:
            if connection.framer.isReadingBody && connection.phase == .head {
                connection.phase = .body
                lws_set_timeout(connection.wsi, PENDING_TIMEOUT_USER_OK, limits.bodySeconds)
            }
            connections[id] = connection
            return 0
        case .proceed?:
            connection.phase = .body
            lws_set_timeout(connection.wsi, PENDING_TIMEOUT_USER_OK, limits.bodySeconds)
            connection.outbox += HTTPResponseWriter.continueLine
            connections[id] = connection
            lws_callback_on_writable(connection.wsi)
            return 0
        case .reject(let response, let close, let head)?:
            Log.debug("api.refused", ["status": String(response.status), "address": connection.address])
            requests?.withLock { $0.record(nil, status: response.status) }
            queue(response, on: &connection, id: id, head: head, close: close)
            return 0
        case .request(let request)?:
            let client = connection.peer.map { trustedProxies.client(peer: $0, forwardedFor: request.forwardedFor) }
            let clientKey = client?.address.description ?? connection.address
            connection.keepAlive = request.keepAlive
            guard !inFlight.isFull(clientKey) else {
                connections[id] = connection
                requests?.withLock { $0.record(request.route, status: 429) }
                return refuseBusyClient(id, clientKey, head: request.isHead)
            }
            inFlight.add(clientKey)
            connection.client = clientKey
            connection.phase = .answering
            connections[id] = connection
            lws_set_timeout(connection.wsi, PENDING_TIMEOUT_USER_OK, limits.answerSeconds)
            let handoff = APIRequest(route: request.route, method: request.method, authorization: request.authorization,
                                     body: request.body, client: client)
            let (isHead, route) = (request.isHead, request.route)
            // The answer comes back on the loop's thread, where alone the server is opened (`LoopBound`). The bound
            // reference is strong: the server lives as long as the relay. (A weak one would give it a side table that
            // LeakSanitizer can't see the pointer to, and reports as a leak.)
            guard let loop else { return 0 }
            let server = loop.bind(self)
            onRequest(handoff) { [weak loop] response in
                loop?.perform(on: server) { $0.deliver(response, to: id, head: isHead, route: route) }
            }
            return 0
        }
    }

    /// A 429 for a client with `maxPerAddress` requests being answered already; the connection stays open (behind
    /// an ingress it carries other clients' requests too).
    private func refuseBusyClient(_ id: UInt64, _ client: String, head: Bool) -> Int32 {
        guard var connection = connections[id] else { return -1 }
        var response = APIError(status: 429, message: "this client has \(limits.maxPerAddress) requests being answered "
                                + "already; wait for their answers before sending more").response
        response.headers.append(("retry-after", "1"))
        Log.debug("api.refused", ["status": "429", "address": connection.address, "client": client])
        queue(response, on: &connection, id: id, head: head, close: !connection.keepAlive)
        return 0
    }

    /// Loop thread: queues the answer and asks lws for a writable callback, if the client is still there.
    private func deliver(_ response: APIResponse, to id: UInt64, head: Bool, route: Route) {
        requests?.withLock { $0.record(route, status: response.status) }
        guard var connection = connections[id], connection.phase == .answering else { return }
        queue(response, on: &connection, id: id, head: head, close: !connection.keepAlive)
    }

    /// Loop thread: queues `response` on the connection (closed after it is written when `close`), gives the client
    /// the head deadline again and asks lws for a writable callback.
    private func queue(_ response: APIResponse, on connection: inout Connection, id: UInt64, head: Bool, close: Bool) {
        connection.phase = .writing
        connection.closeAfterWrite = close
        connection.outbox += HTTPResponseWriter.render(response, head: head, close: close)
        connections[id] = connection
        lws_set_timeout(connection.wsi, PENDING_TIMEOUT_USER_OK, limits.headerSeconds)
        lws_callback_on_writable(connection.wsi)
    }

    // MARK: - Writing

    private func writable(_ id: UInt64) -> Int32 {
        guard var connection = connections[id] else { return -1 }
        if lws_partial_buffered(connection.wsi) != 0 {
            lws_callback_on_writable(connection.wsi)  // lws still holds part of the last write
            return 0
        }
        if !connection.outbox.isEmpty {
            let bytes = connection.outbox
            connection.outbox.removeAll()
            connections[id] = connection
            let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: CShims_LWS_PRE + bytes.count)
            defer { buffer.deallocate() }
            bytes.withUnsafeBufferPointer { (buffer + CShims_LWS_PRE).update(from: $0.baseAddress!, count: bytes.count) }
            // LWS_WRITE_RAW is a macro for LWS_WRITE_HTTP. lws keeps what the socket did not take and sends it before
            // anything else (output.c@v4.1.6).
            if lws_write(connection.wsi, buffer + CShims_LWS_PRE, bytes.count, LWS_WRITE_HTTP) < 0 { return -1 }
            if lws_partial_buffered(connection.wsi) != 0 {
                lws_callback_on_writable(connection.wsi)
                return 0
            }
        }
        guard connection.phase == .writing else { return 0 }  // a 100 Continue: keep reading the body
        if let client = connection.client {
            inFlight.remove(client)  // answered: the client may send another
            connection.client = nil
        }
        if connection.closeAfterWrite {
            connections[id] = connection
            return -1
        }
        // The answer is out: the next request's head (or the idle keep-alive) gets a fresh deadline.
        connection.phase = .head
        connections[id] = connection
        lws_set_timeout(connection.wsi, PENDING_TIMEOUT_USER_OK, limits.headerSeconds)
        return connection.framer.buffered > 0 ? advance(id) : 0
    }

    // MARK: - Helpers

    private func connectionID(_ wsi: OpaquePointer) -> UInt64? {
        guard let raw = lws_get_opaque_user_data(wsi) else { return nil }
        let id = UInt64(UInt(bitPattern: raw))
        return connections[id]?.wsi == wsi ? id : nil
    }
}

extension HTTPServer {
    func attach(to loop: WebSocketsLoop) { self.loop = loop }
}
