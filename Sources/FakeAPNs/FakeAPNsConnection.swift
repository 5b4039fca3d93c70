import CNGHTTP2
import Glibc
import RelayCore
import Relay

/// One accepted TCP connection of the fake: TLS socket plus an nghttp2 server session (created once the
/// handshake is done). Loop-thread only. The session's `user_data` is `self`, borrowed (deleted in deinit).
final class FakeAPNsConnection {
    /// One request stream: headers and body in, response body out (read by the data provider, whose
    /// `source.ptr` borrows this object; `streams` keeps it alive until the stream closes).
    final class Stream {
        /// Room for an APNs request's dozen headers up front: growing the table cost a rehash per request.
        var headers = [String: String](minimumCapacity: 16)
        var body: [UInt8] = []
        var response: [UInt8] = []
        var offset = 0
    }

    let id: Int
    let socket: TLSSocket
    unowned let server: FakeAPNsServer
    private var session: OpaquePointer?
    var streams: [Int32: Stream] = [:]
    private var answered = 0
    private var goAwayLastStream: Int32?
    private(set) var isClosed = false

    init(id: Int, socket: TLSSocket, server: FakeAPNsServer) {
        self.id = id
        self.socket = socket
        self.server = server
    }

    deinit { nghttp2_session_del(session) }

    /// The TLS handshake is done and the HTTP/2 session started.
    var isEstablished: Bool { session != nil }

    var wantsWrite: Bool { socket.wantsWrite || (session.map { nghttp2_session_want_write($0) != 0 } ?? true) }

    /// Advances the handshake, or feeds what arrived into the session.
    func service() {
        guard !isClosed else { return }
        guard session != nil else {
            do {
                if try socket.handshake(asClient: false) == .done { startSession() }
            } catch {
                isClosed = true
            }
            return
        }
        let status = socket.readAvailable { bytes in
            nghttp2_session_mem_recv(session, bytes.baseAddress, bytes.count) >= 0
        }
        if case .closed = status { isClosed = true }
    }

    func transmit() {
        guard !isClosed, let session else { return }
        while true {
            var data: UnsafePointer<UInt8>?
            let length = nghttp2_session_mem_send(session, &data)
            guard length > 0, let data else { break }
            socket.enqueue(UnsafeBufferPointer(start: data, count: length))
        }
        if socket.flush() != nil { isClosed = true }
        if nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0 && !socket.wantsWrite {
            isClosed = true
        }
    }

    private func startSession() {
        var callbacks: OpaquePointer?
        nghttp2_session_callbacks_new(&callbacks)
        defer { nghttp2_session_callbacks_del(callbacks) }
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, fakeBeginHeaders)
        nghttp2_session_callbacks_set_on_header_callback(callbacks, fakeHeader)
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, fakeData)
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, fakeFrameReceived)
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, fakeStreamClose)
        nghttp2_session_server_new(&session, callbacks, Unmanaged.passUnretained(self).toOpaque())
        var settings = [nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue),
                                               value: server.maxConcurrentStreams)]
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, 1)
    }

    // MARK: - Answering

    /// A request finished arriving: record it, check the token, and answer per the script.
    func requestComplete(_ streamID: Int32) {
        guard let stream = streams[streamID] else { return }
        // Past our GOAWAY's last stream id: not processed, so neither recorded nor answered.
        if let last = goAwayLastStream, streamID > last { return }
        var request = FakeAPNs.Request(connection: id, stream: streamID, method: stream.headers[":method"] ?? "",
                                       path: stream.headers[":path"] ?? "", headers: stream.headers,
                                       body: String(decoding: stream.body, as: UTF8.self), openStreams: streams.count)
        let answer: FakeAPNs.Answer = server.isValid(authorization: request.authorization)
            ? server.ledger.nextAnswer(for: request) : .reject(403, "InvalidProviderToken")
        request.answer = answer
        server.ledger.record(request)
        respond(streamID, answer)
        answered += 1
        if let limit = server.ledger.goAwayAfterStreams, answered == limit, goAwayLastStream == nil {
            goAwayLastStream = streamID
            var reason = Array(#"{"reason":"Shutdown"}"#.utf8)
            nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, NGHTTP2_NO_ERROR.rawValue,
                                  &reason, reason.count)
        }
    }

    func respond(_ streamID: Int32, _ answer: FakeAPNs.Answer) {
        switch answer {
        case .accept: submitResponse(streamID, status: 200, body: nil)
        case .reject(let status, let reason): submitResponse(streamID, status: status, body: ["reason": .string(reason)])
        case .gone(let timestamp):
            submitResponse(streamID, status: 410, body: ["reason": "Unregistered", "timestamp": .int(timestamp)])
        case .slow(let ms, let later): server.delayed.append((monotonicMs() + Int64(ms), self, streamID, later))
        case .silent: break
        }
    }

    private func submitResponse(_ streamID: Int32, status: Int, body: JSONValue?) {
        guard let stream = streams[streamID] else { return }
        // Like APNs: echo the request's apns-id when it sent one (aioapns matches answers by it), else make one.
        let fields = [(":status", String(status)), ("apns-id", stream.headers["apns-id"] ?? server.ledger.newAPNsID())]
            + (body == nil ? [] : [("content-type", "application/json")])
        var arena: [UInt8] = []
        var spans: [(Range<Int>, Range<Int>)] = []
        for (name, value) in fields {
            let start = arena.count
            arena.append(contentsOf: name.utf8)
            let middle = arena.count
            arena.append(contentsOf: value.utf8)
            spans.append((start..<middle, middle..<arena.count))
        }
        stream.response = body.map { Array($0.encoded().utf8) } ?? []
        let pointer = Unmanaged.passUnretained(stream).toOpaque()
        arena.withUnsafeMutableBufferPointer { storage in
            var nva = spans.map { name, value in
                nghttp2_nv(name: storage.baseAddress! + name.lowerBound, value: storage.baseAddress! + value.lowerBound,
                           namelen: name.count, valuelen: value.count, flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue))
            }
            if body == nil {
                _ = nghttp2_submit_response(session, streamID, &nva, nva.count, nil)
            } else {
                var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: pointer), read_callback: fakeReadResponse)
                _ = nghttp2_submit_response(session, streamID, &nva, nva.count, &provider)
            }
        }
    }
}

