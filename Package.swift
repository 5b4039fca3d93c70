// swift-tools-version:6.0
import PackageDescription

// C libraries come from Debian's -dev packages; each gets a system-library target with a modulemap.
// RelayCore is the pure core (no C imports) so it tests without sockets; Relay holds the C edges and main.
let package = Package(
    name: "prefect-push",
    products: [
        .executable(name: "prefect-push", targets: ["Relay"]),
    ],
    targets: [
        .systemLibrary(name: "CWebSockets", pkgConfig: "libwebsockets", providers: [.apt(["libwebsockets-dev"])]),
        .systemLibrary(name: "CNGHTTP2", pkgConfig: "libnghttp2", providers: [.apt(["libnghttp2-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CJansson", pkgConfig: "jansson", providers: [.apt(["libjansson-dev"])]),
        .systemLibrary(name: "CCmark", pkgConfig: "libcmark", providers: [.apt(["libcmark-dev"])]),
        .target(
            name: "CShims",
            dependencies: ["CWebSockets", "CSQLite", "CNGHTTP2", "COpenSSL"],
            cSettings: [.define("_GNU_SOURCE")]
        ),
        .target(name: "RelayCore", swiftSettings: [.swiftLanguageMode(.v6)], linkerSettings: [.linkedLibrary("m")]),
        .executableTarget(
            name: "Relay",
            dependencies: ["RelayCore", "CShims", "CWebSockets", "CNGHTTP2", "COpenSSL", "CSQLite", "CJansson", "CCmark"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .testTarget(
            name: "RelayTests",
            dependencies: ["Relay", "RelayCore", "CShims", "CNGHTTP2", "COpenSSL", "CSQLite", "CJansson"],
            resources: [.copy("Fixtures")],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)
