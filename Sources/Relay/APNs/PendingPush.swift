import CNGHTTP2
import RelayCore

/// A request ready for the wire: `:path`, the other headers (authorization included) and the body.
struct APNsRequest: Sendable {
    var path: String
    /// Every header but the pseudo-headers, encoded once: a fan-out of one message shares one block (and one body).
    var fields: HeaderFields
    var body: [UInt8]

    init(path: String, fields: HeaderFields, body: [UInt8]) {
        self.path = path
        self.fields = fields
        self.body = body
    }

    init(path: String, headers: [(name: String, value: String)], body: [UInt8]) {
        self.init(path: path, fields: HeaderFields(headers, bodyCount: body.count), body: body)
    }
}

/// Request headers (plus `content-length`) in one immutable byte buffer, ready to hand to nghttp2 as `nghttp2_nv`s.
/// Apple asks for `authorization` as a literal without indexing (HPACK; "Sending notification requests to APNs"),
/// and for `:path` the same.
struct HeaderFields: Sendable {
    private struct Span: Sendable {
        let name: Range<Int>
        let value: Range<Int>
        let neverIndex: Bool

        /// The entry for this field in `arena`, or with `value` instead of the arena's.
        func entry(in arena: UnsafeBufferPointer<UInt8>, value other: UnsafeBufferPointer<UInt8>? = nil) -> nghttp2_nv {
            let base = UnsafeMutablePointer(mutating: arena.baseAddress!)
            let flag = neverIndex ? NGHTTP2_NV_FLAG_NO_INDEX.rawValue : NGHTTP2_NV_FLAG_NONE.rawValue
            return nghttp2_nv(name: base + name.lowerBound,
                              value: other.map { UnsafeMutablePointer(mutating: $0.baseAddress!) } ?? base + value.lowerBound,
                              namelen: name.count, valuelen: other?.count ?? value.count, flags: UInt8(flag))
        }
    }

    private let arena: [UInt8]
    private let spans: [Span]

    init(_ headers: [(name: String, value: String)], bodyCount: Int) {
        self.init(packing: headers + [("content-length", String(bodyCount))])
    }

    private init(packing headers: [(name: String, value: String)]) {
        var arena: [UInt8] = []
        var spans: [Span] = []
        for (name, value) in headers {
            let nameStart = arena.count
            arena.append(contentsOf: name.utf8)
            let valueStart = arena.count
            arena.append(contentsOf: value.utf8)
            spans.append(Span(name: nameStart..<valueStart, value: valueStart..<arena.count,
                              neverIndex: name == "authorization" || name == ":path"))
        }
        self.arena = arena
        self.spans = spans
    }

    /// The pseudo-headers, in the order they go out; `:authority` and `:path` take their values from the request.
    private static let pseudoHeaders = HeaderFields(packing: [(":method", "POST"), (":scheme", "https"),
                                                              (":authority", ""), (":path", "")])

    var count: Int { spans.count }

    /// Calls `body` with the request's `nghttp2_nv`s: the pseudo-headers first, then one per field. They point into
    /// `authority`, `path` and the arenas, so they are valid only during the call; nghttp2 copies every name and value
    /// on submit (no `NO_COPY` flags here), so none has to outlive it. The entries live on the stack: a request
    /// costs no allocation here.
    func withNameValues<R>(authority: UnsafeBufferPointer<UInt8>, path: UnsafeBufferPointer<UInt8>,
                           _ body: (UnsafeMutableBufferPointer<nghttp2_nv>) -> R) -> R {
        let pseudo = HeaderFields.pseudoHeaders
        return pseudo.arena.withUnsafeBufferPointer { fixed in
            arena.withUnsafeBufferPointer { storage in
                withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: pseudo.count + spans.count) { nva in
                    nva.initializeElement(at: 0, to: pseudo.spans[0].entry(in: fixed))
                    nva.initializeElement(at: 1, to: pseudo.spans[1].entry(in: fixed))
                    nva.initializeElement(at: 2, to: pseudo.spans[2].entry(in: fixed, value: authority))
                    nva.initializeElement(at: 3, to: pseudo.spans[3].entry(in: fixed, value: path))
                    for (offset, span) in spans.enumerated() {
                        nva.initializeElement(at: pseudo.count + offset, to: span.entry(in: storage))
                    }
                    return body(nva)
                }
            }
        }
    }
}

