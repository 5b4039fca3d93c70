import Glibc
import Testing
@testable import Relay
@testable import RelayCore
@testable import FakeAPNs

extension SharedPrefect {
    /// `prefect-push check` (the real binary) against a real Prefect server (basic auth `admin:pass`) and two fake APNs
    /// hosts trusted through the test CA. Everything is on 127.0.0.1; the development host is named `localhost` so the
    /// name goes through getaddrinfo.
    @Suite(.serialized) struct CheckIntegrationTests {
        static let probeToken = String(repeating: "0", count: 64)

        struct Outcome {
            var code: Int32?
            var output: String

            /// The report line for `name` (e.g. "prefect api"), without its status.
            func status(of name: String) -> String? {
                for line in output.split(separator: "\n") {
                    for status in ["ok", "warn", "failed", "skipped"] where line.hasPrefix(status + " ") {
                        let rest = line.dropFirst(status.count).drop { $0 == " " }
                        if rest.hasPrefix(name + ":") { return status }
                    }
                }
                return nil
            }

            func line(_ name: String) -> String {
                output.split(separator: "\n").first { $0.drop { $0 != " " }.drop { $0 == " " }.hasPrefix(name + ":") }
                    .map(String.init) ?? ""
            }
        }

        func check(_ environment: [String: String]) throws -> Outcome {
            let directory = TestFiles.temporaryDirectory()
            defer { TestFiles.removeTree(directory) }
            var env = environment
            if env["DB_PATH"] == nil { env["DB_PATH"] = directory + "/relay.db" }
            let process = try ChildProcess(RelayProcess.binary, ["check"], environment: env, logPath: directory + "/check.log")
            let code = process.waitForExit(timeout: 60)
            if code == nil { process.stop(signal: SIGKILL) }
            return Outcome(code: code, output: process.log)
        }

        /// Prefect with `auth`, plus the two fakes and the test key unless `apns` is false.
        func environment(auth: String? = PrefectServer.authString, production: FakeAPNs? = nil, development: FakeAPNs? = nil,
                         key: String = APNsFixtures.keyPath, caFile: String? = APNsFixtures.path("ca.pem")) async throws
            -> [String: String]
        {
            var env = ["PREFECT_API_URL": try await PrefectServer.shared.apiURL()]
            if let auth { env["PREFECT_API_AUTH_STRING"] = auth }
            if let production, let development {
                env["APNS_PRODUCTION_URL"] = "https://127.0.0.1:\(production.port)"
                env["APNS_DEVELOPMENT_URL"] = "https://localhost:\(development.port)"
                env["APNS_KEY_PATH"] = key
                env["APNS_KEY_ID"] = APNsFixtures.keyID
                env["APNS_TEAM_ID"] = APNsFixtures.teamID
                env["APNS_TOPIC"] = "io.example.app"
                if let caFile { env["APNS_CA_FILE"] = caFile }
            }
            return env
        }

        @Test func everythingRightIsAllOK() async throws {
            let production = try FakeAPNs(name: "production")
            let development = try FakeAPNs(name: "development")
            defer { production.stop(); development.stop() }
            // What Apple answers a made-up token once the provider token passed.
            production.script(Self.probeToken, .reject(400, "BadDeviceToken"))
            let result = try check(try await environment(production: production, development: development))
            #expect(result.code == 0, "\(result.output)")
            for name in ["config", "apns key", "database", "prefect api", "prefect events", "apns production",
                         "apns development", "apns production token", "apns development token"] {
                #expect(result.status(of: name) == "ok", "\(name): \(result.output)")
            }
            #expect(result.line("prefect events").contains("auth_success"))
            #expect(result.line("apns development").contains("localhost"))
            // One probe per host, to the made-up token, signed with the configured key.
            for fake in [production, development] {
                let probes = fake.requests
                #expect(probes.count == 1)
                #expect(probes.first?.token == Self.probeToken)
                #expect(probes.first?.headers["apns-topic"] == "io.example.app")
            }
            #expect(!result.output.contains("YWRtaW46cGFzcw"))  // the credential never reaches the output
        }

