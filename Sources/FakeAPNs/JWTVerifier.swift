import COpenSSL
import CShims
import RelayCore
import Relay

/// Checks ES256 provider tokens against a public key, the way APNs would. Owns one `EVP_PKEY`.
///
/// `@unchecked Sendable`: the key is read-only after init and each verification has its own `EVP_MD_CTX`.
final class JWTVerifier: @unchecked Sendable {
    private let key: OpaquePointer

    init(publicKeyPath: String) {
        guard let bio = BIO_new_file(publicKeyPath, "r") else { preconditionFailure("cannot open \(publicKeyPath)") }
        defer { BIO_free(bio) }
        guard let key = PEM_read_bio_PUBKEY(bio, nil, nil, nil) else { preconditionFailure("bad public key") }
        self.key = key
    }

    deinit { EVP_PKEY_free(key) }

    struct Parsed {
        var header: JSONValue
        var claims: JSONValue
    }

    /// The decoded header and claims if the signature verifies, else nil.
    func verify(_ token: String) -> Parsed? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64.decode(String(parts[0]), .url),
              let claimBytes = Base64.decode(String(parts[1]), .url), let signature = Base64.decode(String(parts[2]), .url),
              signature.count == 64, let der = Self.der(fromRaw: signature) else { return nil }
        let message = Array((parts[0] + "." + parts[1]).utf8)
        guard let context = EVP_MD_CTX_new() else { return nil }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key) == 1,
              EVP_DigestVerify(context, der, der.count, message, message.count) == 1 else {
            ERR_clear_error()
            return nil
        }
        guard let header = try? JSONParser.parse(headerBytes), let claims = try? JSONParser.parse(claimBytes) else {
            return nil
        }
        return Parsed(header: header, claims: claims)
    }

    /// JOSE r‖s → DER, which `EVP_DigestVerify` wants.
    static func der(fromRaw raw: [UInt8]) -> [UInt8]? {
        guard let signature = ECDSA_SIG_new() else { return nil }
        defer { ECDSA_SIG_free(signature) }
        let r = BN_bin2bn(raw, 32, nil)
        let s = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress! + 32, 32, nil) }
        guard ECDSA_SIG_set0(signature, r, s) == 1 else { return nil }
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_ECDSA_SIG(signature, &out)
        guard length > 0, let out else { return nil }
        defer { CShims_OPENSSL_free(out) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }
}
