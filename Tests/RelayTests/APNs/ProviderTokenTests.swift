import Synchronization
import Testing
@testable import Relay
@testable import FakeAPNs
@testable import RelayCore

@Suite struct ProviderTokenTests {
    @Test func base64URLRoundTripsWithoutPadding() {
        for length in 0..<40 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 * 37 + 251) }
            let encoded = Base64.encode(bytes, .url)
            #expect(!encoded.contains("=") && !encoded.contains("+") && !encoded.contains("/"))
            #expect(Base64.decode(encoded, .url) == bytes)
        }
        #expect(Base64.encode("{\"alg\":\"ES256\"}", .url) == "eyJhbGciOiJFUzI1NiJ9")
        #expect(Base64.decode("a*b", .url) == nil)
    }

    @Test func claimsAreNumericAndHeaderHasNoType() throws {
        let claims = ProviderTokenClaims(keyID: "ABC123DEFG", teamID: "TEAM123456", issuedAt: 1_700_000_000)
        #expect(claims.headerJSON.encoded() == #"{"alg":"ES256","kid":"ABC123DEFG"}"#)
        #expect(claims.claimsJSON.encoded() == #"{"iat":1700000000,"iss":"TEAM123456"}"#)
        let parts = claims.signingInput.split(separator: ".")
        #expect(parts.count == 2)
        let decoded = try JSONParser.parse(Base64.decode(String(parts[1]), .url)!)
        #expect(decoded["iat"] == .int(1_700_000_000))
    }

    @Test func signatureVerifiesWithThePublicKey() throws {
        let key = try ProviderKey(path: APNsFixtures.keyPath)
        let signer = JWTSigner(key: key, keyID: APNsFixtures.keyID, teamID: APNsFixtures.teamID, now: { 1_700_000_000 })
        let token = try signer.token()
        let verifier = JWTVerifier(publicKeyPath: APNsFixtures.publicKeyPath)
        let parsed = try #require(verifier.verify(token))
        #expect(parsed.header == ["alg": "ES256", "kid": .string(APNsFixtures.keyID)])
        #expect(parsed.claims == ["iss": .string(APNsFixtures.teamID), "iat": .int(1_700_000_000)])
        // The raw r‖s form: 64 bytes, not DER.
        #expect(Base64.decode(String(token.split(separator: ".")[2]), .url)?.count == 64)
        // A token signed by another key must not verify.
        let other = JWTSigner(key: try ProviderKey(path: APNsFixtures.path("other-p256.p8")), keyID: APNsFixtures.keyID,
                              teamID: APNsFixtures.teamID)
        #expect(verifier.verify(try other.token()) == nil)
    }

    @Test func inlineKeyLoadsIncludingEscapedNewlines() throws {
        let pem = APNsFixtures.text("AuthKey_TESTKEY123.p8")
        _ = try ProviderKey(source: .inline(pem))
        _ = try ProviderKey(source: .inline(pem.split(separator: "\n").joined(separator: "\\n")))
    }

    @Test func wrongKeysNameTheVariable() {
        for (file, fragment) in [("rsa.p8", "not an EC key"), ("p384.p8", "secp384r1")] {
            #expect {
                try ProviderKey(source: .file(APNsFixtures.path(file)))
            } throws: { error in
                let config = error as? ConfigError
                return config?.variable == "APNS_KEY_PATH" && config?.problem.contains(fragment) == true
                    && config?.problem.contains("P-256") == true
            }
        }
        #expect { try ProviderKey(source: .inline("not a key")) } throws: { error in
            (error as? ConfigError)?.variable == "APNS_KEY"
        }
        #expect { try ProviderKey(source: .file("/nonexistent/AuthKey.p8")) } throws: { error in
            (error as? ConfigError)?.problem.contains("could not be read") == true
        }
    }

    @Test func signerSharesOneTokenAndRenewsByPolicy() throws {
        let clock = Atomic<Int64>(1_000_000)
        let signer = JWTSigner(key: try ProviderKey(path: APNsFixtures.keyPath), keyID: APNsFixtures.keyID,
                               teamID: APNsFixtures.teamID, now: { clock.load(ordering: .relaxed) })
        let first = try signer.token()
        clock.store(1_000_000 + 49 * 60, ordering: .relaxed)
        #expect(try signer.token() == first)
        // Within 20 minutes only ExpiredProviderToken may force a new one.
        clock.store(1_000_000 + 10 * 60, ordering: .relaxed)
        #expect(signer.renew(rejected: first, reason: .invalidProviderToken) == nil)
        let renewal = try #require(signer.renew(rejected: first, reason: .expiredProviderToken))
        let renewed = renewal.token
        #expect(renewed != first && renewal.isNew)
        // A second request rejected with the old token gets the new one, without another signature.
        let again = try #require(signer.renew(rejected: first, reason: .expiredProviderToken))
        #expect(again.token == renewed && !again.isNew)
        clock.store(1_000_000 + 10 * 60 + 50 * 60, ordering: .relaxed)
        #expect(try signer.token() != renewed)
    }
}
