import CNGHTTP2
import RelayCore

// nghttp2 entry points for `APNsConnection`. Each is a private top-level function (C cannot call closures that
// capture); `user_data` is the link, borrowed, and the stream user data is the `PendingPush` box, owned by
// the session from submit to `takeBox`. A missing pointer is a bug, so it stops the process.

extension APNsConnection {
    /// Builds the request headers and submits them with the body as a data provider. Returns the stream id
    /// or a negative nghttp2 error. The header pointers are used only inside the closures that lend them:
    /// `nghttp2_submit_request` copies every name and value before it returns.
    func submitRequest(_ request: APNsRequest, authority: String, box: UnsafeMutableRawPointer) -> Int32 {
        var path = request.path
        var authority = authority
        return path.withUTF8 { path in
            authority.withUTF8 { authority in
                request.fields.withNameValues(authority: authority, path: path) { nva in
                    // The provider struct is copied too; its source, the box, lives until the stream is done with it.
                    var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: box), read_callback: readRequestBody)
                    return nghttp2_submit_request(session, nil, nva.baseAddress, nva.count, &provider, box)
                }
            }
        }
    }
}

func installLinkCallbacks(_ callbacks: OpaquePointer?) {
    nghttp2_session_callbacks_set_on_header_callback(callbacks, onLinkHeader)
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, onLinkData)
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, onLinkFrameReceived)
    nghttp2_session_callbacks_set_on_frame_send_callback(callbacks, onLinkFrameSent)
    nghttp2_session_callbacks_set_on_frame_not_send_callback(callbacks, onLinkFrameNotSent)
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, onLinkStreamClose)
}

private func link(_ userData: UnsafeMutableRawPointer?) -> APNsConnection {
    guard let userData else { preconditionFailure("nghttp2 session without its APNsConnection") }
    return Unmanaged<APNsConnection>.fromOpaque(userData).takeUnretainedValue()
}

/// The stream's box, borrowed (the session still holds the retained reference), or nil for streams that
/// are not ours (none on a client session) or already taken back.
private func box(_ session: OpaquePointer?, _ streamID: Int32) -> PendingPush? {
    guard let raw = nghttp2_session_get_stream_user_data(session, streamID) else { return nil }
    return Unmanaged<PendingPush>.fromOpaque(raw).takeUnretainedValue()
}

private func readRequestBody(_ session: OpaquePointer?, _ streamID: Int32, _ buffer: UnsafeMutablePointer<UInt8>?,
                             _ length: Int, _ flags: UnsafeMutablePointer<UInt32>?,
                             _ source: UnsafeMutablePointer<nghttp2_data_source>?, _ userData: UnsafeMutableRawPointer?) -> Int {
    guard let raw = source?.pointee.ptr, let buffer, let flags else { preconditionFailure("request body without its box") }
    let push = Unmanaged<PendingPush>.fromOpaque(raw).takeUnretainedValue()
    let count = min(length, push.request.body.count - push.bodyOffset)
    push.request.body.withUnsafeBufferPointer { body in
        if count > 0 { buffer.update(from: body.baseAddress! + push.bodyOffset, count: count) }
    }
    push.bodyOffset += count
    if push.bodyOffset == push.request.body.count { flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
    return count
}

private func onLinkHeader(_ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?,
                          _ name: UnsafePointer<UInt8>?, _ nameLength: Int, _ value: UnsafePointer<UInt8>?,
                          _ valueLength: Int, _ flags: UInt8, _ userData: UnsafeMutableRawPointer?) -> Int32 {
    guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue),
          let push = box(session, frame.pointee.hd.stream_id), let name, let value else { return 0 }
    // Names are compared as bytes (nghttp2 hands them lowercase): this runs for every header of every answer, and
    // a String per name was ~2% of a fan-out's CPU.
    let key = UnsafeBufferPointer(start: name, count: nameLength)
    let bytes = UnsafeBufferPointer(start: value, count: valueLength)
    if key.elementsEqual(":status".utf8) {
        push.status = HeaderValue.integer(bytes)
    } else if key.elementsEqual("apns-id".utf8) {
        push.apnsID = String(decoding: bytes.prefix(64), as: UTF8.self)
    } else if key.elementsEqual("retry-after".utf8) {
        push.retryAfter = RetryAfter.seconds(bytes: bytes)
    }
    return 0
}

/// Header values read straight from nghttp2's bytes.
enum HeaderValue {
    /// A non-negative decimal of at most 9 digits (a `:status`); nil for anything else.
    static func integer(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? { ASCIIDecimal.value(bytes, maxDigits: 9) }
}

private func onLinkData(_ session: OpaquePointer?, _ flags: UInt8, _ streamID: Int32, _ data: UnsafePointer<UInt8>?,
                        _ length: Int, _ userData: UnsafeMutableRawPointer?) -> Int32 {
    guard let data, let push = box(session, streamID) else { return 0 }
    push.appendResponse(UnsafeBufferPointer(start: data, count: length))
    return 0
}

private func onLinkFrameReceived(_ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?,
                                 _ userData: UnsafeMutableRawPointer?) -> Int32 {
    guard let frame else { return 0 }
    let owner = link(userData)
    switch UInt32(frame.pointee.hd.type) {
    case NGHTTP2_GOAWAY.rawValue:
        let goaway = frame.pointee.goaway
        owner.host.machine.goaway(lastStreamID: goaway.last_stream_id)
        let reason = goaway.opaque_data.map {
            String(decoding: UnsafeBufferPointer(start: $0, count: min(goaway.opaque_data_len, 200)), as: UTF8.self)
        } ?? ""
        Log.warn("apns.goaway", ["connection": String(owner.id), "last_stream": String(goaway.last_stream_id),
                                 "error": String(cString: nghttp2_http2_strerror(goaway.error_code)), "reason": reason])
    case NGHTTP2_PING.rawValue where frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0:
        owner.host.machine.pingAcknowledged()
    default:
        break
    }
    return 0
}

private func onLinkFrameSent(_ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?,
                             _ userData: UnsafeMutableRawPointer?) -> Int32 {
    guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue) else { return 0 }
    link(userData).host.machine.headersSent(frame.pointee.hd.stream_id)
    return 0
}

/// HEADERS that nghttp2 dropped before sending (e.g. GOAWAY arrived while they were queued): never seen by APNs.
private func onLinkFrameNotSent(_ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?, _ error: Int32,
                                _ userData: UnsafeMutableRawPointer?) -> Int32 {
    guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue) else { return 0 }
    link(userData).headersNotSent(frame.pointee.hd.stream_id)
    return 0
}

private func onLinkStreamClose(_ session: OpaquePointer?, _ streamID: Int32, _ errorCode: UInt32,
                               _ userData: UnsafeMutableRawPointer?) -> Int32 {
    link(userData).streamClosed(streamID, errorCode: errorCode)
    return 0
}
