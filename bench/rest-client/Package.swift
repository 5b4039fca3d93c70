// swift-tools-version:6.0
import PackageDescription

// The REST client comparison (docs/rest-client.md): the relay's HTTPPool and a libcurl-multi prototype, driven by
// one benchmark executable. The relay's own modules are compiled from the repository's sources through the
// symbolic links in Sources/ (nothing is copied); the benchmark reaches HTTPPool with `@testable import`, so build
// with `-Xswiftc -enable-testing`:
//
//   swift build -c release -Xswiftc -enable-testing --product rest-client-bench
let package = Package(
    name: "rest-client-bench",
    products: [.executable(name: "rest-client-bench", targets: ["rest-client-bench"])],
    targets: [
        .systemLibrary(name: "CWebSockets", pkgConfig: "libwebsockets"),
        .systemLibrary(name: "CNGHTTP2", pkgConfig: "libnghttp2"),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl"),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3"),
        .systemLibrary(name: "CCmark", pkgConfig: "libcmark"),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .target(name: "CShims", dependencies: ["CWebSockets", "CSQLite", "CNGHTTP2", "COpenSSL"],
                cSettings: [.define("_GNU_SOURCE")]),
        .target(name: "RelayCore", swiftSettings: [.swiftLanguageMode(.v6)], linkerSettings: [.linkedLibrary("m")]),
        .target(name: "Relay",
                dependencies: ["RelayCore", "CShims", "CWebSockets", "CNGHTTP2", "COpenSSL", "CSQLite", "CCmark"],
                swiftSettings: [.swiftLanguageMode(.v6)]),
        // The prototype: a C engine on curl_multi, and its Swift face (Sources/rest-client-bench/CurlClient.swift).
        .target(name: "CurlPool", dependencies: ["CCurl"]),
        .executableTarget(name: "rest-client-bench", dependencies: ["Relay", "RelayCore", "CurlPool"],
                          swiftSettings: [.swiftLanguageMode(.v6)]),
    ]
)
