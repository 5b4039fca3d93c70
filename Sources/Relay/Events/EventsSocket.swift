import CShims
import CWebSockets
import Glibc
import RelayCore

/// What the events socket tells the relay, in order.
enum SocketMessage: Sendable {
    /// Authenticated and filtered: events flow from here (backfill first).
    case subscribed
    /// One `{"type":"event","event":{…}}` message's `event`.
    case event(JSONValue)
    /// The connection ended (`reason` is for the log); a reconnect is scheduled after `retryIn` seconds.
    case disconnected(SocketEnd, reason: String, retryIn: Double)
}

/// The client for Prefect's `/api/events/out` WebSocket (`src/prefect/server/api/events.py`) on the loop's vhost:
/// subprotocol `prefect`, `{"type":"auth","token":…}`, then one `filter` for `prefect.flow-run.*` events with
/// `occurred.until` a year ahead (the server applies `until` to live events too) and backfill on.
/// When to connect, what a stage's deadline, a refusal or a proxy's answer means, what to log, when a message is too
/// large and which events to ask for is `EventsSession`'s (RelayCore, pure); this class makes the lws calls it asks
/// for. Reconnects with jittered exponential backoff; lws PINGs a socket that goes quiet and hangs up on one that stays
/// silent (`retryPolicy`). Every stage before that has a deadline (`EventsSession.stageTimeout`): the TCP connect and
/// TLS handshake and the upgrade's answer are lws's own (the context's `timeout_secs`), the auth reply is ours; a stage
/// that runs out is a disconnect like any other, named after the stage. Loop thread only, and not `Sendable`: handed to
/// its loop when the loop is made, and started and stopped from other threads through `WebSocketsLoop.startEvents()`
/// and `stopEvents()`, which reach it on the loop's thread alone.
///
/// The wsi is ours from `lws_client_connect_via_info` until the first callback that ends it: CONNECTION_ERROR,
/// CLIENT_CLOSED, CLOSED_CLIENT_HTTP (a connection closed before its upgrade was answered, as lws's own timeout does)
/// or, whatever came before, WSI_DESTROY. Past that point lws has freed it, so `wsi` is cleared there and nothing
/// touches it again.
final class EventsSocket: LWSHandler {
    let protocolName = "prefect"

    weak var loop: WebSocketsLoop?
    private let url: HTTPURL
    /// The proxy the loop's vhost tunnels through (`ProxyRule`'s route for `url`), or nil: direct.
    private let proxy: ProxyEndpoint?
    private let authToken: String?
    private let authorization: String?
    private let credentialFix: String
    private let credentialName: String
    private let deliver: @Sendable (SocketMessage) -> Void
    /// The policy: state, deadlines, backoff, refusals, what to log. Loop thread only.
    private var session: EventsSession
    private let random: @Sendable () -> Double
    private let now: @Sendable () -> Double

    private var wsi: OpaquePointer?
    private var outbox: [String] = []
    private var inbox: [UInt8] = []
    private var lastOccurred: String?
    // C keeps pointers to these for the life of the context: owned here, freed in deinit.
    private let cStrings: [UnsafeMutablePointer<CChar>]
    private let retryTable: UnsafeMutablePointer<UInt32>
    private let retryPolicy: UnsafeMutablePointer<lws_retry_bo_t>

