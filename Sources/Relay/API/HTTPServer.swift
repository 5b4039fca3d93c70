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
}

/// The HTTP API's server side on the loop's vhost (protocol 0, so lws hands it every HTTP request).
/// Frames requests: route (404/405), Content-Length (411/413, refused before any body is buffered), content type
/// (415); then passes an `APIRequest` to `onRequest` and writes whatever comes back to `reply`.
/// Loop thread only, except `reply`, which hops onto the loop.
final class HTTPServer: LWSHandler, @unchecked Sendable {
    let protocolName = "http-api"
    typealias Reply = @Sendable (APIResponse) -> Void

    private struct Exchange {
        var method = ""
        var route: Route?
        var authorization: String?
        var body: [UInt8] = []
        var expectsBody = false
        var pending: APIResponse?
        var closeAfterReply = false
        var dispatched = false
    }

    weak var loop: WebSocketsLoop?
    private let router: Router
    private let onRequest: @Sendable (APIRequest, @escaping Reply) -> Void
    private var exchanges: [UInt64: Exchange] = [:]
    private var connections: [UInt64: OpaquePointer] = [:]
    private var nextID: UInt64 = 1
    /// A slow or silent client gets this long to send its body.
    private let bodyTimeoutSeconds: Int32 = 10

    init(router: Router, onRequest: @escaping @Sendable (APIRequest, @escaping Reply) -> Void) {
        self.router = router
        self.onRequest = onRequest
    }

    func handle(wsi: OpaquePointer?, reason: lws_callback_reasons, input: UnsafeMutableRawPointer?, length: Int) -> Int32 {
        guard let wsi else { return 0 }
        switch reason {
        case LWS_CALLBACK_HTTP:
            let path = input.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? "/"
            return begin(wsi, path: path)
        case LWS_CALLBACK_HTTP_BODY:
            guard let id = connectionID(wsi), var exchange = exchanges[id] else { return 0 }
            if exchange.expectsBody && exchange.pending == nil, let input {
                if exchange.body.count + length > Validation.maxBody {
                    exchange.pending = APIError(status: 413, message: "the body is over 64 KiB").response
                    exchange.closeAfterReply = true
                    exchanges[id] = exchange
                    lws_callback_on_writable(wsi)
                    return 0
                }
                exchange.body.append(contentsOf: UnsafeRawBufferPointer(start: input, count: length))
                exchanges[id] = exchange
            }
            return 0
        case LWS_CALLBACK_HTTP_BODY_COMPLETION:
            guard let id = connectionID(wsi), exchanges[id] != nil else { return 0 }
            lws_set_timeout(wsi, NO_PENDING_TIMEOUT, 0)
            dispatch(id)
            return 0
        case LWS_CALLBACK_HTTP_WRITEABLE:
            guard let id = connectionID(wsi), let exchange = exchanges[id], let response = exchange.pending else {
                return 0
            }
            exchanges[id] = nil
            if write(response, to: wsi, close: exchange.closeAfterReply, head: exchange.method == "HEAD") != 0 {
                return -1
            }
            if exchange.closeAfterReply { return -1 }
            return lws_http_transaction_completed(wsi) != 0 ? -1 : 0
        case LWS_CALLBACK_CLOSED_HTTP, LWS_CALLBACK_WSI_DESTROY:
            if let id = connectionID(wsi) {
                exchanges[id] = nil
                connections[id] = nil
                lws_set_opaque_user_data(wsi, nil)
            }
            return 0
        default:
            return lws_callback_http_dummy(wsi, reason, nil, input, length)
        }
    }

    // MARK: - Requests

    private func begin(_ wsi: OpaquePointer, path: String) -> Int32 {
        let id = connectionID(wsi) ?? newConnection(wsi)
        var exchange = Exchange()
        exchange.method = method(of: wsi)
        let contentLength = header(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH).flatMap { Int($0) }
        let chunked = header(wsi, WSI_TOKEN_HTTP_TRANSFER_ENCODING)?.lowercased().includes("chunked") ?? false
        exchange.authorization = header(wsi, WSI_TOKEN_HTTP_AUTHORIZATION)
        exchange.expectsBody = (contentLength ?? 0) > 0 || chunked

        switch router.route(method: exchange.method, rawPath: path) {
        case .failure(let error):
            exchange.pending = error.response
            exchange.closeAfterReply = exchange.expectsBody  // don't read a body we won't use
        case .success(let route):
            exchange.route = route
            if route.takesBody {
                if chunked || contentLength == nil {
                    exchange.pending = APIError(status: 411, message: "send the JSON body with a Content-Length header")
                        .response
                    exchange.closeAfterReply = true
                } else if let contentLength, contentLength > Validation.maxBody {
                    exchange.pending = APIError(status: 413, message: "the body is \(contentLength) bytes; the limit is 64 KiB")
                        .response
                    exchange.closeAfterReply = true
                } else if !Validation.isJSONContentType(header(wsi, WSI_TOKEN_HTTP_CONTENT_TYPE)) {
                    exchange.pending = APIError(status: 415, message: "send the body as Content-Type: application/json")
                        .response
                    exchange.closeAfterReply = exchange.expectsBody
                }
            }
        }
        exchanges[id] = exchange
        if exchange.pending != nil {
            lws_callback_on_writable(wsi)
        } else if exchange.expectsBody {
            lws_set_timeout(wsi, PENDING_TIMEOUT_HTTP_CONTENT, bodyTimeoutSeconds)
        } else {
            dispatch(id)
        }
        return 0
    }

