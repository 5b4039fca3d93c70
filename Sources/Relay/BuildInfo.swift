/// The version and commit this binary was built from (`--version`, `relay.started`, `prefect_push_build_info`, the
/// image's labels and the User-Agent).
///
/// `make build` writes `BuildStamp` into a git-ignored file from the checkout (`git describe --tags --always
/// --dirty` and `git rev-parse HEAD`, by `deploy/build-stamp.sh`) and compiles it in with `-DPREFECT_PUSH_STAMPED`.
/// A build without the flag (a plain `swift build`, the tests) reports the defaults below, so it never needs git.
package enum BuildInfo {
    #if PREFECT_PUSH_STAMPED
    package static let version = BuildStamp.version
    package static let commit = BuildStamp.commit
    #else
    package static let version = "0.1.0+unknown"
    package static let commit = "unknown"
    #endif
}