private func connection(_ userData: UnsafeMutableRawPointer?) -> FakeAPNsConnection {
    guard let userData else { preconditionFailure("fake session without its connection") }
    return Unmanaged<FakeAPNsConnection>.fromOpaque(userData).takeUnretainedValue()
}

private func fakeBeginHeaders(_ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?,
                              _ userData: UnsafeMutableRawPointer?) -> Int32 {
    guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue),
          frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST else { return 0 }
    connection(userData).streams[frame.pointee.hd.stream_id] = FakeAPNsConnection.Stream()
    return 0
}

private func fakeHeader(_ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?, _ name: UnsafePointer<UInt8>?,
                        _ nameLength: Int, _ value: UnsafePointer<UInt8>?, _ valueLength: Int, _ flags: UInt8,
                        _ userData: UnsafeMutableRawPointer?) -> Int32 {
    guard let frame, let name, let value,
          let stream = connection(userData).streams[frame.pointee.hd.stream_id] else { return 0 }
    let key = String(decoding: UnsafeBufferPointer(start: name, count: nameLength), as: UTF8.self)
    stream.headers[key] = String(decoding: UnsafeBufferPointer(start: value, count: valueLength), as: UTF8.self)
    return 0
}

private func fakeData(_ session: OpaquePointer?, _ flags: UInt8, _ streamID: Int32, _ data: UnsafePointer<UInt8>?,
                      _ length: Int, _ userData: UnsafeMutableRawPointer?) -> Int32 {
    guard let data, let stream = connection(userData).streams[streamID] else { return 0 }
    stream.body.append(contentsOf: UnsafeBufferPointer(start: data, count: length))
    return 0
}

private func fakeFrameReceived(_ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?,
                               _ userData: UnsafeMutableRawPointer?) -> Int32 {
    guard let frame else { return 0 }
    let type = UInt32(frame.pointee.hd.type)
    let endStream = frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
    if endStream, type == NGHTTP2_HEADERS.rawValue || type == NGHTTP2_DATA.rawValue {
        connection(userData).requestComplete(frame.pointee.hd.stream_id)
    }
    return 0
}

private func fakeStreamClose(_ session: OpaquePointer?, _ streamID: Int32, _ errorCode: UInt32,
                             _ userData: UnsafeMutableRawPointer?) -> Int32 {
    connection(userData).streams.removeValue(forKey: streamID)
    return 0
}

private func fakeReadResponse(_ session: OpaquePointer?, _ streamID: Int32, _ buffer: UnsafeMutablePointer<UInt8>?,
                              _ length: Int, _ flags: UnsafeMutablePointer<UInt32>?,
                              _ source: UnsafeMutablePointer<nghttp2_data_source>?, _ userData: UnsafeMutableRawPointer?) -> Int {
    guard let raw = source?.pointee.ptr, let buffer, let flags else { preconditionFailure("response without its stream") }
    let stream = Unmanaged<FakeAPNsConnection.Stream>.fromOpaque(raw).takeUnretainedValue()
    let count = min(length, stream.response.count - stream.offset)
    stream.response.withUnsafeBufferPointer { buffer.update(from: $0.baseAddress! + stream.offset, count: count) }
    stream.offset += count
    if stream.offset == stream.response.count { flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
    return count
}