/// Per-stream state box: the request, its continuation, and the response as it arrives.
///
/// Ownership: `APNsConnection.submit` passes it `passRetained` as the nghttp2 stream user data (and as the source of the
/// stream's data provider); it is taken back exactly once: in `APNsConnection.takeBox` (stream close, frame not sent), or
/// in `APNsConnection.close` once the session that points at it is deleted.
///
/// Not `Sendable`: it is built on the caller's task and handed over through the connection's locked inbox (or its
/// `turn` lock, sent directly); from then on it is touched only with that connection's `turn` held.
final class PendingPush {
    static let maxResponseBody = 4096

    let request: APNsRequest
    /// Monotonic ms after which the caller gets `.timedOut`.
    let deadline: Int64
    /// Who gets the answer: a waiting task, or (for a fan-out) a sink that gets it with the others of the same
    /// loop turn, through the connection's `batch`.
    private var continuation: CheckedContinuation<APNsExchange, Never>?
    private var sink: (any APNsAnswerSink)?
    private var index = 0
    private var batch: AnswerBatch?

    var bodyOffset = 0
    var status: Int?
    var apnsID: String?
    var retryAfter: Int?
    var responseBody: [UInt8] = []

    init(request: APNsRequest, deadline: Int64, continuation: CheckedContinuation<APNsExchange, Never>) {
        self.request = request
        self.deadline = deadline
        self.continuation = continuation
    }

    /// The answer goes to `sink` as item `index`, collected in `batch` (the connection's) until the loop turn ends.
    init(request: APNsRequest, deadline: Int64, index: Int, sink: any APNsAnswerSink, batch: AnswerBatch) {
        self.request = request
        self.deadline = deadline
        self.index = index
        self.sink = sink
        self.batch = batch
    }

    var isFinished: Bool { continuation == nil && sink == nil }

    /// Hands the answer over. Later calls are ignored, so each push is answered exactly once. `batched` false is
    /// for a push the loop thread never took (refused at the inbox): it goes to its sink at once, from the caller.
    func finish(_ result: APNsExchange, batched: Bool = true) {
        if let continuation {
            self.continuation = nil
            continuation.resume(returning: result)
        } else if let sink {
            self.sink = nil
            if batched, let batch { batch.add(result, index: index, for: sink) } else { sink.post([(index, result)]) }
        }
    }

    /// Keeps at most `maxResponseBody` bytes: APNs answers are tiny, anything more is not worth holding.
    func appendResponse(_ bytes: UnsafeBufferPointer<UInt8>) {
        let room = Self.maxResponseBody - responseBody.count
        if room > 0 { responseBody.append(contentsOf: bytes.prefix(room)) }
    }

    /// Forgets the response of an attempt that will be sent again on a fresh connection.
    func resetForResend() {
        bodyOffset = 0
        status = nil
        apnsID = nil
        retryAfter = nil
        responseBody = []
    }
}

/// FIFO of pushes waiting for a stream, with cheap pops and a rare push-to-front for resends.
struct PushQueue {
    private var items: [PendingPush] = []
    private var head = 0

    var isEmpty: Bool { head == items.count }
    var count: Int { items.count - head }

    mutating func append(_ push: PendingPush) { items.append(push) }

    mutating func popFirst() -> PendingPush? {
        guard head < items.count else { return nil }
        let push = items[head]
        head += 1
        if head > 1024 && head * 2 > items.count {
            items.removeFirst(head)
            head = 0
        }
        return push
    }

    /// Puts resends ahead of everything else, keeping their order.
    mutating func prepend(_ pushes: [PendingPush]) {
        guard !pushes.isEmpty else { return }
        items = pushes + items[head...]
        head = 0
    }

    /// Removes and returns every queued push.
    mutating func drain() -> [PendingPush] {
        defer { items = []; head = 0 }
        return Array(items[head...])
    }

    /// Finishes pushes whose deadline passed while they waited (never sent: `.notSent(.expiredWaiting)`, so their
    /// callers may send them again) and drops them.
    mutating func expire(now: Int64) {
        guard items[head...].contains(where: { $0.deadline <= now || $0.isFinished }) else { return }
        var kept: [PendingPush] = []
        for push in items[head...] {
            if push.deadline <= now { push.finish(.notSent(.expiredWaiting)) }
            if !push.isFinished { kept.append(push) }
        }
        items = kept
        head = 0
    }
}
