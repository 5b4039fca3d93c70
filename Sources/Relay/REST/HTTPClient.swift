import CShims
import CWebSockets
import Glibc
import RelayCore

/// A finished HTTP exchange with a peer: status and body (bounded).
struct HTTPReply: Sendable {
    let status: Int
    let body: [UInt8]
}

/// Why an HTTP call got no answer: the peer was unreachable, too slow, or answered too much.
struct HTTPFailure: Error, Sendable, CustomStringConvertible {
    let reason: String
    var description: String { reason }
}

/// One outgoing HTTP/1.1 request, as the loop needs it.
struct HTTPCall: Sendable {
    var method: String
    var url: HTTPURL
    var path: String
    var headers: [(String, String)]
    var body: [UInt8]?
    var timeoutSeconds: Int32 = 10
}

/// HTTP/1.1 client calls on the loop's vhost (REST reads from Prefect and the credential check).
/// One connection per call; `send(_:)` is safe from any thread and resumes exactly once, with the reply or a
/// failure (connection error, timeout, body over `maxResponse`).
final class HTTPClient: LWSHandler, @unchecked Sendable {
    let protocolName = "http-client"
    static let maxResponse = 8 * 1024 * 1024

    private final class Pending {
        let call: HTTPCall
        let continuation: CheckedContinuation<Result<HTTPReply, HTTPFailure>, Never>
        var status = 0
        var body: [UInt8] = []
        var sentBody = false
        var finished = false
        // C strings lws reads during connect; owned here, freed in deinit.
        var cStrings: [UnsafeMutablePointer<CChar>] = []

        init(call: HTTPCall, continuation: CheckedContinuation<Result<HTTPReply, HTTPFailure>, Never>) {
            self.call = call
            self.continuation = continuation
        }

        func finish(_ result: Result<HTTPReply, HTTPFailure>) {
            guard !finished else { return }
            finished = true
            continuation.resume(returning: result)
        }

        func cString(_ s: String) -> UnsafePointer<CChar> {
            let copy = strdup(s)!
            cStrings.append(copy)
            return UnsafePointer(copy)
        }

        deinit { cStrings.forEach { free($0) } }
    }

    weak var loop: WebSocketsLoop?
    private var pending: [UInt64: Pending] = [:]
    private var nextID: UInt64 = 1

    func send(_ call: HTTPCall) async -> Result<HTTPReply, HTTPFailure> {
        guard let loop else { return .failure(HTTPFailure(reason: "the relay is shutting down")) }
        return await withCheckedContinuation { continuation in
            loop.perform { self.start(Pending(call: call, continuation: continuation)) }
        }
    }