    init(config: Config, deliver: @escaping @Sendable (SocketMessage) -> Void,
         random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }, now: @escaping @Sendable () -> Double = SystemClock.unixNow) {
        url = config.prefectAPI
        proxy = config.proxy.route(for: config.prefectAPI).endpoint
        let target = "\(config.prefectAPI.host):\(config.prefectAPI.port)"
        session = EventsSession(tunnel: proxy.map { .init(proxy: $0, target: target) })
        authToken = config.prefectSocketToken
        // Basic on the upgrade helps proxies in front of a self-hosted server. Cloud's subscriber sends the key only
        // in the auth message (prefect/events/clients.py), so the relay does the same there.
        authorization = config.prefectAPIKey == nil ? config.prefectAuthorization : nil
        credentialFix = config.prefectCredentialFix
        credentialName = config.prefectCredentialName
        self.deliver = deliver
        self.now = now
        self.random = random
        let path: String = config.prefectAPI.path + "/events/out"
        let parts: [String] = [config.prefectAPI.host, path, config.prefectAPI.authority, "prefect"]
        cStrings = parts.map { strdup($0)! }
        retryTable = .allocate(capacity: 1)
        retryTable.initialize(to: 1000)
        retryPolicy = .allocate(capacity: 1)
        // Prefect PINGs every 20 s; if nothing valid arrives for 10 s we PING too, and a socket that stays silent
        // for 25 s (open but blackholed) is hung up and replaced: a stalled socket is noticed within 30 s.
        retryPolicy.initialize(to: lws_retry_bo_t(retry_ms_table: UnsafePointer(retryTable), retry_ms_table_count: 1,
                                                  conceal_count: 0, secs_since_valid_ping: 10,
                                                  secs_since_valid_hangup: 25, jitter_percent: 0))
    }

    deinit {
        cStrings.forEach { free($0) }
        retryPolicy.deallocate()
        retryTable.deallocate()
    }

    /// Connects. Loop thread only: other threads call `WebSocketsLoop.startEvents()`.
    func start() { run(session.start(now: SystemClock.monotonic())) }

    /// Closes the socket and stops reconnecting. Loop thread only: other threads call `WebSocketsLoop.stopEvents()`.
    func stop() { run(session.stop()) }

    func attach(to loop: WebSocketsLoop) { self.loop = loop }

    // MARK: - Carrying out the session's actions

    private func run(_ actions: [EventsSession.Action]) {
        for action in actions {
            switch action {
            case .connect:
                connect()
            case .authenticate(let seconds):
                guard let wsi else { continue }
                // lws times the connect and the upgrade; the auth reply is timed here, cleared by auth_success.
                lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, seconds)
                let token: JSONValue = authToken.map { .string($0) } ?? .null
                send(JSONValue.object(["type": "auth", "token": token]).encoded())
            case .subscribed:
                if let wsi { lws_set_timeout(wsi, NO_PENDING_TIMEOUT, 0) }
                send(filterMessage())
                deliver(.subscribed)
            case .logRefusal(let reason, let first):
                let fields: KeyValuePairs<String, String> = ["reason": reason, "credential": credentialName,
                                                              "fix": credentialFix]
                if first { Log.error("events.auth_rejected", fields) } else { Log.debug("events.auth_rejected", fields) }
            case .logConnectFailed(let reason, let attempts, let retryIn, let warn):
                let fields: KeyValuePairs<String, String> = [
                    "url": (url.tls ? "wss://" : "ws://") + url.authority + url.path + "/events/out", "reason": reason,
                    "attempts": String(attempts), "retry_in_ms": String(Int(retryIn * 1000)),
                    "via": proxy?.description ?? "direct",
                ]
                if warn { Log.warn("events.connect_failed", fields) } else { Log.debug("events.connect_failed", fields) }
            case .disconnected(let ending, let reason, let retryIn):
                deliver(.disconnected(ending, reason: reason, retryIn: retryIn))
            case .reconnect(let delay, let generation):
                // The timer holds the socket until it fires; a socket stopped meanwhile finds its generation gone.
                guard let loop else { continue }
                let socket = loop.bind(self)
                Task(executorPreference: RelayExecutor.shared) { [weak loop] in
                    try? await Task.sleep(for: .milliseconds(Int(delay * 1000)))
                    loop?.perform(on: socket) { $0.run($0.session.reconnectDue(generation: generation, now: SystemClock.monotonic())) }
                }
            case .close:
                if let wsi { lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC) }
            }
        }
    }

    // MARK: - Connecting

    private func connect() {
        guard let loop else { return }
        var info = lws_client_connect_info()
        info.context = loop.lwsContext
        info.address = UnsafePointer(cStrings[0])
        info.port = Int32(url.port)
        info.ssl_connection = url.tls ? Int32(LCCSCF_USE_SSL.rawValue) : 0
        info.path = UnsafePointer(cStrings[1])
        info.host = UnsafePointer(cStrings[2])
        info.origin = UnsafePointer(cStrings[2])
        info.protocol = UnsafePointer(cStrings[3])
        info.local_protocol_name = UnsafePointer(cStrings[3])
        info.retry_and_idle_policy = UnsafePointer(retryPolicy)
        var created: OpaquePointer?
        // lws writes the new wsi through `pwsi` during this call only (connect.c@v4.1.6): the pointer stays inside
        // the closure that makes it valid.
        let connected = withUnsafeMutablePointer(to: &created) { slot -> OpaquePointer? in
            info.pwsi = slot
            defer { info.pwsi = nil }
            return lws_client_connect_via_info(&info)
        }
        if connected != nil { wsi = created }
        // Whether a connect that failed will be reported by lws or must be ended here is the session's call.
        run(session.connectReturned(opened: connected != nil, wsiMade: created != nil, now: SystemClock.monotonic(),
                                    random: random()))
    }

    /// The connection is over: lws is done with the wsi, and the session decides what follows.
    private func ended(_ reason: String) {
        forget()
        run(session.ended(reason, now: SystemClock.monotonic(), random: random()))
    }

    /// lws is done with the wsi: nothing touches it again, and what was queued for it goes.
    private func forget() {
        wsi = nil
        outbox.removeAll()
        inbox.removeAll()
    }

    // MARK: - Callbacks

    func handle(wsi: OpaquePointer?, reason: lws_callback_reasons, input: UnsafeMutableRawPointer?, length: Int) -> Int32 {
        guard let wsi, wsi == self.wsi || reason == LWS_CALLBACK_CLIENT_CONNECTION_ERROR else { return 0 }
        switch reason {
        case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER:
            session.upgrading(now: SystemClock.monotonic())
            return appendHeaders(wsi, input, length)
        case LWS_CALLBACK_CLIENT_ESTABLISHED:
            run(session.established(now: SystemClock.monotonic()))
        case LWS_CALLBACK_CLIENT_RECEIVE:
            return receive(wsi, input, length)
        case LWS_CALLBACK_CLIENT_WRITEABLE:
            return writeNext(wsi)
        case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
            peerClosed(input, length)
        case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
            guard wsi == self.wsi || self.wsi == nil else { return 0 }
            let message = input.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? "connection failed"
            forget()
            run(session.connectError(message, now: SystemClock.monotonic(), random: random()))
        case LWS_CALLBACK_CLIENT_CLOSED:
            ended("closed")
        case LWS_CALLBACK_CLOSED_CLIENT_HTTP:
            // Closed before the upgrade was answered: lws's own deadline, or the server hung up on the request.
            ended("closed before the upgrade was answered")
        case LWS_CALLBACK_WSI_DESTROY:
            // Only reached for a wsi still ours: lws is freeing one that ended without any callback above.
            ended("connection ended")
        default:
            break
        }
        return 0
    }

    /// The upgrade's `Authorization`: not needed by Prefect (the auth message is), but proxies in front of it may ask.
    private func appendHeaders(_ wsi: OpaquePointer, _ input: UnsafeMutableRawPointer?, _ length: Int) -> Int32 {
        guard let authorization, let input else { return 0 }
        let cursor = input.assumingMemoryBound(to: UnsafeMutablePointer<UInt8>?.self)
        let end = cursor.pointee! + length
        return ("authorization:" as String).withCString { n in
            authorization.withCString { v in
                lws_add_http_header_by_name(wsi, UnsafeRawPointer(n).assumingMemoryBound(to: UInt8.self),
                                            UnsafeRawPointer(v).assumingMemoryBound(to: UInt8.self),
                                            Int32(strlen(v)), cursor, end)
            }
        } != 0 ? -1 : 0
    }

    /// Collects a message's fragments (bounded by `EventsSession.maxMessage`) and hands the whole message on.
    private func receive(_ wsi: OpaquePointer, _ input: UnsafeMutableRawPointer?, _ length: Int) -> Int32 {
        guard let input else { return 0 }
        if case .close(let code, let reason, let bytes) = EventsSession.fragment(buffered: inbox.count, adding: length) {
            Log.warn("events.oversized", ["bytes": String(bytes)])
            inbox.removeAll()
            // The close frame's code and words; returning -1 has lws send it and close the connection.
            var words = Array(reason.utf8)
            lws_close_reason(wsi, lws_close_status(rawValue: UInt32(code)), &words, words.count)
            return -1
        }
        inbox.append(contentsOf: UnsafeRawBufferPointer(start: input, count: length))
        if lws_is_final_fragment(wsi) != 0 && lws_remaining_packet_payload(wsi) == 0 {
            // Handed over before it is cleared: the buffer is unshared again by then, so clearing it keeps its
            // storage instead of allocating a fresh one per message.
            received(inbox)
            inbox.removeAll(keepingCapacity: true)
        }
        return 0
    }

    /// Writes the next queued text message (lws wants `LWS_PRE` bytes of room before it).
    private func writeNext(_ wsi: OpaquePointer) -> Int32 {
        guard !outbox.isEmpty else { return 0 }
        let text = Array(outbox.removeFirst().utf8)
        let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: CShims_LWS_PRE + text.count)
        defer { buffer.deallocate() }
        text.withUnsafeBufferPointer { (buffer + CShims_LWS_PRE).update(from: $0.baseAddress!, count: text.count) }
        if lws_write(wsi, buffer + CShims_LWS_PRE, text.count, LWS_WRITE_TEXT) < text.count { return -1 }
        if !outbox.isEmpty { lws_callback_on_writable(wsi) }
        return 0
    }

    /// The server's close frame: keeps its code and reason for the log; 1008 is a refused credential.
    private func peerClosed(_ input: UnsafeMutableRawPointer?, _ length: Int) {
        guard let input, length >= 2 else { return }
        let bytes = UnsafeRawBufferPointer(start: input, count: length)
        let code = Int(bytes[0]) << 8 | Int(bytes[1])
        let text = String(decoding: bytes.dropFirst(2).prefix(200), as: UTF8.self)
        run(session.closeFrame(code: code, text: text))
    }

    private func received(_ bytes: [UInt8]) {
        guard let message = try? JSONParser.parse(bytes) else {
            Log.warn("events.unparsable", ["bytes": String(bytes.count)])
            return
        }
        switch message["type"]?.string {
        case "auth_success":
            run(session.authSucceeded(now: SystemClock.monotonic()))
        case "event":
            guard let event = message["event"] else { return }
            if let occurred = event["occurred"]?.string { lastOccurred = occurred }
            deliver(.event(event))
        default:
            Log.debug("events.ignored", ["type": message["type"]?.string ?? "?"])
        }
    }

    private func send(_ text: String) {
        outbox.append(text)
        if let wsi { lws_callback_on_writable(wsi) }
    }

    /// The relay filter: every event whose primary resource is a flow run (state changes, and custom events such
    /// as `work.waiting` that an alert may quote) or an artifact collection (keyed artifacts), no heartbeats, over
    /// `EventsSession.backfillWindow`.
    func filterMessage() -> String {
        let window = EventsSession.backfillWindow(lastOccurred: lastOccurred, now: now())
        let filter: JSONValue = [
            "occurred": ["since": .string(Timestamp.format(window.since)), "until": .string(Timestamp.format(window.until))],
            "event": ["exclude_name": ["prefect.flow-run.heartbeat"]],
            // Flow runs' own events, and keyed artifacts (their run is a related resource): see RecentRunEvents.
            "resource": ["id_prefix": ["prefect.flow-run.", "prefect.artifact-collection."]],
        ]
        return JSONValue.object(["type": "filter", "filter": filter, "backfill": true]).encoded()
    }
}

extension WebSocketsLoop {
    /// Connects the events socket this loop was made with. Safe from any thread.
    func startEvents() { perform(onHandler: EventsSocket.self) { $0.start() } }

    /// Closes the events socket this loop was made with and stops it reconnecting. Safe from any thread.
    func stopEvents() { perform(onHandler: EventsSocket.self) { $0.stop() } }
}
