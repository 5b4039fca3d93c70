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

/// How the events socket ended, as far as anything decides on it: the backoff, `/health`, `check`'s advice.
enum SocketEnd: Sendable, Equatable {
    /// Prefect refused the credential: a close 1008 after the auth message, or the upgrade answered 401.
    case credentialRefused
    /// The upgrade was answered 403: Prefect, or a proxy in front of it, refused it.
    case upgradeForbidden
    /// A stage (connect, TLS, upgrade, auth) did not finish within its deadline.
    case timedOut
    /// Anything else: the link dropped, a refused connect, a close with another code.
    case lost

    /// A refusal won't fix itself: no fast retries, and `/health` says so.
    var isRefusal: Bool { self == .credentialRefused || self == .upgradeForbidden }

    /// What a failed connect was, from lws's words: lws 4.1.6 reports a failed client connect only as text
    /// (`client-handshake.c`), so its words are read here, once. A 403 counts only as a status, never as digits
    /// anywhere: a reason naming port 40351 is no refusal.
    static func ofConnectError(_ message: String) -> SocketEnd {
        if message.includes("upgrade unauthorized") { return .credentialRefused }
        if message.hasPrefix("403 ") || message.includes("HTTP/1.1 403") { return .upgradeForbidden }
        return .lost
    }
}

/// The client for Prefect's `/api/events/out` WebSocket (`src/prefect/server/api/events.py`) on the loop's vhost:
/// subprotocol `prefect`, `{"type":"auth","token":…}`, then one `filter` for `prefect.flow-run.*` events with
/// `occurred.until` a year ahead (the server applies `until` to live events too) and backfill on.
/// Reconnects with jittered exponential backoff; lws PINGs a socket that goes quiet and hangs up on one that stays
/// silent (`retryPolicy`). Every stage before that has a deadline (`stageTimeout`): the TCP connect and TLS handshake
/// and the upgrade's answer are lws's own (the context's `timeout_secs`), the auth reply is ours; a stage that runs
/// out is a disconnect like any other, named after the stage. Loop thread only, except `start()`/`stop()`, which hop
/// onto the loop.
///
/// The wsi is ours from `lws_client_connect_via_info` until the first callback that ends it: CONNECTION_ERROR,
/// CLIENT_CLOSED, CLOSED_CLIENT_HTTP (a connection closed before its upgrade was answered, as lws's own timeout does)
/// or, whatever came before, WSI_DESTROY. Past that point lws has freed it, so `wsi` is cleared there and nothing
/// touches it again.
final class EventsSocket: LWSHandler, @unchecked Sendable {
    let protocolName = "prefect"
    static let maxMessage = 1024 * 1024

    /// Where a connection is; each stage before `subscribed` has `stageTimeout` to finish.
    private enum Phase {
        case idle, connecting, upgrading, authenticating, subscribed

        /// What did not finish when a connection ended in this phase after its deadline.
        var stalledStage: String {
            switch self {
            case .idle, .connecting: "the TCP connect or TLS handshake"
            case .upgrading: "the WebSocket upgrade (no HTTP answer)"
            case .authenticating, .subscribed: "the auth message (no auth_success)"
            }
        }
    }
    /// Seconds each stage may take: lws's `timeout_secs` on this loop's context, and the auth reply's own timer.
    static let stageTimeout: Int32 = 10

    weak var loop: WebSocketsLoop?
    private let url: HTTPURL
    /// The proxy the loop's vhost tunnels through (`ProxyRule`'s route for `url`), or nil: direct.
    private let proxy: ProxyEndpoint?
    private let authToken: String?
    private let authorization: String?
    private let credentialFix: String
    private let credentialName: String
    /// A refusal was already logged at error level; repeats (every backoff maximum) go to debug until one succeeds.
    private var refusalLogged = false
    private let deliver: @Sendable (SocketMessage) -> Void
    private let backoff = Backoff.eventsSocket
    /// Disconnects since the last subscribe: the backoff's n.
    private var disconnectsInARow = 0
    private let random: @Sendable () -> Double
    private let now: @Sendable () -> Double

    private var wsi: OpaquePointer?
    private var phase = Phase.idle
    private var stageStarted = 0.0
    /// Failed connects since the last subscription, and when one was last logged at warn level (at most once a
    /// minute after the first, so a Prefect that stays away writes a line a minute, not one per attempt).
    private var failedConnects = 0
    private var lastFailureLogged = -Double.infinity
    private var outbox: [String] = []
    private var inbox: [UInt8] = []
    private var lastOccurred: String?
    private var closeNote: String?
    /// How this connection ended, once a close frame or a connect error said.
    private var ending = SocketEnd.lost
    private var stopped = false
    private var generation = 0
    // C keeps pointers to these for the life of the context: owned here, freed in deinit.
    private let cStrings: [UnsafeMutablePointer<CChar>]
    private let retryTable: UnsafeMutablePointer<UInt32>
    private let retryPolicy: UnsafeMutablePointer<lws_retry_bo_t>

