// CShims too: the socket constants (SOCK_STREAM, IPPROTO_TCP) come from headers libwebsockets.h also includes, and
// which module a batch of files finds them in varies (a build once failed with them "not in scope" under Glibc alone).
import CShims
import Glibc
import RelayCore

/// A connected byte stream the pool reads and writes without blocking: a `TLSSocket` for https, a `PlainSocket`
/// for http. Owned by one thread at a time (the connecting thread, then the pool's loop thread).
protocol ByteStream: AnyObject {
    var fd: Int32 { get }
    /// Bytes are waiting in the outbox, or a TLS read asked to write first: poll for POLLOUT.
    var wantsWrite: Bool { get }
    var readWantsWrite: Bool { get }
    func readAvailable(_ sink: (UnsafeBufferPointer<UInt8>) -> Bool) -> TLSSocket.ReadStatus
    func enqueue(_ bytes: UnsafeBufferPointer<UInt8>)
    /// Writes what the socket takes now; an error text when the connection is broken.
    func flush() -> String?
}

extension TLSSocket: ByteStream {}

/// A non-blocking TCP socket without TLS, with the same outbox-and-drain shape as `TLSSocket`. Owns the fd.
final class PlainSocket: ByteStream {
    let fd: Int32
    let readWantsWrite = false
    private var outbox: [UInt8] = []
    private var outboxStart = 0
    private var readBuffer = [UInt8](repeating: 0, count: 32 * 1024)

    /// Takes ownership of `fd` (non-blocking, connected).
    init(fd: Int32) { self.fd = fd }

    deinit { close(fd) }

    var wantsWrite: Bool { outboxStart < outbox.count }

    func readAvailable(_ sink: (UnsafeBufferPointer<UInt8>) -> Bool) -> TLSSocket.ReadStatus {
        while true {
            let count = readBuffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                let accepted = readBuffer.withUnsafeBufferPointer { sink(UnsafeBufferPointer(rebasing: $0[..<count])) }
                if !accepted { return .closed("protocol error") }
                continue
            }
            if count == 0 { return .closed("peer closed the socket") }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return .open
            default: return .closed("read: " + String(cString: strerror(errno)))
            }
        }
    }

    func enqueue(_ bytes: UnsafeBufferPointer<UInt8>) { outbox.append(contentsOf: bytes) }

    func flush() -> String? {
        while outboxStart < outbox.count {
            // MSG_NOSIGNAL: a peer that hung up gives EPIPE here, not SIGPIPE.
            let written = outbox.withUnsafeBytes { raw in
                send(fd, raw.baseAddress! + outboxStart, raw.count - outboxStart, Int32(MSG_NOSIGNAL))
            }
            if written > 0 {
                outboxStart += written
                continue
            }
            if written < 0 && errno == EINTR { continue }
            if written < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return nil }
            return "write: " + String(cString: strerror(errno))
        }
        outbox.removeAll(keepingCapacity: true)
        outboxStart = 0
        return nil
    }
}

/// One kept-alive HTTP/1.1 connection of the pool: one request at a time, the response read by
/// `HTTP1ResponseParser`. Loop thread only (the pool's); created once the connecting thread hands its stream over.
final class HTTPConnection {
    /// What a step of I/O came to.
    enum Outcome {
        case pending
        /// The answer to the request it carried; `reusable` when the connection may carry the next one.
        case answered(HTTPReply, reusable: Bool)
        /// No usable answer. `beforeAnyByte`: nothing of a response arrived (the request may be sent again).
        case failed(String, beforeAnyByte: Bool)
        /// An idle connection was closed by the server (or sent something unasked): drop it.
        case idleClosed(String)
    }

    let id: HTTPPoolStateMachine.ConnectionID
    let origin: HTTPPool.Origin
    let stream: ByteStream
    /// The call whose request it carries (its caller may have given up on it: the request is still open).
    private(set) var call: PooledCall?
    private var parser = HTTP1ResponseParser(maxBody: HTTPPool.maxResponse)

    init(id: HTTPPoolStateMachine.ConnectionID, origin: HTTPPool.Origin, stream: ByteStream) {
        self.id = id
        self.origin = origin
        self.stream = stream
    }

    var isIdle: Bool { call == nil }

    var pollEvents: Int16 { Int16(POLLIN) | (stream.wantsWrite ? Int16(POLLOUT) : 0) }

    /// Writes `call`'s request (as much as the socket takes now; the rest on POLLOUT).
    func start(_ call: PooledCall) -> Outcome {
        self.call = call
        parser = HTTP1ResponseParser(maxBody: HTTPPool.maxResponse)
        call.request.withUnsafeBufferPointer { stream.enqueue($0) }
        if let error = stream.flush() { return .failed(error, beforeAnyByte: true) }
        return .pending
    }

    /// Handles what poll() reported for this socket.
    func service(_ revents: Int16) -> Outcome {
        guard call != nil else {
            // Idle: readable means the server closed it (or spoke out of turn); either way it can't be reused.
            var unasked = false
            let status = stream.readAvailable { _ in unasked = true; return false }
            if unasked { return .idleClosed("the server sent bytes nobody asked for") }
            if case .closed(let why) = status { return .idleClosed(why) }
            if revents & Int16(POLLERR | POLLHUP) != 0 { return .idleClosed("the socket hung up") }
            return .pending
        }
        if stream.wantsWrite, let error = stream.flush() {
            return .failed(error, beforeAnyByte: !parser.receivedAny)
        }
        let status = stream.readAvailable { bytes in
            if case .failed = parser.feed(bytes) { return false }
            return true
        }
        var progress = parser.progress
        if case .needMore = progress, case .closed = status { progress = parser.finishAtEOF() }
        switch progress {
        case .needMore:
            if case .closed(let why) = status { return .failed(why, beforeAnyByte: !parser.receivedAny) }
            return .pending
        case .failed(let why):
            if case .closed(let closed) = status, !parser.receivedAny { return .failed(closed, beforeAnyByte: true) }
            return .failed(why, beforeAnyByte: !parser.receivedAny)
        case .complete(let response):
            var open = true
            if case .closed = status { open = false }
            call = nil
            let retryAfter = response.status == 429 || response.status == 503
                ? response.header("retry-after").flatMap(RetryAfter.seconds) : nil
            return .answered(HTTPReply(status: response.status, body: response.body, retryAfter: retryAfter),
                             reusable: open && response.reusable)
        }
    }
}
