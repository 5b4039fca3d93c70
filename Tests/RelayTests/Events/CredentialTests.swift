import Testing
@testable import Relay
@testable import RelayCore

/// Which credential each Prefect call carries, and which socket endings count as a refused credential.
@Suite struct CredentialTests {
    static let root = "https://api.prefect.cloud/api/accounts/0b9c6e4e-1f0a-4c55-9d1e-6a3f2b7c8d90/workspaces/"
        + "5d2f7a10-3c4b-4e8f-a1b2-c3d4e5f60718"

    @Test func restCarriesBearerForAKeyAndBasicForAnAuthString() throws {
        let cloud = try Config(environment: ["PREFECT_API_URL": Self.root, "PREFECT_API_KEY": "pnu_abc"])
        #expect(PrefectClient(config: cloud, http: try HTTPPool()).ownAuthorization == "Bearer pnu_abc")
        let basic = try Config(environment: ["PREFECT_API_URL": "http://127.0.0.1:4200/api",
                                             "PREFECT_API_AUTH_STRING": "admin:pass"])
        #expect(PrefectClient(config: basic, http: try HTTPPool()).ownAuthorization == "Basic YWRtaW46cGFzcw==")
        let open = try Config(environment: ["PREFECT_API_URL": "http://127.0.0.1:4200/api"])
        #expect(PrefectClient(config: open, http: try HTTPPool()).ownAuthorization == nil)
    }

    @Test func refusedCredentialEndings() {
        #expect(SocketEnd.ofConnectError("HS: ws upgrade unauthorized") == .credentialRefused)
        #expect(SocketEnd.ofConnectError("403 Forbidden") == .upgradeForbidden)
        #expect(SocketEnd.ofConnectError("HS: got bad HTTP response HTTP/1.1 403 Forbidden") == .upgradeForbidden)
        #expect(SocketEnd.credentialRefused.isRefusal && SocketEnd.upgradeForbidden.isRefusal)
        #expect(!SocketEnd.lost.isRefusal && !SocketEnd.timedOut.isRefusal)
        // A port or an address with 403 in it is no refusal (a relay behind a proxy on port 40351 took every
        // failed connect for a refused credential and backed off to the maximum).
        for reason in ["closed", "HS: ws upgrade response not 101", "connect failed",
                       "proxy http://127.0.0.1:40351 refused CONNECT to prefect.test:4200 (proxy not h1)",
                       "timeout: the WebSocket upgrade to 10.4.0.3:8403 did not finish within 10 s"] {
            #expect(SocketEnd.ofConnectError(reason) == .lost, "\(reason)")
        }
    }
}