    init(config: Config, deliver: @escaping @Sendable (SocketMessage) -> Void,
         random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }, now: @escaping @Sendable () -> Double = SystemClock.unixNow) {
        url = config.prefectAPI
        proxy = config.proxy.route(for: config.prefectAPI).endpoint
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

    /// Connects (from any thread).
    func start() { loop?.perform { self.connect() } }

    /// Closes the socket and stops reconnecting (from any thread).
    func stop() {
        loop?.perform {
            self.stopped = true
            if let wsi = self.wsi { lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC) }
        }
    }

    // MARK: - Connecting

    private func connect() {
        guard !stopped, wsi == nil, let loop else { return }
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
        enter(.connecting)
        closeNote = nil
        ending = .lost
        var created: OpaquePointer?
        // lws writes the new wsi through `pwsi` during this call only (connect.c@v4.1.6): the pointer stays inside
        // the closure that makes it valid.
        let connected = withUnsafeMutablePointer(to: &created) { slot -> OpaquePointer? in
            info.pwsi = slot
            defer { info.pwsi = nil }
            return lws_client_connect_via_info(&info)
        }
        if connected == nil {
            // lws reports CLIENT_CONNECTION_ERROR itself when it got that far; otherwise retry from here.
            if created == nil && phase == .connecting { disconnected("could not start the connection") }
        } else {
            wsi = created
        }
    }

    private func enter(_ next: Phase) {
        phase = next
        stageStarted = SystemClock.monotonic()
    }

    private func disconnected(_ reason: String) {
        let endedIn = phase
        let stalled = endedIn != .subscribed && SystemClock.monotonic() - stageStarted >= Double(EventsSocket.stageTimeout) - 0.5
        wsi = nil
        phase = .idle
        outbox.removeAll()
        inbox.removeAll()
        guard !stopped else { return }
        disconnectsInARow += 1
        var delay = backoff.delay(failures: disconnectsInARow, random: random())
        if ending.isRefusal {
            delay = max(delay, backoff.maximum)  // a refused credential won't fix itself: don't hammer the server
        }
        if ending == .lost && closeNote == nil && stalled { ending = .timedOut }
        let note = closeNote ?? (stalled ? "timeout: \(endedIn.stalledStage) did not finish within "
                                         + "\(EventsSocket.stageTimeout) s" : reason)
        if endedIn != .subscribed { connectFailed(note, retryIn: delay) }
        deliver(.disconnected(ending, reason: note, retryIn: delay))
        generation += 1
        let expected = generation
        Task(executorPreference: RelayExecutor.shared) { [weak self] in
            try? await Task.sleep(for: .milliseconds(Int(delay * 1000)))
            guard let self else { return }
            self.loop?.perform { if self.generation == expected { self.connect() } }
        }
    }

    // MARK: - Callbacks

    func handle(wsi: OpaquePointer?, reason: lws_callback_reasons, input: UnsafeMutableRawPointer?, length: Int) -> Int32 {
        guard let wsi, wsi == self.wsi || reason == LWS_CALLBACK_CLIENT_CONNECTION_ERROR else { return 0 }
        switch reason {
        case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER:
            enter(.upgrading)
            return appendHeaders(wsi, input, length)
        case LWS_CALLBACK_CLIENT_ESTABLISHED:
            enter(.authenticating)
            // lws times the connect and the upgrade; the auth reply is timed here, cleared by auth_success.
            lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, EventsSocket.stageTimeout)
            let token: JSONValue = authToken.map { .string($0) } ?? .null
            send(JSONValue.object(["type": "auth", "token": token]).encoded())
        case LWS_CALLBACK_CLIENT_RECEIVE:
            return receive(wsi, input, length)
        case LWS_CALLBACK_CLIENT_WRITEABLE:
            return writeNext(wsi)
        case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
            peerClosed(input, length)
        case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
            guard wsi == self.wsi || self.wsi == nil else { return 0 }
            var message = input.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? "connection failed"
            if let proxy, message.hasPrefix("proxy") {
                // lws's words for a CONNECT answered with anything but 200 (or a proxy that hung up): say which
                // proxy and target. (Worded without "403": that would read as Prefect refusing the credential.)
                message = "proxy \(proxy) refused CONNECT to \(url.host):\(url.port) (\(message)): check the "
                    + "user:pass@ in the proxy URL (407) and that the proxy allows this target, or list the host in NO_PROXY"
            } else {
                ending = SocketEnd.ofConnectError(message)
                if ending.isRefusal { refused(message + " (the server refused the upgrade; check PREFECT_API_URL too)") }
            }
            disconnected(message)
        case LWS_CALLBACK_CLIENT_CLOSED:
            disconnected("closed")
        case LWS_CALLBACK_CLOSED_CLIENT_HTTP:
            // Closed before the upgrade was answered: lws's own deadline, or the server hung up on the request.
            disconnected("closed before the upgrade was answered")
        case LWS_CALLBACK_WSI_DESTROY:
            // Only reached for a wsi still ours: lws is freeing one that ended without any callback above.
            disconnected("connection ended")
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

    /// Collects a message's fragments (bounded by `maxMessage`) and hands the whole message on.
    private func receive(_ wsi: OpaquePointer, _ input: UnsafeMutableRawPointer?, _ length: Int) -> Int32 {
        guard let input else { return 0 }
        if inbox.count + length > EventsSocket.maxMessage {
            Log.warn("events.oversized", ["bytes": String(inbox.count + length)])
            inbox.removeAll()
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
        closeNote = "\(code) \(text)"
        if code == 1008 {
            ending = .credentialRefused
            refused(text)
        }
    }

    private func received(_ bytes: [UInt8]) {
        guard let message = try? JSONParser.parse(bytes) else {
            Log.warn("events.unparsable", ["bytes": String(bytes.count)])
            return
        }
        switch message["type"]?.string {
        case "auth_success":
            enter(.subscribed)
            if let wsi { lws_set_timeout(wsi, NO_PENDING_TIMEOUT, 0) }
            refusalLogged = false
            failedConnects = 0
            lastFailureLogged = -Double.infinity
            disconnectsInARow = 0
            send(filterMessage())
            deliver(.subscribed)
        case "event":
            guard let event = message["event"] else { return }
            if let occurred = event["occurred"]?.string { lastOccurred = occurred }
            deliver(.event(event))
        default:
            Log.debug("events.ignored", ["type": message["type"]?.string ?? "?"])
        }
    }

    /// A connection that ended before it was subscribed: the first of a run of failures is a warning, then one a
    /// minute with the count (a refused credential has its own error line, `refused`).
    private func connectFailed(_ reason: String, retryIn: Double) {
        failedConnects += 1
        guard !ending.isRefusal else { return }
        let fields: KeyValuePairs<String, String> = [
            "url": (url.tls ? "wss://" : "ws://") + url.authority + url.path + "/events/out", "reason": reason,
            "attempts": String(failedConnects), "retry_in_ms": String(Int(retryIn * 1000)),
            "via": proxy?.description ?? "direct",
        ]
        if SystemClock.monotonic() - lastFailureLogged >= 60 {
            lastFailureLogged = SystemClock.monotonic()
            Log.warn("events.connect_failed", fields)
        } else {
            Log.debug("events.connect_failed", fields)
        }
    }

    /// Prefect refused the credential: one clear error line (then debug lines while it keeps refusing).
    private func refused(_ reason: String) {
        let fields: KeyValuePairs<String, String> = ["reason": reason, "credential": credentialName,
                                                      "fix": credentialFix]
        if refusalLogged { Log.debug("events.auth_rejected", fields) } else { Log.error("events.auth_rejected", fields) }
        refusalLogged = true
    }

    private func send(_ text: String) {
        outbox.append(text)
        if let wsi { lws_callback_on_writable(wsi) }
    }

    /// The relay filter: every event whose primary resource is a flow run (state changes, and custom events such
    /// as `work.waiting` that an alert may quote) or an artifact collection (keyed artifacts), no heartbeats, from a minute before the last event seen (the
    /// server clamps `since` to 15 min) until a year ahead.
    func filterMessage() -> String {
        let nowSeconds = now()
        let since = lastOccurred.flatMap(Timestamp.parse).map { $0 - 60 } ?? (nowSeconds - 15 * 60)
        let filter: JSONValue = [
            "occurred": ["since": .string(Timestamp.format(since)), "until": .string(Timestamp.format(nowSeconds + 365 * 86400))],
            "event": ["exclude_name": ["prefect.flow-run.heartbeat"]],
            // Flow runs' own events, and keyed artifacts (their run is a related resource): see RecentRunEvents.
            "resource": ["id_prefix": ["prefect.flow-run.", "prefect.artifact-collection."]],
        ]
        return JSONValue.object(["type": "filter", "filter": filter, "backfill": true]).encoded()
    }
}
