import COpenSSL
@testable import Relay

/// Paths into `Fixtures/apns`, found from this file's location (the tests import no Foundation, so no
/// `Bundle.module`).
enum APNsFixtures {
    static let directory: String = {
        var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(2)  // Fakes/APNsFixtures.swift
        return parts.joined(separator: "/") + "/Fixtures/apns/"
    }()

    static func path(_ name: String) -> String { directory + name }

    static let keyID = "TESTKEY123"
    static let teamID = "TEAM123456"
    static var keyPath: String { path("AuthKey_TESTKEY123.p8") }
    static var publicKeyPath: String { path("AuthKey_TESTKEY123.pub.pem") }
    /// The key a rotation installs in place of the first.
    static let rotatedKeyID = "ROTATED456"
    static var rotatedKeyPath: String { path("AuthKey_ROTATED456.p8") }

    /// A relay's APNs settings for fakes listening on these ports: the test key, and the test CA to trust them.
    static func relayEnvironment(production: Int, development: Int) -> [String: String] {
        ["APNS_KEY_PATH": keyPath, "APNS_KEY_ID": keyID, "APNS_TEAM_ID": teamID, "APNS_CA_FILE": path("ca.pem"),
         "APNS_PRODUCTION_URL": "https://127.0.0.1:\(production)", "APNS_DEVELOPMENT_URL": "https://127.0.0.1:\(development)"]
    }

    /// Reads a whole fixture file as text.
    static func text(_ name: String) -> String {
        guard let file = fopen(path(name), "r") else { preconditionFailure("missing fixture \(name)") }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = fread(&buffer, 1, buffer.count, file)
            if count <= 0 { break }
            bytes.append(contentsOf: buffer.prefix(count))
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

import FakeAPNs

extension FakeAPNs.Identity {
    /// The test CA's server certificate and the test provider key.
    static var test: FakeAPNs.Identity {
        FakeAPNs.Identity(certificateChainPath: APNsFixtures.path("server.pem"), privateKeyPath: APNsFixtures.path("server.key"),
                          jwtPublicKeyPath: APNsFixtures.publicKeyPath, keyID: APNsFixtures.keyID, teamID: APNsFixtures.teamID)
    }

    /// The test certificate, accepting provider tokens of the rotated key (`AuthKey_ROTATED456.p8`) only: Apple after
    /// the old key was revoked.
    static var rotated: FakeAPNs.Identity {
        FakeAPNs.Identity(certificateChainPath: APNsFixtures.path("server.pem"), privateKeyPath: APNsFixtures.path("server.key"),
                          jwtPublicKeyPath: APNsFixtures.path("AuthKey_ROTATED456.pub.pem"),
                          keyID: APNsFixtures.rotatedKeyID, teamID: APNsFixtures.teamID)
    }

    /// The same, with a certificate for `apns.proxy.test` only: a name only the tests' CONNECT proxy resolves.
    static var proxied: FakeAPNs.Identity {
        FakeAPNs.Identity(certificateChainPath: APNsFixtures.path("proxied-server.pem"),
                          privateKeyPath: APNsFixtures.path("server.key"), jwtPublicKeyPath: APNsFixtures.publicKeyPath,
                          keyID: APNsFixtures.keyID, teamID: APNsFixtures.teamID)
    }
}

extension FakeAPNs {
    convenience init(name: String = "fake-apns", maxConcurrentStreams: UInt32 = 1000) throws {
        try self.init(name: name, maxConcurrentStreams: maxConcurrentStreams, identity: .test)
    }
}