    /// Loop thread: opens the connection for one call.
    private func start(_ p: Pending) {
        guard let loop else { return p.finish(.failure(HTTPFailure(reason: "the relay is shutting down"))) }
        let id = nextID
        nextID += 1
        var info = lws_client_connect_info()
        info.context = loop.lwsContext
        info.address = p.cString(p.call.url.host)
        info.port = Int32(p.call.url.port)
        info.ssl_connection = p.call.url.tls ? Int32(LCCSCF_USE_SSL.rawValue) : 0
        info.path = p.cString(p.call.path)
        info.host = p.cString(p.call.url.authority)
        info.origin = info.host
        info.method = p.cString(p.call.method)
        info.alpn = p.cString("http/1.1")
        info.local_protocol_name = p.cString(protocolName)
        info.protocol = info.local_protocol_name
        info.opaque_user_data = UnsafeMutableRawPointer(bitPattern: UInt(id))
        pending[id] = p
        var wsi: OpaquePointer?
        // lws writes the new wsi through `pwsi` during this call only (connect.c@v4.1.6), so the pointer is used
        // inside the closure that makes it valid, never after.
        let connected = withUnsafeMutablePointer(to: &wsi) { slot -> OpaquePointer? in
            info.pwsi = slot
            defer { info.pwsi = nil }
            return lws_client_connect_via_info(&info)
        }
        if connected == nil {
            // lws may already have reported CLIENT_CONNECTION_ERROR; finish() is idempotent.
            pending[id] = nil
            p.finish(.failure(HTTPFailure(reason: "could not start a connection to \(p.call.url.authority)")))
        } else if let wsi {
            lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, p.call.timeoutSeconds)
        }
    }

    func handle(wsi: OpaquePointer?, reason: lws_callback_reasons, input: UnsafeMutableRawPointer?, length: Int) -> Int32 {
        guard let wsi, let raw = lws_get_opaque_user_data(wsi) else { return 0 }
        let id = UInt64(UInt(bitPattern: raw))
        guard let p = pending[id] else { return 0 }
        switch reason {
        case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER:
            guard let input else { return -1 }
            let cursor = input.assumingMemoryBound(to: UnsafeMutablePointer<UInt8>?.self)
            let end = cursor.pointee! + length
            var headers = p.call.headers
            if let body = p.call.body {
                headers.append(("content-length", String(body.count)))
            }
            for (name, value) in headers where addHeader(wsi, name, value, cursor, end) != 0 { return -1 }
            if p.call.body != nil {
                lws_client_http_body_pending(wsi, 1)
                lws_callback_on_writable(wsi)
            }
            return 0
        case LWS_CALLBACK_CLIENT_HTTP_WRITEABLE:
            guard let body = p.call.body, !p.sentBody else { return 0 }
            p.sentBody = true
            let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: CShims_LWS_PRE + body.count + 1)
            defer { buffer.deallocate() }
            body.withUnsafeBufferPointer { (buffer + CShims_LWS_PRE).update(from: $0.baseAddress!, count: body.count) }
            lws_client_http_body_pending(wsi, 0)
            return lws_write(wsi, buffer + CShims_LWS_PRE, body.count, LWS_WRITE_HTTP_FINAL) < 0 ? -1 : 0
        case LWS_CALLBACK_ESTABLISHED_CLIENT_HTTP:
            p.status = Int(lws_http_client_http_response(wsi))
            lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, p.call.timeoutSeconds)
            return 0
        case LWS_CALLBACK_RECEIVE_CLIENT_HTTP:
            var buffer = [CChar](repeating: 0, count: CShims_LWS_PRE + 16 * 1024)
            return buffer.withUnsafeMutableBufferPointer { raw -> Int32 in
                var start: UnsafeMutablePointer<CChar>? = raw.baseAddress! + CShims_LWS_PRE
                var available = Int32(raw.count - CShims_LWS_PRE)
                return lws_http_client_read(wsi, &start, &available) < 0 ? -1 : 0
            }
        case LWS_CALLBACK_RECEIVE_CLIENT_HTTP_READ:
            guard let input else { return 0 }
            if p.body.count + length > HTTPClient.maxResponse {
                finish(id, .failure(HTTPFailure(reason: "the answer was over \(HTTPClient.maxResponse / 1024 / 1024) MiB")))
                return -1
            }
            p.body.append(contentsOf: UnsafeRawBufferPointer(start: input, count: length))
            return 0
        case LWS_CALLBACK_COMPLETED_CLIENT_HTTP:
            finish(id, .success(HTTPReply(status: p.status, body: p.body)))
            return -1  // one call per connection: close it now
        case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
            let message = input.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? "connection failed"
            finish(id, .failure(HTTPFailure(reason: "\(p.call.url.authority): \(message)")))
            return 0
        case LWS_CALLBACK_CLOSED_CLIENT_HTTP, LWS_CALLBACK_WSI_DESTROY:
            finish(id, .failure(HTTPFailure(reason: "\(p.call.url.authority) closed the connection before answering (or timed out)")))
            lws_set_opaque_user_data(wsi, nil)
            return 0
        default:
            return 0
        }
    }

    private func finish(_ id: UInt64, _ result: Result<HTTPReply, HTTPFailure>) {
        guard let p = pending.removeValue(forKey: id) else { return }
        p.finish(result)
    }

    private func addHeader(_ wsi: OpaquePointer, _ name: String, _ value: String,
                           _ cursor: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>, _ end: UnsafeMutablePointer<UInt8>) -> Int32 {
        (name + ":").withCString { n in
            value.withCString { v in
                lws_add_http_header_by_name(wsi, UnsafeRawPointer(n).assumingMemoryBound(to: UInt8.self),
                                            UnsafeRawPointer(v).assumingMemoryBound(to: UInt8.self),
                                            Int32(strlen(v)), cursor, end)
            }
        }
    }
}
