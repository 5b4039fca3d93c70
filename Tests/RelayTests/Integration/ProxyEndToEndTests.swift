import Glibc
import Testing
@testable import FakeAPNs
@testable import Relay
@testable import RelayCore

/// `tools/connect_proxy.py`: a CONNECT-only proxy that knows Prefect as `prefect.proxy.test:<port>` and each fake APNs
/// host as `apns.proxy.test:<port>`, names that resolve nowhere, and connects them to 127.0.0.1. A relay pointed at
/// those names has no route but the proxy: going direct fails to resolve, and TLS to the fake APNs verifies only for
/// `apns.proxy.test` (`Fixtures/apns/proxied-server.pem`), so a passing test also shows SNI and verification used the
/// APNs name, not the proxy's. (Debian's tinyproxy can't map names, so it could not make the proxy the only route on
/// one host.) One per test; killed with it.
final class ConnectProxy: @unchecked Sendable {
    let process: ChildProcess
    let directory = TestFiles.temporaryDirectory()
    let port: Int

    init(targets: [String: Int], auth: String? = nil) throws {
        let portFile = directory + "/port"
        var arguments = [TestFiles.packageRoot + "/tools/connect_proxy.py", "--port-file", portFile]
        for (name, port) in targets.sorted(by: { $0.key < $1.key }) { arguments += ["--map", "\(name)=127.0.0.1:\(port)"] }
        if let auth { arguments += ["--auth", auth] }
        process = try ChildProcess(PrefectServer.python, arguments, environment: RelayMain.environment(),
                                   logPath: directory + "/proxy.log")
        var text = ""
        let started = process
        try waitUntil("the proxy listens", timeout: 20) {
            if started.waitForExit(timeout: 0) != nil { throw TestFailure("the proxy exited: \(started.log)") }
            text = (try? TestFiles.read(portFile)) ?? ""
            return Int(text) != nil
        }
        port = Int(text)!
    }

    /// The proxy's log: one `CONNECT <target> <status>` line per request.
    var log: String { process.log }

    func url(credentials: String? = nil) -> String { "http://" + (credentials.map { $0 + "@" } ?? "") + "127.0.0.1:\(port)" }

    deinit { process.stop(signal: SIGKILL, timeout: 5) }
}

extension SharedPrefect {
    @Suite(.serialized) struct ProxyEndToEndTests {
        static func prefectPort(_ api: String) throws -> Int {
            // http://127.0.0.1:PORT/api
            guard let port = Int(api.dropFirst("http://127.0.0.1:".count).prefix { $0 != "/" }) else {
                throw TestFailure("unexpected Prefect URL \(api)")
            }
            return port
        }

        /// A relay that reaches Prefect (REST and events) and APNs only by names the proxy alone resolves.
        static func proxiedSetup(auth: String? = nil) async throws -> (EndToEnd, ConnectProxy, Int) {
            let e2e = try await EndToEnd(apnsIdentity: .proxied)
            let prefectPort = try prefectPort(e2e.api)
            let proxy = try ConnectProxy(targets: ["prefect.proxy.test:\(prefectPort)": prefectPort,
                                                   "apns.proxy.test:\(e2e.production.port)": e2e.production.port,
                                                   "apns.proxy.test:\(e2e.development.port)": e2e.development.port],
                                         auth: auth)
            e2e.extraEnvironment = [
                "PREFECT_API_URL": "http://prefect.proxy.test:\(prefectPort)/api",
                "APNS_PRODUCTION_URL": "https://apns.proxy.test:\(e2e.production.port)",
                "APNS_DEVELOPMENT_URL": "https://apns.proxy.test:\(e2e.development.port)",
            ]
            return (e2e, proxy, prefectPort)
        }

        /// Pause → alert and Live Activity start; resume → the activity ends. Everything over `e2e`'s relay.
        static func pauseAndResume(_ e2e: EndToEnd) throws {
            try e2e.registerDevice()
            let run = try e2e.runFlow("input")
            try waitUntil("the alert and the start", timeout: 60) {
                !e2e.pushes(to: EndToEnd.deviceToken, run: run).isEmpty && !e2e.pushes(to: EndToEnd.startToken, run: run).isEmpty
            }
            #expect(e2e.pushes(to: EndToEnd.deviceToken, run: run).first?.payload["aps"]?["alert"]?["title"]
                    == "Approve the nightly deploy?")  // the REST reads went through too: the title is the run input's
            #expect(e2e.pushes(to: EndToEnd.startToken, run: run).first?.payload["aps"]?["event"] == "start")
            try e2e.registerActivity(runID: run)
            try e2e.resume(run, input: ["comment": "ship it"])
            try waitUntil("the end push", timeout: 30) { !e2e.pushes(to: EndToEnd.activityToken, run: run).isEmpty }
            #expect(e2e.pushes(to: EndToEnd.activityToken, run: run).first?.payload["aps"]?["event"] == "end")
        }

