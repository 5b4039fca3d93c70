import CNGHTTP2
import Glibc
import RelayCore

/// One live HTTP/2 connection to an APNs host: owns the TLS socket and the nghttp2 client session.
/// Created and dropped by one `APNsConnection` loop thread, and used only with that connection's `turn` lock held
/// (by the loop, or by a caller sending on it directly).
///
/// nghttp2's session `user_data` is `self`, borrowed: the link owns the session and deletes it first in
/// `deinit`, so no callback can outlive it.
final class APNsLink {
    let socket: TLSSocket
    let id: Int
    private(set) var session: OpaquePointer?
    /// Streams on the wire. Each value is the `passRetained` reference also stored as stream user data and as
    /// the stream's data provider source; it is released when it leaves here, in `takeBox` (nghttp2 is done with
    /// the stream) or in `close` (after the session is deleted).
    private(set) var streams: [Int32: Unmanaged<PendingPush>] = [:]
    /// Pushes this link will not answer but that never reached APNs (refused, or not sent): resend elsewhere.
    var resend: [PendingPush] = []
    /// A 200 arrived, so APNs accepts our token: use the peer's stream limit instead of one.
    var confirmed = false
    /// GOAWAY seen (or stream ids ran out): no new streams here.
    var goingAway = false
    /// Set when the connection is broken; the loop then retires the link.
    var failure: String?
    var lastReadAt: Int64
    var pingSentAt: Int64?

    init(socket: TLSSocket, id: Int) throws(H2Error) {
        self.socket = socket
        self.id = id
        self.lastReadAt = monotonicMs()
        var callbacks: OpaquePointer?
        try H2Error.check(nghttp2_session_callbacks_new(&callbacks), "nghttp2_session_callbacks_new")
        defer { nghttp2_session_callbacks_del(callbacks) }
        installLinkCallbacks(callbacks)
        try H2Error.check(nghttp2_session_client_new(&session, callbacks, Unmanaged.passUnretained(self).toOpaque()),
                          "nghttp2_session_client_new")
        var settings = [nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0)]
        try H2Error.check(nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, 1),
                          "nghttp2_submit_settings")
    }

    // The session is already gone after `close` (nil: a no-op); a link that never opened a stream (a failed init)
    // deletes it here. The socket is released after this body, which frees the SSL* and then the fd.
    deinit {
        assert(streams.isEmpty, "an APNsLink with open streams must be closed before it is dropped")
        nghttp2_session_del(session)
    }

    // MARK: - Streams

    /// What the connection's policy (`APNsLinkPolicy`) needs to know of this link.
    func facts() -> APNsLinkPolicy.Link {
        let peer = session.map { Int(nghttp2_session_get_remote_settings($0, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS)) } ?? 1
        return APNsLinkPolicy.Link(lastReadAt: lastReadAt, pingSentAt: pingSentAt, openStreams: streams.count,
                                   confirmed: confirmed && session != nil, peerStreamLimit: peer)
    }

    var acceptsStreams: Bool {
        session != nil && !goingAway && failure == nil && nghttp2_session_check_request_allowed(session) != 0
    }

    /// Starts one request. Returns false (the push untouched) when this session takes no more streams.
    func submit(_ push: PendingPush, authority: String) -> Bool {
        let retained = Unmanaged.passRetained(push)
        let streamID = submitRequest(push.request, authority: authority, box: retained.toOpaque())
        if streamID == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE.rawValue { goingAway = true }
        guard streamID > 0 else {
            // Never handed to nghttp2: undo the retain here.
            retained.release()
            return false
        }
        streams[streamID] = retained
        return true
    }

    /// Takes back the box retained at submit. Returns nil if it was already taken. `closing`: called from the
    /// stream's close callback, after which nghttp2 destroys a client session's stream at once
    /// (`nghttp2_session_close_stream`; only a server keeps closed streams), so nothing reads its user data again and
    /// clearing it would only cost a lookup in the session's stream map per answer.
    func takeBox(_ streamID: Int32, closing: Bool = false) -> PendingPush? {
        guard let retained = streams.removeValue(forKey: streamID) else { return nil }
        if !closing { _ = nghttp2_session_set_stream_user_data(session, streamID, nil) }
        return retained.takeRetainedValue()
    }

    /// A stream ended. Answers go to their caller; pushes APNs never processed go to `resend`.
    func streamClosed(_ streamID: Int32, errorCode: UInt32) {
        guard let push = takeBox(streamID, closing: true), !push.isFinished else { return }
        if let status = push.status {
            if status == 200 { confirmed = true }
            push.finish(.response(status: status, apnsID: push.apnsID, body: push.responseBody, retryAfter: push.retryAfter))
        } else if errorCode == NGHTTP2_REFUSED_STREAM.rawValue || !push.sent {
            push.resetForResend()
            resend.append(push)
        } else {
            push.finish(.lost("stream reset: " + String(cString: nghttp2_http2_strerror(errorCode))))
        }
    }

    /// Gives up on a stream whose deadline passed: the caller hears `.timedOut` now, APNs gets RST_STREAM.
    func expire(now: Int64) {
        for (streamID, retained) in streams {
            let push = retained.takeUnretainedValue()
            guard !push.isFinished, push.deadline <= now else { continue }
            push.finish(.timedOut)
            _ = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, NGHTTP2_CANCEL.rawValue)
        }
    }

    /// Ends every stream still open when the link is dropped: unsent ones are resent, the rest are lost. The
    /// session is deleted here, before the boxes are released: until then its streams still hold them as user data
    /// and as their data providers' source, and a provider reads its box whenever the session packs DATA.
    /// `nghttp2_session_del` calls no callback, so nothing reads them on the way out. The link is not used after this.
    func close(reason: String) {
        nghttp2_session_del(session)
        session = nil
        let open = streams.sorted { $0.key < $1.key }
        streams = [:]
        for (_, retained) in open {
            let push = retained.takeRetainedValue()
            guard !push.isFinished else { continue }
            if push.sent {
                push.finish(.lost(reason))
            } else {
                push.resetForResend()
                resend.append(push)
            }
        }
    }

    // MARK: - I/O

    /// Feeds everything readable into the session.
    func receive(now: Int64) {
        let status = socket.readAvailable { bytes in
            let used = nghttp2_session_mem_recv(session, bytes.baseAddress, bytes.count)
            if used < 0 {
                failure = "HTTP/2: " + String(cString: nghttp2_strerror(Int32(used)))
                return false
            }
            return true
        }
        lastReadAt = now
        if case .closed(let why) = status, failure == nil { failure = why }
    }

    /// Moves the session's pending frames into the socket and writes what the socket takes.
    func transmit() {
        while socket.pendingBytes < 256 * 1024 {
            var data: UnsafePointer<UInt8>?
            let length = nghttp2_session_mem_send(session, &data)
            if length < 0 {
                failure = "HTTP/2: " + String(cString: nghttp2_strerror(Int32(length)))
                return
            }
            guard length > 0, let data else { break }
            socket.enqueue(UnsafeBufferPointer(start: data, count: length))
        }
        if let error = socket.flush(), failure == nil { failure = error }
    }

    var wantsWrite: Bool { socket.wantsWrite || nghttp2_session_want_write(session) != 0 }

    /// Neither side has anything more to say on this session.
    var isFinished: Bool {
        session == nil || failure != nil || (goingAway && streams.isEmpty)
            || (nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0)
    }

    func ping(now: Int64) {
        guard pingSentAt == nil else { return }
        if nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil) == 0 { pingSentAt = now }
    }
}