    private func dispatch(_ id: UInt64) {
        guard var exchange = exchanges[id], !exchange.dispatched, exchange.pending == nil, let route = exchange.route
        else { return }
        exchange.dispatched = true
        exchanges[id] = exchange
        let request = APIRequest(route: route, method: exchange.method, authorization: exchange.authorization,
                                 body: exchange.body)
        onRequest(request) { [weak self] response in
            guard let self, let loop = self.loop else { return }
            loop.perform { self.deliver(response, to: id) }
        }
    }

    /// Loop thread: stores the answer and asks lws for a writable callback, if the client is still there.
    private func deliver(_ response: APIResponse, to id: UInt64) {
        guard let wsi = connections[id], var exchange = exchanges[id] else { return }
        exchange.pending = response
        exchanges[id] = exchange
        lws_callback_on_writable(wsi)
    }

    // MARK: - Writing

    private func write(_ response: APIResponse, to wsi: OpaquePointer, close: Bool, head: Bool) -> Int32 {
        let body = Array((response.body ?? "").utf8)
        let sentBody = head ? [] : body
        let capacity = CShims_LWS_PRE + 1024 + sentBody.count
        let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
        defer { buffer.deallocate() }
        let start = buffer + CShims_LWS_PRE
        var p: UnsafeMutablePointer<UInt8>? = start
        let end = start + 1024
        let type: String? = response.status == 204 ? nil : response.contentType
        let failed: Bool = withOptionalCString(type) { typePtr in
            if response.status == 204 {
                // No Content-Length on a 204 (RFC 9110 §8.6), and no common headers: lws would read the missing
                // length as "close the connection" and end a keep-alive for nothing.
                if lws_add_http_header_status(wsi, 204, &p, end) != 0 { return true }
            } else if lws_add_http_common_headers(wsi, UInt32(response.status), typePtr, UInt64(body.count),
                                                  &p, end) != 0 { return true }
            for (name, value) in response.headers + [("cache-control", "no-store")] {
                let nameWithColon = name + ":"
                let added = nameWithColon.withCString { n in
                    value.withCString { v in
                        lws_add_http_header_by_name(wsi, UnsafeRawPointer(n).assumingMemoryBound(to: UInt8.self),
                                                    UnsafeRawPointer(v).assumingMemoryBound(to: UInt8.self),
                                                    Int32(strlen(v)), &p, end)
                    }
                }
                if added != 0 { return true }
            }
            return lws_finalize_http_header(wsi, &p, end) != 0
        }
        if failed { return -1 }
        guard var cursor = p else { return -1 }
        if !sentBody.isEmpty {
            sentBody.withUnsafeBufferPointer { cursor.update(from: $0.baseAddress!, count: $0.count) }
            cursor += sentBody.count
        }
        let total = cursor - start
        return lws_write(wsi, start, total, LWS_WRITE_HTTP_FINAL) < 0 ? -1 : 0
    }

    // MARK: - Helpers

    private func newConnection(_ wsi: OpaquePointer) -> UInt64 {
        let id = nextID
        nextID += 1
        connections[id] = wsi
        lws_set_opaque_user_data(wsi, UnsafeMutableRawPointer(bitPattern: UInt(id)))
        return id
    }

    private func connectionID(_ wsi: OpaquePointer) -> UInt64? {
        guard let raw = lws_get_opaque_user_data(wsi) else { return nil }
        let id = UInt64(UInt(bitPattern: raw))
        return connections[id] == wsi ? id : nil
    }

    private func method(of wsi: OpaquePointer) -> String {
        let methods: [(lws_token_indexes, String)] = [
            (WSI_TOKEN_GET_URI, "GET"), (WSI_TOKEN_POST_URI, "POST"), (WSI_TOKEN_PUT_URI, "PUT"),
            (WSI_TOKEN_DELETE_URI, "DELETE"), (WSI_TOKEN_PATCH_URI, "PATCH"), (WSI_TOKEN_OPTIONS_URI, "OPTIONS"),
            (WSI_TOKEN_HEAD_URI, "HEAD"),
        ]
        for (token, name) in methods where lws_hdr_total_length(wsi, token) > 0 { return name }
        return "UNKNOWN"
    }

    private func header(_ wsi: OpaquePointer, _ token: lws_token_indexes) -> String? {
        let length = Int(lws_hdr_total_length(wsi, token))
        guard length > 0, length < 8192 else { return nil }
        var buffer = [CChar](repeating: 0, count: length + 1)
        guard lws_hdr_copy(wsi, &buffer, Int32(buffer.count), token) >= 0 else { return nil }
        return String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

func withOptionalCString<R>(_ s: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let s else { return body(nil) }
    return s.withCString { body($0) }
}