        @Test func everythingThroughTheProxy() async throws {
            let (e2e, proxy, prefectPort) = try await Self.proxiedSetup()
            // Lower-case http_proxy is also what lws would read by itself; the relay's rule uses it for Prefect.
            e2e.extraEnvironment["http_proxy"] = proxy.url()
            e2e.extraEnvironment["HTTPS_PROXY"] = proxy.url()
            try e2e.startRelay()
            try Self.pauseAndResume(e2e)
            #expect(proxy.log.contains("CONNECT prefect.proxy.test:\(prefectPort) 200"))
            #expect(proxy.log.contains("CONNECT apns.proxy.test:\(e2e.development.port) 200"))
            #expect(e2e.relay?.process.log.contains("apns.connected host=apns.proxy.test:\(e2e.development.port)") == true)
            #expect(e2e.relay?.process.log.contains("via=http://127.0.0.1:\(proxy.port)") == true)
        }

        @Test func proxyCredentials() async throws {
            let password = "s3cret-Pr0xy-pw"
            let (e2e, proxy, prefectPort) = try await Self.proxiedSetup(auth: "relay:\(password)")
            e2e.extraEnvironment["HTTP_PROXY"] = proxy.url(credentials: "relay:wrong-pw")
            e2e.extraEnvironment["HTTPS_PROXY"] = proxy.url(credentials: "relay:wrong-pw")
            var env = e2e.environment
            env["DB_PATH"] = e2e.directory + "/refused.db"
            let refused = try RelayProcess(environment: env, directory: TestFiles.temporaryDirectory())
            try waitUntil("the relay reports the proxy's 407", timeout: 30) {
                refused.process.log.contains("proxy http://127.0.0.1:\(proxy.port) refused CONNECT to "
                                             + "prefect.proxy.test:\(prefectPort): HTTP/1.1 407")
            }
            // Each refusal is retried (with backoff), and none of them shows the password.
            try waitUntil("a second attempt", timeout: 30) {
                proxy.log.split(separator: "\n").filter { $0.hasSuffix(" 407") }.count >= 2
            }
            try waitUntil("the events socket reports it too", timeout: 30) {
                refused.process.log.contains("event=events.connect_failed") || refused.process.log.contains(" events.connect_failed ")
            }
            refused.stop()
            let refusedLog = refused.process.log
            #expect(refusedLog.contains("refused CONNECT to prefect.proxy.test:\(prefectPort) (proxy not h1)"))
            #expect(!refusedLog.contains("events.auth_rejected"))  // the proxy refused, not Prefect
            #expect(!refusedLog.contains("Proxy-Authenticate"))  // one line: the status line only
            #expect(!refusedLog.contains("wrong-pw"))

            e2e.extraEnvironment["HTTP_PROXY"] = proxy.url(credentials: "relay:\(password)")
            e2e.extraEnvironment["HTTPS_PROXY"] = proxy.url(credentials: "relay:\(password)")
            try e2e.startRelay()
            try Self.pauseAndResume(e2e)
            #expect(proxy.log.contains("CONNECT prefect.proxy.test:\(prefectPort) 200"))
            #expect(proxy.log.contains("CONNECT apns.proxy.test:\(e2e.development.port) 200"))
            #expect(e2e.relay?.process.log.contains(password) == false)
            #expect(!proxy.log.contains(password))
        }

        @Test func noProxySendsPrefectDirect() async throws {
            let (e2e, proxy, prefectPort) = try await Self.proxiedSetup()
            // Prefect by its address, named in NO_PROXY; http_proxy set too, as lws alone would have obeyed it.
            e2e.extraEnvironment["PREFECT_API_URL"] = e2e.api
            e2e.extraEnvironment["http_proxy"] = proxy.url()
            e2e.extraEnvironment["HTTPS_PROXY"] = proxy.url()
            e2e.extraEnvironment["NO_PROXY"] = "localhost,127.0.0.1"
            try e2e.startRelay()
            try Self.pauseAndResume(e2e)
            #expect(proxy.log.contains("CONNECT apns.proxy.test:\(e2e.development.port) 200"))
            #expect(!proxy.log.contains(":\(prefectPort) "), "Prefect went through the proxy: \(proxy.log)")

            // `check` names each target's route.
            let check = try ChildProcess(RelayProcess.binary, ["check"], environment: e2e.environment,
                                         logPath: e2e.directory + "/check.log")
            #expect(check.waitForExit(timeout: 60) == 0, "\(check.log)")
            #expect(check.log.contains("/flows/count (direct)"), "\(check.log)")
            #expect(check.log.contains("/events/out (direct)"), "\(check.log)")
            #expect(check.log.contains("TLS to apns.proxy.test:\(e2e.development.port) (via http://127.0.0.1:\(proxy.port): "
                                       + "CONNECT answered 2xx)"), "\(check.log)")
        }
    }
}
