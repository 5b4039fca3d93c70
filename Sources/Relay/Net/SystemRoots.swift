import COpenSSL
import Glibc

/// Where the system's trusted root certificates are, and how a `TLSContext` reads them.
///
/// OpenSSL's default (`SSL_CTX_set_default_verify_paths`) parses the whole CA bundle into the context at once.
/// On Debian that is ~140 certificates: 23 ms of CPU and 1.5 MB of heap at start-up, for the one or two roots that
/// APNs and Prefect chain to. A directory of certificates named by subject hash (`<8 hex digits>.<n>`, which Debian's
/// ca-certificates, `openssl rehash` and `make image` lay out) is read lazily instead: a root is loaded when a chain
/// names it. The bundle stays the fallback, and is what an operator gets by naming one in `SSL_CERT_FILE`.
struct SystemRoots: Sendable, Equatable {
    /// The bundle `SSL_CERT_FILE` names. When set, OpenSSL's defaults are used, which read it.
    var requestedFile: String?
    /// `SSL_CERT_DIR`, else OpenSSL's built-in directory (`/usr/lib/ssl/certs` on Debian). It may list several
    /// directories separated by `:`, as OpenSSL reads it.
    var directory: String

    enum Source: Equatable {
        /// Roots are loaded from this directory (or `:`-separated list) as a chain needs them.
        case hashedDirectory(String)
        /// OpenSSL's defaults: the bundle file parsed whole, plus the directory.
        case defaults
    }

    /// How this process reads its roots, decided once: the environment doesn't change while the relay runs, and
    /// every TLS context (APNs, the events socket's, the REST pool's) would otherwise list the directory again.
    static let forProcess: Source = fromEnvironment().source()

    /// From the process environment, as OpenSSL itself would find them.
    static func fromEnvironment() -> SystemRoots {
        func variable(_ name: UnsafePointer<CChar>) -> String? {
            getenv(name).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
        }
        return SystemRoots(requestedFile: variable(X509_get_default_cert_file_env()),
                           directory: variable(X509_get_default_cert_dir_env())
                               ?? String(cString: X509_get_default_cert_dir()))
    }

    /// How the roots are read: the hashed directory when no bundle was asked for and one of the directories holds
    /// a hashed certificate; OpenSSL's defaults otherwise (no directory, an empty one, or only a bundle in it).
    func source(listing: (String) -> [String]? = SystemRoots.names(in:)) -> Source {
        guard requestedFile == nil else { return .defaults }
        let hashed = directory.split(separator: ":").contains { path in
            listing(String(path))?.contains(where: Self.isHashedName) ?? false
        }
        return hashed ? .hashedDirectory(directory) : .defaults
    }

    /// `1a2b3c4d.0`: how OpenSSL's directory lookup names a certificate (`.r0` would be a CRL).
    static func isHashedName(_ name: String) -> Bool {
        let parts = name.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].count == 8, !parts[1].isEmpty, parts[1].count <= 4 else { return false }
        return parts[0].allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
            && parts[1].allSatisfy { (0x30...0x39).contains($0) }
    }

    /// The entry names of a directory, or nil when it can't be read.
    static func names(in path: String) -> [String]? {
        guard let dir = opendir(path) else { return nil }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }
}
