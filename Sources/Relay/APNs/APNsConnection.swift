import CNGHTTP2
import Glibc
import RelayCore

/// One live HTTP/2 connection to an APNs host: owns the TLS socket and the nghttp2 client session.
/// Created and dropped by one `APNsHostLoop` loop thread, and used only with that connection's `turn` lock held
/// (by the loop, or by a caller sending on it directly).
///
/// nghttp2's session `user_data` is `self`, borrowed: the link owns the session and deletes it first in
/// `deinit`, so no callback can outlive it.
final class APNsConnection {
    let socket: TLSSocket
    let id: Int
    /// The host loop that owns this connection: its `machine` decides every stream's fate. Unowned: the host loop
    /// holds the link, never the reverse, and drops it before it goes.
    unowned let host: APNsHostLoop
    private(set) var session: OpaquePointer?
    /// Streams on the wire. Each value is the `passRetained` reference also stored as stream user data and as
    /// the stream's data provider source; it is released when it leaves here, in `takeBox` (nghttp2 is done with
    /// the stream) or in `close` (after the session is deleted).
    private(set) var streams: [Int32: Unmanaged<PendingPush>] = [:]
    /// Pushes the machine said to send again on a fresh link (APNs never saw them); the loop queues them first.
    var resend: [PendingPush] = []

    init(socket: TLSSocket, id: Int, host: APNsHostLoop) throws(H2Error) {
        self.socket = socket
        self.id = id
        self.host = host
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
        assert(streams.isEmpty, "an APNsConnection with open streams must be closed before it is dropped")
        nghttp2_session_del(session)
    }

    // MARK: - Streams

    /// What the connection's machine can't see of the nghttp2 session.
    func facts() -> APNsConnectionMachine.Session {
        guard let session else { return APNsConnectionMachine.Session(requestAllowed: false, finished: true) }
        return APNsConnectionMachine.Session(
            requestAllowed: nghttp2_session_check_request_allowed(session) != 0,
            peerStreamLimit: Int(nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS)),
            finished: nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0)
    }

    /// Starts one request. Returns false (the push untouched) when this session takes no more streams.
    func submit(_ push: PendingPush, authority: String) -> Bool {
        let retained = Unmanaged.passRetained(push)
        let streamID = submitRequest(push.request, authority: authority, box: retained.toOpaque())
        if streamID == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE.rawValue { host.machine.stopNewStreams() }
        guard streamID > 0 else {
            // Never handed to nghttp2: undo the retain here.
            retained.release()
            return false
        }
        streams[streamID] = retained
        host.machine.submitted(streamID, deadline: push.deadline, atMicros: monotonicMicros())
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

    /// A stream ended: the machine says whether its caller gets the answer, hears it was lost, or it goes again.
    func streamClosed(_ streamID: Int32, errorCode: UInt32) {
        guard let push = takeBox(streamID, closing: true), !push.isFinished,
              let end = host.machine.streamClosed(streamID, status: push.status,
                                                        refused: errorCode == NGHTTP2_REFUSED_STREAM.rawValue,
                                                        nowMicros: monotonicMicros(),
                                                        error: String(cString: nghttp2_http2_strerror(errorCode)))
        else { return }
        apply(end, to: push)
    }

    /// HEADERS nghttp2 dropped before sending (e.g. GOAWAY arrived while they were queued). The stream may never
    /// have opened, so no close callback follows: the box is taken here.
    func headersNotSent(_ streamID: Int32) {
        guard let push = takeBox(streamID), !push.isFinished,
              let end = host.machine.headersNotSent(streamID) else { return }
        apply(end, to: push)
    }

    /// Carries out a stream's end as the machine decided it.
    private func apply(_ end: APNsConnectionMachine.StreamEnd, to push: PendingPush) {
        switch end {
        case .answered:
            push.finish(.response(status: push.status ?? 0, apnsID: push.apnsID, body: push.responseBody,
                                  retryAfter: push.retryAfter))
        case .resend:
            push.resetForResend()
            resend.append(push)
        case .lost(let why):
            push.finish(.lost(why))
        case .timedOut:
            push.finish(.timedOut)
        case .expiredUnsent:
            push.finish(.notSent(.expiredWaiting))
        }
    }

    /// Ends the streams the machine found past their deadline: the caller hears of it now, APNs gets RST_STREAM.
    /// The box stays until nghttp2 closes the stream (it still reads it).
    func expire(_ ends: [(Int32, APNsConnectionMachine.StreamEnd)]) {
        for (streamID, end) in ends {
            guard let push = streams[streamID]?.takeUnretainedValue(), !push.isFinished else { continue }
            apply(end, to: push)
            _ = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, NGHTTP2_CANCEL.rawValue)
        }
    }

    /// Ends every stream still open when the link is dropped, as the machine says (`ends`: lost or sent again).
    /// The session is deleted here, before the boxes are released: until then its streams still hold them as user
    /// data and as their data providers' source, and a provider reads its box whenever the session packs DATA.
    /// `nghttp2_session_del` calls no callback, so nothing reads them on the way out. The link is not used after this.
    func close(ends: [(Int32, APNsConnectionMachine.StreamEnd)]) {
        nghttp2_session_del(session)
        session = nil
        let open = streams
        streams = [:]
        for (streamID, end) in ends {
            guard let push = open[streamID]?.takeUnretainedValue(), !push.isFinished else { continue }
            apply(end, to: push)
        }
        for retained in open.values { retained.release() }
    }

    // MARK: - I/O

    /// Feeds everything readable into the session.
    func receive(now: Int64) {
        let status = socket.readAvailable { bytes in
            let used = nghttp2_session_mem_recv(session, bytes.baseAddress, bytes.count)
            if used < 0 {
                host.machine.failed("HTTP/2: " + String(cString: nghttp2_strerror(Int32(used))))
                return false
            }
            return true
        }
        host.machine.read(now: now)
        if case .closed(let why) = status { host.machine.failed(why) }
    }

    /// Moves the session's pending frames into the socket and writes what the socket takes.
    func transmit() {
        while socket.pendingBytes < 256 * 1024 {
            var data: UnsafePointer<UInt8>?
            let length = nghttp2_session_mem_send(session, &data)
            if length < 0 {
                host.machine.failed("HTTP/2: " + String(cString: nghttp2_strerror(Int32(length))))
                return
            }
            guard length > 0, let data else { break }
            socket.enqueue(UnsafeBufferPointer(start: data, count: length))
        }
        if let error = socket.flush() { host.machine.failed(error) }
    }

    var wantsWrite: Bool { socket.wantsWrite || nghttp2_session_want_write(session) != 0 }

    func ping(now: Int64) {
        if nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil) == 0 { host.machine.pingSent(now: now) }
    }
}
