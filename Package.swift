// swift-tools-version:6.0
import PackageDescription

// C libraries come from Debian's -dev packages; each gets a system-library target with a modulemap.
// RelayCore is the pure core (no C imports) so it tests without sockets; Relay holds the C edges and the wiring;
// the prefect-push executable is one call into Relay.
let package = Package(
    name: "prefect-push",
    products: [
        .executable(name: "prefect-push", targets: ["prefect-push"]),
        .executable(name: "fake-apns", targets: ["fake-apns"]),
        .executable(name: "prefect-push-bench", targets: ["prefect-push-bench"]),
    ],
    targets: [
        .systemLibrary(name: "CWebSockets", pkgConfig: "libwebsockets", providers: [.apt(["libwebsockets-dev"])]),
        .systemLibrary(name: "CNGHTTP2", pkgConfig: "libnghttp2", providers: [.apt(["libnghttp2-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        // jansson: only the tests' reference for JSONParser (Tests/RelayTests/Support/Jansson.swift), never shipped.
        .systemLibrary(name: "CJansson", pkgConfig: "jansson", providers: [.apt(["libjansson-dev"])]),
        .systemLibrary(name: "CCmark", pkgConfig: "libcmark", providers: [.apt(["libcmark-dev"])]),
        .target(
            name: "CShims",
            dependencies: ["CWebSockets", "CSQLite", "CNGHTTP2", "COpenSSL"],
            cSettings: [.define("_GNU_SOURCE")]
        ),
        .target(name: "RelayCore", swiftSettings: [.swiftLanguageMode(.v6)], linkerSettings: [.linkedLibrary("m")]),
        .target(
            name: "Relay",
            dependencies: ["RelayCore", "CShims", "CWebSockets", "CNGHTTP2", "COpenSSL", "CSQLite", "CCmark"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(name: "prefect-push", dependencies: ["Relay"], swiftSettings: [.swiftLanguageMode(.v6)]),
        // A stand-in for APNs (HTTP/2 over TLS on 127.0.0.1) for the tests, the demo and the benchmark; never shipped.
        .target(
            name: "FakeAPNs",
            dependencies: ["Relay", "RelayCore", "CShims", "CNGHTTP2", "COpenSSL"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(name: "fake-apns", dependencies: ["FakeAPNs", "RelayCore", "CShims"], swiftSettings: [.swiftLanguageMode(.v6)]),
        // `make bench`: the relay's APNs client under load (throughput on one connection); never shipped.
        .executableTarget(name: "prefect-push-bench", dependencies: ["Relay"], swiftSettings: [.swiftLanguageMode(.v6)]),
        .testTarget(
            name: "RelayTests",
            dependencies: ["Relay", "RelayCore", "FakeAPNs", "CShims", "CNGHTTP2", "COpenSSL", "CSQLite", "CJansson"],
            resources: [.copy("Fixtures")],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // The pure core's suites: they depend on RelayCore alone, so no C library, socket or sleep can reach them.
        .testTarget(name: "RelayCoreTests", dependencies: ["RelayCore"], swiftSettings: [.swiftLanguageMode(.v6)]),
    ]
)
