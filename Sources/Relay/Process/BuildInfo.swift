/// The version and commit this binary was built from (`--version`, `relay.started`, `prefect_push_build_info`, the
/// image's labels and the User-Agent), and the libraries linked into it (`--version --verbose`, the image's SBOM).
///
/// `make build` writes `BuildStamp` into a git-ignored file from the checkout (`git describe --tags --always
/// --dirty` and `git rev-parse HEAD`, by `deploy/build-stamp.sh`) and compiles it in with `-DPREFECT_PUSH_STAMPED`.
/// A build without the flag (a plain `swift build`, the tests) reports the defaults below, so it never needs git.
package enum BuildInfo {
    /// A library the release binary carries (`static`) or loads (`dynamic`), with the Debian source version it was
    /// built from, or the toolchain's version for the Swift runtime; `purl` is its package URL, as in the SBOM.
    package typealias Library = (name: String, version: String, linkage: String, purl: String)

    #if PREFECT_PUSH_STAMPED
    package static let version = BuildStamp.version
    package static let commit = BuildStamp.commit
    package static let libraries: [Library] = BuildStamp.libraries
    #else
    package static let version = "0.1.0+unknown"
    package static let commit = "unknown"
    /// Unknown without the stamp: `--version --verbose` says the build isn't stamped.
    package static let libraries: [Library] = []
    #endif

    /// `--version`: one line.
    package static var versionLine: String { "prefect-push \(version) (commit \(commit))" }

    /// `--version --verbose`: the version line, then one line per library, `name version (linkage)`.
    package static var verboseText: String {
        guard !libraries.isEmpty else {
            return versionLine + "\nlibraries: unknown (not a stamped release build: `make build` stamps one)\n"
        }
        return ([versionLine] + libraries.map { "\($0.name) \($0.version) (\($0.linkage))" }).joined(separator: "\n")
            + "\n"
    }
}
