import COpenSSL
import Glibc

/// One non-blocking TCP socket with TLS on top: owns the fd and the `SSL*`. Used by one thread at a time: its loop
/// thread (the APNs connection's, or the test server's), or a caller holding that APNs connection's `turn` lock
/// (`APNsHostLoop.sendDirectly`, while the loop is in poll()); not safe to share otherwise.
///
/// Writes go through an outbox so a short `SSL_write` never loses bytes; reads drain everything OpenSSL
/// has, since `poll()` cannot see bytes already decrypted and buffered inside the `SSL*`.
package final class TLSSocket {
    package let fd: Int32
    private let ssl: OpaquePointer
    private var outbox: [UInt8] = []
    private var outboxStart = 0
    private var readBuffer = [UInt8](repeating: 0, count: 32 * 1024)
    /// An `SSL_read` asked to write first (TLS 1.3 key update); poll for POLLOUT and read again.
    private(set) var readWantsWrite = false

    package enum Progress { case done, wantRead, wantWrite }
    package enum ReadStatus { case open, closed(String) }

    /// Takes ownership of both `fd` and `ssl`.
    package init(fd: Int32, ssl: OpaquePointer) {
        self.fd = fd
        self.ssl = ssl
        SSL_set_fd(ssl, fd)
    }

    // Reverse of creation: the SSL* (which only borrows the fd) goes first, then the fd.
    deinit {
        ERR_clear_error()
        SSL_shutdown(ssl)  // best effort close_notify; the socket is non-blocking, so this never waits
        SSL_free(ssl)
        close(fd)
    }

    /// One step of the TLS handshake, as client (`SSL_connect`) or server (`SSL_accept`).
    package func handshake(asClient: Bool) throws(TLSError) -> Progress {
        ERR_clear_error()
        let result = asClient ? SSL_connect(ssl) : SSL_accept(ssl)
        if result == 1 { return .done }
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ: return .wantRead
        case SSL_ERROR_WANT_WRITE: return .wantWrite
        default:
            let verify = SSL_get_verify_result(ssl)
            if verify != X509_V_OK {
                throw TLSError(asClient ? "SSL_connect" : "SSL_accept",
                               detail: "certificate verify failed: " + String(cString: X509_verify_cert_error_string(verify)))
            }
            throw TLSError(asClient ? "SSL_connect" : "SSL_accept")
        }
    }

    /// The protocol ALPN settled on, e.g. "h2".
    var alpn: String? {
        var data: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &data, &length)
        guard let data, length > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(length)), as: UTF8.self)
    }

    // MARK: - Reading

    /// Reads until OpenSSL has nothing more, handing each chunk to `sink` (which returns false to stop on a
    /// protocol error). `.closed` on EOF, error, or a refusing sink.
    package func readAvailable(_ sink: (UnsafeBufferPointer<UInt8>) -> Bool) -> ReadStatus {
        readWantsWrite = false
        while true {
            ERR_clear_error()
            let count = readBuffer.withUnsafeMutableBytes { SSL_read(ssl, $0.baseAddress, Int32($0.count)) }
            if count > 0 {
                let accepted = readBuffer.withUnsafeBufferPointer { sink(UnsafeBufferPointer(rebasing: $0[..<Int(count)])) }
                if !accepted { return .closed("protocol error") }
                continue
            }
            switch SSL_get_error(ssl, count) {
            case SSL_ERROR_WANT_READ: return .open
            case SSL_ERROR_WANT_WRITE: readWantsWrite = true; return .open
            case SSL_ERROR_ZERO_RETURN: return .closed("peer closed TLS")
            case SSL_ERROR_SYSCALL:
                return .closed(errno == 0 ? "peer closed the socket" : String(cString: strerror(errno)))
            default: return .closed(TLSError("SSL_read").description)
            }
        }
    }

    // MARK: - Writing

    var pendingBytes: Int { outbox.count - outboxStart }
    package var wantsWrite: Bool { pendingBytes > 0 || readWantsWrite }

    package func enqueue(_ bytes: UnsafeBufferPointer<UInt8>) {
        outbox.append(contentsOf: bytes)
    }

    /// Writes as much of the outbox as the socket takes. Returns an error text when the connection is broken.
    package func flush() -> String? {
        while outboxStart < outbox.count {
            ERR_clear_error()
            let written = outbox.withUnsafeBytes { raw in
                SSL_write(ssl, raw.baseAddress! + outboxStart, Int32(min(raw.count - outboxStart, Int(Int32.max))))
            }
            if written > 0 {
                outboxStart += Int(written)
                continue
            }
            switch SSL_get_error(ssl, written) {
            case SSL_ERROR_WANT_WRITE, SSL_ERROR_WANT_READ: compact(); return nil
            case SSL_ERROR_SYSCALL: return "write: " + String(cString: strerror(errno))
            default: return TLSError("SSL_write").description
            }
        }
        outbox.removeAll(keepingCapacity: outbox.capacity <= 1 << 20)
        outboxStart = 0
        return nil
    }

    private func compact() {
        guard outboxStart > 64 * 1024 else { return }
        outbox.removeFirst(outboxStart)
        outboxStart = 0
    }
}
