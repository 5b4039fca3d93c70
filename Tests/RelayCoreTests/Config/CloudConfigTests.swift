import Testing
@testable import RelayCore

/// Prefect Cloud in the configuration: the workspace root, `PREFECT_API_KEY`, the credential each call carries and
/// the default run link (README "Prefect Cloud").
@Suite struct CloudConfigTests {
    static let account = "0b9c6e4e-1f0a-4c55-9d1e-6a3f2b7c8d90"
    static let workspace = "5d2f7a10-3c4b-4e8f-a1b2-c3d4e5f60718"
    static let root = "https://api.prefect.cloud/api/accounts/\(account)/workspaces/\(workspace)"
    static let key = "pnu_0123456789abcdefghijABCDEFGHIJ0123"

    func config(_ env: [String: String]) throws -> Config { try Config(environment: env) }

    func error(_ env: [String: String]) -> ConfigError? {
        do { _ = try Config(environment: env); return nil } catch { return error }
    }

    @Test func cloudWorkspaceWithAKey() throws {
        let c = try config(["PREFECT_API_URL": Self.root + "/", "PREFECT_API_KEY": " \(Self.key)\n"])
        #expect(c.cloudWorkspace == CloudWorkspace(accountID: Self.account, workspaceID: Self.workspace))
        #expect(c.prefectAPI == HTTPURL(tls: true, host: "api.prefect.cloud", port: 443,
                                        path: "/api/accounts/\(Self.account)/workspaces/\(Self.workspace)"))
        #expect(c.prefectAPIKey?.value == Self.key)
        #expect(c.prefectAuth == nil)
        #expect(c.prefectAuthorization == "Bearer " + Self.key)
        #expect(c.prefectSocketToken == Self.key)
        #expect(c.prefectCredentialName == "PREFECT_API_KEY")
        #expect(c.prefectUI == "https://app.prefect.cloud/account/\(Self.account)/workspace/\(Self.workspace)")
    }

    @Test func runLinkOpensTheRunInTheCloudUI() throws {
        let c = try config(["PREFECT_API_URL": Self.root, "PREFECT_API_KEY": Self.key])
        let run = "95d737c2-8dd4-4a0b-b4d5-e6d147c8ff6e"
        #expect(WaitingProps.runURL(uiRoot: c.prefectUI, runId: run)
                == "https://app.prefect.cloud/account/\(Self.account)/workspace/\(Self.workspace)/runs/flow-run/\(run)")
    }

    @Test func explicitUIURLWins() throws {
        let c = try config(["PREFECT_API_URL": Self.root, "PREFECT_API_KEY": Self.key,
                            "PREFECT_UI_URL": "https://prefect.example.com/ws/"])
        #expect(c.prefectUI == "https://prefect.example.com/ws")
    }

    /// The rule keys on the path, so a proxy or a test stand-in is Cloud too; only `api.…prefect.…` hosts become
    /// `app.…` (Prefect's own rule), any other host is kept.
    @Test func pathShapeIsCloudOnAnyHost() throws {
        let c = try config(["PREFECT_API_URL": "http://127.0.0.1:4300/api/accounts/\(Self.account)/workspaces/\(Self.workspace)",
                            "PREFECT_API_KEY": Self.key])
        #expect(c.cloudWorkspace?.workspaceID == Self.workspace)
        #expect(c.prefectUI == "http://127.0.0.1:4300/account/\(Self.account)/workspace/\(Self.workspace)")
        let staging = try config(["PREFECT_API_URL": "https://api.stg.prefect.dev/api/accounts/\(Self.account)/workspaces/\(Self.workspace)",
                                  "PREFECT_API_KEY": Self.key])
        #expect(staging.prefectUI == "https://app.stg.prefect.dev/account/\(Self.account)/workspace/\(Self.workspace)")
    }

    @Test func idsAreLowercasedForTheLink() throws {
        let c = try config(["PREFECT_API_URL": Self.root.uppercased().replacingHTTPS(), "PREFECT_API_KEY": Self.key])
        #expect(c.cloudWorkspace?.accountID == Self.account)
    }

    @Test func selfHostedIsUnchanged() throws {
        let open = try config(["PREFECT_API_URL": "http://prefect-server:4200/api"])
        #expect(open.cloudWorkspace == nil)
        #expect(open.prefectAuthorization == nil)
        #expect(open.prefectSocketToken == nil)
        #expect(open.prefectUI == "http://prefect-server:4200")
        let basic = try config(["PREFECT_API_URL": "https://prefect.example.com/api", "PREFECT_API_AUTH_STRING": "admin:pass"])
        #expect(basic.prefectAuthorization == "Basic YWRtaW46cGFzcw==")
        #expect(basic.prefectSocketToken == "admin:pass")
        #expect(basic.prefectUI == "https://prefect.example.com")
        #expect(WaitingProps.runURL(uiRoot: basic.prefectUI, runId: "r") == "https://prefect.example.com/runs/flow-run/r")
        // A self-hosted server behind a proxy that wants a bearer token: the key is sent, nothing else changes.
        let proxied = try config(["PREFECT_API_URL": "https://prefect.example.com/api", "PREFECT_API_KEY": Self.key])
        #expect(proxied.cloudWorkspace == nil)
        #expect(proxied.prefectAuthorization == "Bearer " + Self.key)
        #expect(proxied.prefectUI == "https://prefect.example.com")
    }

    @Test func bothCredentialsAreAnErrorNamingBoth() throws {
        for url in [Self.root, "http://127.0.0.1:4200/api"] {
            let e = try #require(error(["PREFECT_API_URL": url, "PREFECT_API_KEY": Self.key,
                                        "PREFECT_API_AUTH_STRING": "admin:pass"]))
            #expect(e.description.contains("PREFECT_API_KEY"))
            #expect(e.description.contains("PREFECT_API_AUTH_STRING"))
            #expect(!e.description.contains(Self.key) && !e.description.contains("admin:pass"))
        }
    }

    @Test func cloudNeedsAKey() throws {
        let missing = try #require(error(["PREFECT_API_URL": Self.root]))
        #expect(missing.variable == "PREFECT_API_KEY")
        let basic = try #require(error(["PREFECT_API_URL": Self.root, "PREFECT_API_AUTH_STRING": "admin:pass"]))
        #expect(basic.variable == "PREFECT_API_AUTH_STRING")
        #expect(basic.description.contains("PREFECT_API_KEY"))
    }

    @Test func malformedCloudRootsSayWhatARootLooksLike() throws {
        let roots = [
            "https://api.prefect.cloud/api",
            "https://api.prefect.cloud/api/accounts/\(Self.account)",
            "https://api.prefect.cloud/api/accounts/\(Self.account)/workspaces/\(Self.workspace)/flows",
            "https://api.prefect.cloud/api/accounts/my-account/workspaces/\(Self.workspace)",
            "https://api.prefect.cloud/api/accounts/\(Self.account)/workspaces/not-a-uuid",
            "https://app.prefect.cloud/account/\(Self.account)/workspace/\(Self.workspace)",
            "http://127.0.0.1:4300/api/accounts/\(Self.account)/workspace/\(Self.workspace)",
        ]
        for root in roots {
            let e = try #require(error(["PREFECT_API_URL": root, "PREFECT_API_KEY": Self.key]), "\(root)")
            #expect(e.variable == "PREFECT_API_URL", "\(root)")
            #expect(e.description.contains("/api/accounts/<account id>/workspaces/<workspace id>"), "\(root)")
        }
    }

    @Test func badKeysAreRefusedWithoutQuotingThem() throws {
        for key in ["pnu_abc def", "pnu_abc\ndef", "pnu_\u{e9}t\u{e9}"] {
            let e = try #require(error(["PREFECT_API_URL": Self.root, "PREFECT_API_KEY": key]))
            #expect(e.variable == "PREFECT_API_KEY")
            #expect(!e.description.contains("pnu_"))
        }
        // Empty is unset.
        #expect(try config(["PREFECT_API_URL": "http://127.0.0.1:4200/api", "PREFECT_API_KEY": "  "]).prefectAPIKey == nil)
    }

    /// The key prints as a placeholder wherever it is interpolated, including a whole `Config`.
    @Test func keyNeverPrints() throws {
        let c = try config(["PREFECT_API_URL": Self.root, "PREFECT_API_KEY": Self.key])
        #expect(!"\(c)".contains(Self.key))
        #expect(!String(reflecting: c).contains(Self.key))
        #expect("\(c.prefectAPIKey!)" == "<PREFECT_API_KEY>")
        #expect(!c.prefectCredentialFix.contains(Self.key))
    }

    @Test func helpListsTheKey() {
        #expect(Settings.all.contains { $0.name == "PREFECT_API_KEY" })
    }
}

private extension String {
    /// After `uppercased()`: the Cloud root again, with only its two ids in upper case.
    func replacingHTTPS() -> String {
        "https://api.prefect.cloud/api/accounts/" + split(separator: "/")[4] + "/workspaces/" + split(separator: "/")[6]
    }
}