        @Test func wrongPrefectCredentialFailsBothWays() async throws {
            let result = try check(try await environment(auth: "admin:nope"))
            #expect(result.code == 1, "\(result.output)")
            #expect(result.status(of: "prefect api") == "failed")
            #expect(result.line("prefect api").contains("401"))
            #expect(result.line("prefect api").contains("PREFECT_API_AUTH_STRING"))
            #expect(result.status(of: "prefect events") == "failed")
            #expect(result.line("prefect events").contains("1008"))
            #expect(result.status(of: "apns key") == "skipped")
        }

        @Test func missingPrefectCredentialSaysToSetIt() async throws {
            let result = try check(try await environment(auth: nil))
            #expect(result.code == 1, "\(result.output)")
            #expect(result.line("prefect api").contains("set PREFECT_API_AUTH_STRING"))
            #expect(result.status(of: "prefect open") == nil)  // the server wants a credential: not open
            #expect(result.status(of: "prefect events") == "failed")
        }

        @Test func unreachablePrefectFails() async throws {
            let closed = TestSocket.freePort()
            let result = try check(["PREFECT_API_URL": "http://127.0.0.1:\(closed)/api"])
            #expect(result.code == 1, "\(result.output)")
            #expect(result.status(of: "prefect api") == "failed")
            #expect(result.status(of: "prefect events") == "failed")
            #expect(result.line("prefect api").contains("PREFECT_API_URL"))
        }

        @Test func notAnAPIRootIs404() async throws {
            let api = try await PrefectServer.shared.apiURL()
            let root = String(api.dropLast(4))  // without /api
            let result = try check(["PREFECT_API_URL": root, "PREFECT_API_AUTH_STRING": PrefectServer.authString])
            #expect(result.code == 1, "\(result.output)")
            #expect(result.line("prefect api").contains("ending in /api"), "\(result.output)")
        }

        @Test func keyFromAnotherTeamIsRefusedByAPNs() async throws {
            let production = try FakeAPNs(name: "production")
            let development = try FakeAPNs(name: "development")
            defer { production.stop(); development.stop() }
            // A valid P-256 key, but not the one the (fake) Apple knows for this key id.
            let env = try await environment(production: production, development: development,
                                            key: APNsFixtures.path("other-p256.p8"))
            let result = try check(env)
            #expect(result.code == 1, "\(result.output)")
            #expect(result.status(of: "apns key") == "ok")
            #expect(result.status(of: "apns production") == "ok")
            #expect(result.status(of: "apns production token") == "failed")
            #expect(result.line("apns production token").contains("InvalidProviderToken"))
            #expect(result.line("apns development token").contains("APNS_KEY_ID"))
        }

        @Test func untrustedAPNsCertificateFails() async throws {
            let production = try FakeAPNs(name: "production")
            let development = try FakeAPNs(name: "development")
            defer { production.stop(); development.stop() }
            let result = try check(try await environment(production: production, development: development, caFile: nil))
            #expect(result.code == 1, "\(result.output)")
            #expect(result.status(of: "apns production") == "failed")
            #expect(result.line("apns production").contains("verify"), "\(result.output)")
            #expect(result.line("apns production").contains("APNS_CA_FILE"))
            #expect(result.status(of: "apns production token") == nil)  // no probe without a TLS connection
            #expect(production.requests.isEmpty)
        }

        @Test func configurationErrorsExit2() async throws {
            let missing = try check([:])
            #expect(missing.code == 2)
            #expect(missing.output.contains("PREFECT_API_URL"))

            var env = try await environment()
            env["APNS_KEY_PATH"] = APNsFixtures.path("rsa.p8")
            env["APNS_KEY_ID"] = APNsFixtures.keyID
            env["APNS_TEAM_ID"] = APNsFixtures.teamID
            let badKey = try check(env)
            #expect(badKey.code == 2, "\(badKey.output)")
            #expect(badKey.status(of: "apns key") == "failed")
            #expect(badKey.line("apns key").contains("P-256"))
            // The other checks still ran.
            #expect(badKey.status(of: "prefect api") == "ok")
        }

        @Test func helpListsCheck() throws {
            let directory = TestFiles.temporaryDirectory()
            defer { TestFiles.removeTree(directory) }
            let process = try ChildProcess(RelayProcess.binary, ["--help"], environment: [:], logPath: directory + "/help.log")
            #expect(process.waitForExit(timeout: 10) == 0)
            #expect(process.log.contains("check "))
        }
    }
}
