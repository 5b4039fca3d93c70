import COpenSSL
import RelayCore

/// The `.p8` provider key: owns one `EVP_PKEY` (EC P-256) and signs ES256 with it.
///
/// `Sendable`, checked but for the one C pointer: the key is never changed after `init`, and OpenSSL allows
/// concurrent signing with one key as long as each signature has its own `EVP_MD_CTX`, which `sign` creates per call.
final class ProviderKey: Sendable {
    nonisolated(unsafe) private let key: OpaquePointer

    /// Loads the key from the configured source. Errors name the variable so start-up can say what to fix.
    convenience init(source: Config.KeySource) throws(ConfigError) {
        switch source {
        case .inline(let pem): try self.init(pem: pem, variable: "APNS_KEY")
        case .file(let path): try self.init(path: path)
        }
    }

    init(pem: String, variable: String) throws(ConfigError) {
        // The variable may arrive with literal "\n" sequences when set from a one-line secret.
        let text = pem.includes("\\n") && !pem.includes("\n") ? pem.pieces(separatedBy: "\\n").joined(separator: "\n") : pem
        var bytes = Array(text.utf8)
        let loaded: OpaquePointer? = bytes.withUnsafeMutableBytes { raw in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return nil }
            defer { BIO_free(bio) }
            return PEM_read_bio_PrivateKey(bio, nil, nil, nil)
        }
        key = try Self.validated(loaded, variable: variable, what: "is not a PEM private key (expected the .p8 file's text)")
    }

    init(path: String) throws(ConfigError) {
        guard let bio = BIO_new_file(path, "r") else {
            _ = TLSError("BIO_new_file")
            throw ConfigError("APNS_KEY_PATH", "could not be read at \(path); point it at the AuthKey_XXXXXXXXXX.p8 file")
        }
        defer { BIO_free(bio) }
        let loaded = PEM_read_bio_PrivateKey(bio, nil, nil, nil)
        key = try Self.validated(loaded, variable: "APNS_KEY_PATH",
                                 what: "at \(path) is not a PEM private key (expected the .p8 file from Apple)")
    }

    deinit { EVP_PKEY_free(key) }

    private static func validated(_ key: OpaquePointer?, variable: String, what: String) throws(ConfigError) -> OpaquePointer {
        guard let key else {
            let error = TLSError("PEM_read_bio_PrivateKey")
            throw ConfigError(variable, "\(what) (\(error.detail.prefix(120)))")
        }
        var name = [CChar](repeating: 0, count: 64)
        var length = 0
        let isEC = EVP_PKEY_get_base_id(key) == EVP_PKEY_EC
        let hasGroup = isEC && EVP_PKEY_get_group_name(key, &name, name.count, &length) == 1
        let group = String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard isEC, hasGroup, group == "prime256v1" || group == "P-256" else {
            EVP_PKEY_free(key)
            _ = TLSError("EVP_PKEY_get_group_name")
            let found = isEC ? "an EC key on \(group.isEmpty ? "an unknown curve" : group)" : "not an EC key"
            throw ConfigError(variable, "must be an EC P-256 key (Apple's .p8 signing key); this one is \(found)")
        }
        return key
    }

    /// Signs `message` with ECDSA P-256 / SHA-256 and returns JOSE's raw 64-byte r‖s (not DER).
    func sign(_ message: [UInt8]) throws(TLSError) -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw TLSError("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(context) }
        try TLSError.check(EVP_DigestSignInit(context, nil, EVP_sha256(), nil, key), "EVP_DigestSignInit")
        var length = 0
        try TLSError.check(EVP_DigestSign(context, nil, &length, message, message.count), "EVP_DigestSign")
        var der = [UInt8](repeating: 0, count: length)
        try TLSError.check(EVP_DigestSign(context, &der, &length, message, message.count), "EVP_DigestSign")
        return try Self.rawSignature(fromDER: Array(der.prefix(length)))
    }

    /// DER `ECDSA-Sig-Value` → r‖s, each left-padded to 32 bytes.
    static func rawSignature(fromDER der: [UInt8]) throws(TLSError) -> [UInt8] {
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &cursor, buffer.count)
        }
        guard let signature = parsed else { throw TLSError("d2i_ECDSA_SIG") }
        defer { ECDSA_SIG_free(signature) }
        var r: OpaquePointer?
        var s: OpaquePointer?
        ECDSA_SIG_get0(signature, &r, &s)
        var raw = [UInt8](repeating: 0, count: 64)
        let ok = raw.withUnsafeMutableBufferPointer { out in
            BN_bn2binpad(r, out.baseAddress, 32) == 32 && BN_bn2binpad(s, out.baseAddress! + 32, 32) == 32
        }
        guard ok else { throw TLSError("BN_bn2binpad") }
        return raw
    }
}
