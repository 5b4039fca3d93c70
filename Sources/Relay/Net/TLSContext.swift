import COpenSSL
import CShims

/// Owns one client `SSL_CTX`: TLS 1.2+, ALPN `h2`, peer verification against the system roots (read as
/// `SystemRoots` says: lazily from a hashed directory where there is one) plus an optional extra CA file
/// (`APNS_CA_FILE`, which is how tests trust their fake APNs).
///
/// `Sendable`, checked but for the one C pointer: the context is configured in `init` and only read afterwards
/// (`SSL_new`), which OpenSSL allows from any thread.
final class TLSContext: Sendable {
    nonisolated(unsafe) let context: OpaquePointer

    /// `caVariable` names the setting `caFile` came from, for the error message.
    init(caFile: String?, alpn: [UInt8] = [2, UInt8(ascii: "h"), UInt8(ascii: "2")],
         caVariable: String = "APNS_CA_FILE", systemRoots: SystemRoots? = nil) throws(TLSError) {
        guard let context = SSL_CTX_new(TLS_client_method()) else { throw TLSError("SSL_CTX_new") }
        do {
            try TLSError.check(CShims_SSL_CTX_set_min_tls12(context), "SSL_CTX_set_min_proto_version")
            SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
            // nil: this process's roots (`SystemRoots.forProcess`); tests pass their own.
            switch systemRoots?.source() ?? SystemRoots.forProcess {
            case .hashedDirectory(let directory):
                try TLSError.check(SSL_CTX_load_verify_dir(context, directory), "SSL_CTX_load_verify_dir")
            case .defaults:
                try TLSError.check(SSL_CTX_set_default_verify_paths(context), "SSL_CTX_set_default_verify_paths")
            }
            if let caFile {
                guard SSL_CTX_load_verify_locations(context, caFile, nil) == 1 else {
                    throw TLSError("SSL_CTX_load_verify_locations", detail: "\(caVariable) \(caFile) is not a readable PEM file")
                }
            }
            // SSL_CTX_set_alpn_protos returns 0 on success, unlike the rest of OpenSSL.
            guard SSL_CTX_set_alpn_protos(context, alpn, UInt32(alpn.count)) == 0 else {
                throw TLSError("SSL_CTX_set_alpn_protos")
            }
            // We write from our own growing buffer, so partial writes and a moved buffer on retry are fine.
            // (SSL_CTX_set_mode is a macro over this call.)
            let mode = Int(SSL_MODE_ENABLE_PARTIAL_WRITE) | Int(SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER)
            _ = SSL_CTX_ctrl(context, SSL_CTRL_MODE, mode, nil)
        } catch let error as TLSError {
            SSL_CTX_free(context)
            throw error
        } catch {
            SSL_CTX_free(context)
            throw TLSError("SSL_CTX setup", detail: "\(error)")
        }
        self.context = context
    }

    deinit { SSL_CTX_free(context) }

    /// A new `SSL*` for `host`, with SNI (names only, as RFC 6066 asks) and host name or IP verification.
    /// The caller owns the result and frees it with `SSL_free`.
    func makeSSL(host: String) throws(TLSError) -> OpaquePointer {
        guard let ssl = SSL_new(context) else { throw TLSError("SSL_new") }
        let isIP = host.contains(":") || host.allSatisfy { $0.isASCIIDigit || $0 == "." }
        let ok: Bool
        if isIP {
            ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) == 1
        } else {
            ok = CShims_SSL_set_sni(ssl, host) == 1 && SSL_set1_host(ssl, host) == 1
        }
        guard ok else {
            SSL_free(ssl)
            throw TLSError(isIP ? "X509_VERIFY_PARAM_set1_ip_asc" : "SSL_set1_host")
        }
        return ssl
    }
}
