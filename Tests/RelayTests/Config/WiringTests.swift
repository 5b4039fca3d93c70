import Foundation
import Testing
@testable import Relay
@testable import RelayCore

/// `Wiring` is the one place the relay and `check` make their clients from a `Config`: what each client gets from
/// the configuration, and that neither `RelayMain` nor `CheckCommand` makes one of its own.
@Suite struct WiringTests {
    func config(_ extra: [String: String]) throws -> Config {
        try Config(environment: ["PREFECT_API_URL": "http://prefect:4200/api"].merging(extra) { $1 })
    }

    /// Client TLS follows the Prefect URL's scheme (the setting check's events loop once lacked), with Prefect's CA
    /// file and the proxy `ProxyRule` picks for that URL.
    @Test func eventsLoopFollowsThePrefectURL() throws {
        let plain = Wiring.eventsLoopSettings(try config([:]))
        #expect(!plain.clientTLS && plain.clientCAFile == nil && plain.clientProxy == nil)
        #expect(plain.port == -1 && plain.threadName == "pp-events")
        let secure = Wiring.eventsLoopSettings(try config([
            "PREFECT_API_URL": "https://prefect.example/api", "PREFECT_CA_FILE": "/etc/prefect-ca.pem",
            "HTTPS_PROXY": "http://proxy:3128",
        ]))
        #expect(secure.clientTLS && secure.clientCAFile == "/etc/prefect-ca.pem")
        #expect(secure.clientProxy == ProxyEndpoint(host: "proxy", port: 3128))
        let bypassed = Wiring.eventsLoopSettings(try config([
            "PREFECT_API_URL": "https://prefect.example/api", "https_proxy": "http://proxy:3128", "no_proxy": "example",
        ]))
        #expect(bypassed.clientTLS && bypassed.clientProxy == nil)
    }

    @Test func restPoolsCarryTheCAFileAndTheProxyRule() throws {
        let config = try config(["PREFECT_CA_FILE": "/etc/prefect-ca.pem", "HTTP_PROXY": "http://proxy:3128"])
        let pauses = Wiring.prefectPoolOptions(config)
        #expect(pauses.caFile == "/etc/prefect-ca.pem" && pauses.proxy == config.proxy && !config.proxy.isEmpty)
        #expect(pauses.threadName == "pp-rest")
        let checks = Wiring.credentialPoolOptions(config)
        #expect(checks.caFile == "/etc/prefect-ca.pem" && checks.proxy == config.proxy)
        #expect(checks.maxConnectionsPerHost == Authorizer.maxConcurrentChecks && checks.extraConnectionsPerHost == 0)
        #expect(checks.threadName == "pp-auth")
    }

    /// A second copy of the wiring in either command is how they drifted: both must make their Prefect pool, events
    /// loop, APNs TLS and APNs client through `Wiring`, and neither may make one directly.
    @Test func relayAndCheckMakeTheirClientsOnlyThroughWiring() throws {
        let sources = TestFiles.packageRoot + "/Sources/Relay/"
        let relay = try String(contentsOfFile: sources + "RelayMain.swift", encoding: .utf8)
        let check = try String(contentsOfFile: sources + "Commands/CheckCommand.swift", encoding: .utf8)
        for (name, text) in [("RelayMain", relay), ("Check", check)] {
            // Plain Bools, so a failure names the call rather than printing the whole file.
            for direct in ["HTTPPool(", "HTTPPool.Options(", "TLSContext(", "APNsClient.make(", "APNsClient(",
                           "clientCAFile:", "clientProxy:"] {
                let makesItsOwn = text.contains(direct)
                #expect(!makesItsOwn, "\(name) makes its own \(direct)…; make it in Wiring")
            }
            for shared in ["Wiring.prefectPool(", "Wiring.eventsLoop(", "Wiring.apnsClient("] {
                let usesWiring = text.contains(shared)
                #expect(usesWiring, "\(name) doesn't use \(shared)…")
            }
        }
        let checkUsesTheAPNsTLS = check.contains("Wiring.apnsTLS(")
        #expect(checkUsesTheAPNsTLS)
    }
}
