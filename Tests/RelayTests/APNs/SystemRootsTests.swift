import COpenSSL
import Testing
@testable import Relay
@testable import FakeAPNs

@Suite struct SystemRootsTests {
    @Test func hashedNamesAreTheOnesOpenSSLLooksUp() {
        for name in ["1a2b3c4d.0", "ffffffff.12", "00000000.9999"] { #expect(SystemRoots.isHashedName(name), "\(name)") }
        for name in ["1a2b3c4d.r0", "ca-certificates.crt", "1A2B3C4D.0", "1a2b3c4.0", "1a2b3c4d.", "1a2b3c4d.0.pem",
                     "1a2b3c4d", "1a2b3c4g.0", "Go_Daddy_Root.pem", ".", ""] {
            #expect(!SystemRoots.isHashedName(name), "\(name)")
        }
    }

    @Test func aHashedDirectoryIsReadLazilyUnlessABundleIsAskedFor() {
        let directories = ["/etc/ssl/certs": ["ca-certificates.crt", "ACCVRAIZ1.pem", "1a2b3c4d.0"],
                           "/bundle-only": ["ca-certificates.crt"], "/empty": []]
        let listing: (String) -> [String]? = { directories[$0] }
        func source(_ file: String?, _ directory: String) -> SystemRoots.Source {
            SystemRoots(requestedFile: file, directory: directory).source(listing: listing)
        }
        #expect(source(nil, "/etc/ssl/certs") == .hashedDirectory("/etc/ssl/certs"))
        #expect(source(nil, "/missing:/etc/ssl/certs") == .hashedDirectory("/missing:/etc/ssl/certs"))
        // SSL_CERT_FILE names a bundle: the operator gets it, read as OpenSSL always did.
        #expect(source("/etc/ssl/certs/ca-certificates.crt", "/etc/ssl/certs") == .defaults)
        // Nothing to look up by hash: the bundle is the only way to the roots.
        #expect(source(nil, "/bundle-only") == .defaults)
        #expect(source(nil, "/empty") == .defaults)
        #expect(source(nil, "/missing") == .defaults)
    }

    @Test func theDirectoryListingSeesWhatIsThere() throws {
        let directory = TestFiles.temporaryDirectory()
        defer { TestFiles.removeTree(directory) }
        try TestFiles.write(directory + "/1a2b3c4d.0", "x")
        try TestFiles.write(directory + "/bundle.crt", "x")
        #expect(Set(SystemRoots.names(in: directory) ?? []) == ["1a2b3c4d.0", "bundle.crt"])
        #expect(SystemRoots.names(in: directory + "/missing") == nil)
    }

    // Real handshakes with the fake APNs, whose certificate the test CA signed, and no APNS_CA_FILE: the test CA is
    // trusted only if the directory lookup finds it by its subject hash when the chain names it.

    @Test func aRootInTheHashedDirectoryIsLoadedWhenAChainNamesIt() throws {
        let fake = try FakeAPNs(name: "production")
        defer { fake.stop() }
        let directory = TestFiles.temporaryDirectory()
        defer { TestFiles.removeTree(directory) }
        try TestFiles.write(directory + "/" + Self.subjectHash(APNsFixtures.path("ca.pem")) + ".0", APNsFixtures.text("ca.pem"))
        let roots = SystemRoots(requestedFile: nil, directory: directory)
        #expect(roots.source() == .hashedDirectory(directory))
        let tls = try TLSContext(caFile: nil, systemRoots: roots)
        let socket = try TLSSocket.connect(host: "127.0.0.1", port: fake.port, tls: tls, timeoutMs: 5_000)
        _ = socket
    }

    @Test func aChainWhoseRootIsNotInTheDirectoryIsRefused() throws {
        let fake = try FakeAPNs(name: "production")
        defer { fake.stop() }
        let directory = TestFiles.temporaryDirectory()
        defer { TestFiles.removeTree(directory) }
        // A hashed directory, but the test CA is filed under a hash that is not its own: the lookup can't find it.
        try TestFiles.write(directory + "/00000000.0", APNsFixtures.text("ca.pem"))
        let tls = try TLSContext(caFile: nil, systemRoots: SystemRoots(requestedFile: nil, directory: directory))
        #expect(throws: TransportError.self) {
            _ = try TLSSocket.connect(host: "127.0.0.1", port: fake.port, tls: tls, timeoutMs: 5_000)
        }
    }

    /// The name OpenSSL's directory lookup gives a certificate: its subject's hash, 8 lower-case hex digits.
    static func subjectHash(_ path: String) throws -> String {
        guard let bio = BIO_new_file(path, "r") else { throw TestFailure("cannot read \(path)") }
        defer { BIO_free(bio) }
        guard let certificate = PEM_read_bio_X509(bio, nil, nil, nil) else { throw TestFailure("no certificate in \(path)") }
        defer { X509_free(certificate) }
        let hex = String(X509_subject_name_hash(certificate), radix: 16)
        return String(repeating: "0", count: max(0, 8 - hex.count)) + hex
    }
}
