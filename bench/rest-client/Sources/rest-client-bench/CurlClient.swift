import CurlPool
import Glibc
@testable import Relay
import RelayCore

/// The relay's REST client on libcurl's multi interface: `HTTPPool.send`'s calls and answers (`HTTPCall` in,
/// `HTTPReply` or `HTTPFailure` out) over the C engine in Sources/CurlPool. What a switch would put in place of
/// `HTTPPool*.swift`, `HTTPConnection.swift` and `HTTP1Request`/`HTTP1Response` (docs/rest-client.md).
///
/// `@unchecked Sendable`: `pool` is used only through `curl_pool_submit` and `curl_pool_connections_opened`,
/// which are safe from any thread; `close()` once, after the last caller.
final class CurlClient: @unchecked Sendable {
    struct Options: Sendable {
        var maxConnectionsPerHost = 6
        var maxInFlightPerGroup = 3
        var connectTimeoutMs = 5_000
        var abandonedHoldMs = 60_000
        var idleTimeoutSeconds = 30
        var caFile: String?
        var proxy: ProxyRule = .none
    }

    let options: Options
    private let pool: OpaquePointer

    init(options: Options = Options()) throws(HTTPFailure) {
        self.options = options
        var error = [CChar](repeating: 0, count: 256)
        let userAgent = "prefect-push/\(BuildInfo.version)"
        let made = userAgent.withCString { agent in
            withOptionalCString(options.caFile) { caFile in
                var o = curl_pool_options(max_per_host: Int32(options.maxConnectionsPerHost),
                                          max_per_group: Int32(options.maxInFlightPerGroup),
                                          connect_timeout_ms: options.connectTimeoutMs,
                                          hold_ms: options.abandonedHoldMs,
                                          idle_timeout_s: options.idleTimeoutSeconds,
                                          max_body: HTTPPool.maxResponse, ca_file: caFile, user_agent: agent)
                return curl_pool_new(&o, &error, error.count)
            }
        }
        guard let made else {
            let text = error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
            throw HTTPFailure(reason: String(decoding: text, as: UTF8.self))
        }
        pool = made
    }

    /// Stops the pool's thread; open and queued calls fail. Once, after the last `send`.
    func close() { curl_pool_close(pool) }

    var connectionsOpened: Int { curl_pool_connections_opened(pool) }

    /// Sends one request and waits for its answer, a failure, or `call.timeoutSeconds`. Any task.
    func send(_ call: HTTPCall) async -> Result<HTTPReply, HTTPFailure> {
        await withCheckedContinuation { continuation in
            submit(call) { continuation.resume(returning: $0) }
        }
    }

    /// `send` for a caller that is not a task: `done` runs once, on the pool's thread (or the caller's, for a
    /// refusal).
    func submit(_ call: HTTPCall, done: @escaping @Sendable (Result<HTTPReply, HTTPFailure>) -> Void) {
        guard CurlClient.isSendable(call) else {
            return done(.failure(HTTPFailure(reason: "refused to send a request with a line break or NUL in it")))
        }
        let url = HTTPURL(tls: call.url.tls, host: call.url.host, port: call.url.port, path: call.path).string
        // libcurl drops a header given as "name:" (empty value); "name;" sends it empty.
        let lines = call.headers.map { $0.1.isEmpty ? "\($0.0);" : "\($0.0): \($0.1)" }
        let proxy = options.proxy.route(for: call.url).endpoint
        let strings = CStrings()
        defer { strings.free() }
        let headers: [UnsafePointer<CChar>?] = lines.map { UnsafePointer(strings.copy($0)) }
        // Owned by the request until its one callback takes it back.
        let context = Unmanaged.passRetained(Completion(done)).toOpaque()
        headers.withUnsafeBufferPointer { headerPointers in
            withOptionalBytes(call.body) { body, bodyCount in
                var request = curl_pool_request(
                    method: strings.copy(call.method), url: strings.copy(url), headers: headerPointers.baseAddress,
                    header_count: headerPointers.count, body: body, body_len: bodyCount,
                    timeout_ms: Int(max(1, call.timeoutSeconds)) * 1000, group: strings.copy(call.group),
                    proxy: strings.copy(proxy.map { "http://" + $0.authority }),
                    proxy_user: strings.copy(proxy?.username),
                    proxy_password: strings.copy(proxy?.password))
                curl_pool_submit(pool, &request, curlClientDone, context)
            }
        }
    }

    /// What `HTTP1Request.serialize` refuses: a method that isn't a token, a path or header that could split the
    /// request. libcurl would send them as given.
    static func isSendable(_ call: HTTPCall) -> Bool {
        func isFieldValue(_ text: String) -> Bool { !text.utf8.contains { $0 == 0x0A || $0 == 0x0D || $0 == 0 } }
        return !call.method.isEmpty && call.method.utf8.allSatisfy(HTTPSyntax.isTokenByte)
            && call.path.hasPrefix("/") && !call.path.utf8.contains { $0 <= 0x20 || $0 == 0x7F }
            && call.headers.allSatisfy { name, value in
                !name.isEmpty && name.utf8.allSatisfy(HTTPSyntax.isTokenByte) && isFieldValue(value)
            }
    }
}

/// The caller's completion, handed to C as the request's context.
private final class Completion {
    let done: @Sendable (Result<HTTPReply, HTTPFailure>) -> Void
    init(_ done: @escaping @Sendable (Result<HTTPReply, HTTPFailure>) -> Void) { self.done = done }
}

/// The pool's callback, on its thread: `context` is the owned `Completion` from `submit`, released here.
private func curlClientDone(_ context: UnsafeMutableRawPointer?, _ reply: UnsafePointer<curl_pool_reply>?) {
    guard let context, let reply = reply?.pointee else { preconditionFailure("curl_pool answered without its context") }
    let completion = Unmanaged<Completion>.fromOpaque(context).takeRetainedValue()
    if let error = reply.error {
        return completion.done(.failure(HTTPFailure(reason: String(cString: error))))
    }
    let body = reply.body_len == 0 ? [] : Array(UnsafeBufferPointer(start: reply.body, count: reply.body_len))
    let retryAfter = (reply.status == 429 || reply.status == 503) && reply.retry_after >= 0 ? reply.retry_after : nil
    completion.done(.success(HTTPReply(status: reply.status, body: body, retryAfter: retryAfter)))
}

/// C copies of Swift strings for one call into C, freed together.
private final class CStrings {
    private var pointers: [UnsafeMutablePointer<CChar>] = []

    func copy(_ text: String?) -> UnsafeMutablePointer<CChar>? {
        guard let text, let pointer = strdup(text) else { return nil }
        pointers.append(pointer)
        return pointer
    }

    func copy(_ text: String) -> UnsafeMutablePointer<CChar> { copy(Optional(text))! }

    func free() { pointers.forEach { Glibc.free($0) } }
}

private func withOptionalCString<R>(_ text: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let text else { return body(nil) }
    return text.withCString { body($0) }
}

private func withOptionalBytes<R>(_ bytes: [UInt8]?, _ body: (UnsafeRawPointer?, Int) -> R) -> R {
    guard let bytes else { return body(nil, 0) }
    return bytes.withUnsafeBytes { body($0.baseAddress ?? UnsafeRawPointer(bitPattern: 1), $0.count) }
}
