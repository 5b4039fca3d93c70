import Glibc
import RelayCore

/// `prefect-push check`: tries the configuration the way the relay would use it and prints one line per check,
/// `ok` or `failed` with what to fix, then exits 0 (all ok), 1 (a check failed) or 2 (the configuration itself is
/// invalid, including an unreadable APNs key). Meant for a deploy step or a first run on a new node.
///
/// It reuses the relay's own clients, made by `Wiring` exactly as the relay makes them: `HTTPPool` (`POST
/// /flows/count` with the relay's credential), the libwebsockets loop with `EventsSocket` (subprotocol `prefect`, the
/// auth message, `auth_success`), and for APNs `TLSContext` + `TLSSocket.connect` (TLS with ALPN h2 against the
/// system roots and `APNS_CA_FILE`) and, with a key, one `APNsClient` probe per host. The probe goes to a made-up
/// device token: Apple judges the provider token before the device token, so `BadDeviceToken` means the key, key id,
/// team id and topic were all accepted, and nothing reaches any phone.
enum CheckCommand {
    static let usage = "check        try PREFECT_API_URL and its credential, the APNs key and both APNs hosts, check "
        + "the store's integrity, then exit"

    struct Line {
        /// `warn`: works, but something should change (an open Prefect server); it doesn't change the exit code.
        enum Status: String { case ok, warn, failed, skipped }
        var status: Status
        var name: String
        var detail: String
        var fix: String?

        init(_ status: Status, _ name: String, _ detail: String, fix: String? = nil) {
            self.status = status
            self.name = name
            self.detail = detail
            self.fix = fix
        }

        var text: String {
            let label = status.rawValue + String(repeating: " ", count: 8 - status.rawValue.count)
            return label + name + ": " + detail + (fix.map { "; fix: " + $0 } ?? "")
        }
    }

    /// Runs every check and returns the exit code. Output goes to stdout, one line per check.
    static func run(environment: [String: String]) async -> Int32 {
        signal(SIGPIPE, SIG_IGN)
        let config: Config
        do {
            config = try Config(environment: environment)
        } catch {
            print(Line(.failed, "config", error.description).text)
            return 2
        }
        // The lines below say what matters; library warnings would only repeat them.
        Log.setLevel(config.logLevel == .debug ? .debug : .error)
        Log.setFormat(config.logFormat)
        let report = Report()
        report.add(Line(.ok, "config", "PREFECT_API_URL \(config.prefectAPI.string), DB_PATH \(config.dbPath)"))
        for miss in NearMissVariables.find(in: environment.keys) {
            report.add(Line(.warn, "config", "\(miss.given) is not a setting the relay reads",
                            fix: "did you mean \(miss.known)? rename it, or remove it"))
        }
        if let cloud = cloudLine(config) { report.add(cloud) }
        if let proxy = proxyLine(config.proxy) { report.add(proxy) }
        let key = apnsKey(config)
        report.add(key)
        report.add(database(config.dbPath))
        report.add(integrity(config.dbPath))
        await prefect(config, report)
        await apns(config, keyUsable: key.status == .ok, report)
        if key.status == .failed { return 2 }
        return report.failed ? 1 : 0
    }

    /// Prints each line as its check finishes and remembers whether any failed.
    final class Report {
        private(set) var failed = false

        func add(_ line: Line) {
            print(line.text)
            fflush(nil)
            if line.status == .failed { failed = true }
        }
    }

    // MARK: - Local

    private static func apnsKey(_ config: Config) -> Line {
        guard let credentials = config.apns else {
            return Line(.skipped, "apns key", "not set: the relay runs but sends nothing",
                        fix: "set APNS_KEY_PATH (or APNS_KEY), APNS_KEY_ID and APNS_TEAM_ID to send pushes")
        }
        do {
            let key = try ProviderKey(source: credentials.key)
            _ = try key.sign(Array("prefect-push check".utf8))
            return Line(.ok, "apns key", "EC P-256 key loaded and signs (key id \(credentials.keyID), team \(credentials.teamID))")
        } catch {
            return Line(.failed, "apns key", "\(error)")
        }
    }

    private static func database(_ path: String) -> Line {
        let directory = path.contains("/") ? String(path[..<path.lastIndex(of: "/")!]) : "."
        let target = access(path, F_OK) == 0 ? path : (directory.isEmpty ? "/" : directory)
        guard access(target, R_OK | W_OK) == 0 else {
            return Line(.failed, "database", "\(target) is not writable (\(String(cString: strerror(errno))))",
                        fix: "point DB_PATH at a writable file on a persistent volume")
        }
        return Line(.ok, "database", access(path, F_OK) == 0 ? "\(path) exists and is writable" : "\(target) is writable")
    }

    /// A read-only `quick_check` of the store (bounded: 5 problems, 10 s), and whether this version can read it.
    static func integrity(_ path: String) -> Line {
        let name = "database integrity"
        guard access(path, F_OK) == 0 else {
            return Line(.skipped, name, "\(path) does not exist yet; the relay creates it at its first start")
        }
        let inspection: StoreCopy.Inspection
        do {
            inspection = try StoreCopy.inspect(path: path)
        } catch {
            return Line(.failed, name, "\(error)")
        }
        let latest = Store.migrations.count
        guard inspection.problems.isEmpty else {
            return Line(.failed, name, "quick_check found damage: \(inspection.problems.joined(separator: "; "))",
                        fix: "stop the relay and restore the last backup (copy it over DB_PATH, remove DB_PATH-wal and "
                            + "DB_PATH-shm, start); without one, move the file aside and phones register again")
        }
        if inspection.schemaVersion > latest {
            let refusal = StoreError.newerSchema(path: path, version: inspection.schemaVersion, latest: latest)
            return Line(.failed, name, refusal.problem, fix: refusal.fix)
        }
        var detail = "quick_check ok, schema \(inspection.schemaVersion)"
        if let devices = inspection.devices, let pending = inspection.pending {
            detail += ", \(devices) devices, \(pending) pushes pending"
        } else {
            detail += " (migrated to \(latest) when the relay starts)"
        }
        return Line(.ok, name, detail)
    }

    // MARK: - Prefect

    private static func prefect(_ config: Config, _ report: Report) async {
        let http: HTTPPool
        do {
            http = try Wiring.prefectPool(config)
        } catch {
            return report.add(Line(.failed, "prefect", "\(error)"))
        }
        defer { http.close() }
        let client = PrefectClient(config: config, http: http)
        let (messages, sink) = AsyncStream.makeStream(of: SocketMessage.self)
        let events = EventsSocket(config: config) { sink.yield($0) }
        let loop: WebSocketsLoop
        do {
            loop = try Wiring.eventsLoop(config, events: events)
        } catch {
            return report.add(Line(.failed, "prefect", "\(error)", fix: "check PREFECT_CA_FILE is a readable PEM file"))
        }
        do {
            try loop.start()
        } catch {
            return report.add(Line(.failed, "prefect", "\(error)", fix: "raise the thread or process limit"))
        }
        defer { loop.stop() }

        let rest = await rest(config, client)
        report.add(rest)
        // An answer without a credential, when none is configured: the server, and so the relay's API, is open.
        if rest.status == .ok && config.prefectAuthorization == nil {
            report.add(Line(.warn, "prefect open", Config.openServerWarning, fix: Config.openServerFix))
        }
        loop.startEvents()
        let timeout = Task {
            try? await Task.sleep(for: .seconds(15))
            sink.yield(.disconnected(.lost, reason: "no answer within 15 s", retryIn: 0))
        }
        var first: SocketMessage?
        for await message in messages {
            if case .event = message { continue }
            first = message
            break
        }
        timeout.cancel()
        loop.stopEvents()
        report.add(socket(config, first))
    }

    private static func rest(_ config: Config, _ client: PrefectClient) async -> Line {
        let name = "prefect api"
        let where_ = "POST \(config.prefectAPI.string)/flows/count (\(config.proxy.route(for: config.prefectAPI).description))"
        switch await client.checkCredential(client.ownAuthorization) {
        case .failure(let failure):
            return Line(.failed, name, "\(where_): \(failure.reason)", fix: reachFix(config))
        case .success(let status) where (200..<300).contains(status):
            let auth = config.prefectAPIKey != nil ? "the PREFECT_API_KEY (Bearer)"
                : config.prefectAuth == nil ? "no credential (open server)" : "the PREFECT_API_AUTH_STRING credential"
            return Line(.ok, name, "\(where_) answered \(status) with \(auth)")
        case .success(let status) where status == 401 || status == 403:
            return Line(.failed, name, "\(where_) answered \(status): the server refused the credential",
                        fix: credentialFix(config))
        case .success(let status) where status == 404 && config.cloudWorkspace != nil:
            return Line(.failed, name, "\(where_) answered 404: no such workspace",
                        fix: "PREFECT_API_URL must be an existing workspace's API root, \(CloudWorkspace.shape)")
        case .success(let status) where status == 404:
            return Line(.failed, name, "\(where_) answered 404: this is not a Prefect API root",
                        fix: "PREFECT_API_URL must be the API root, ending in /api (e.g. http://prefect-server:4200/api)")
        case .success(let status) where status == 429:
            return Line(.failed, name, "\(where_) answered 429: rate-limited",
                        fix: "try again in a minute; if it persists, something else is using this key's rate limit")
        case .success(let status):
            return Line(.failed, name, "\(where_) answered \(status)", fix: "check the Prefect server's health and logs")
        }
    }

    private static func socket(_ config: Config, _ message: SocketMessage?) -> Line {
        let name = "prefect events"
        var url = config.prefectAPI
        url.path += "/events/out"
        let where_ = (url.tls ? "wss://" : "ws://") + url.authority + url.path
            + " (\(config.proxy.route(for: config.prefectAPI).description))"
        switch message {
        case .subscribed?:
            return Line(.ok, name, "\(where_) accepted the auth message (auth_success)")
        case .disconnected(.credentialRefused, let reason, _)?:
            return Line(.failed, name, "\(where_) refused the auth message (close \(reason))", fix: credentialFix(config))
        case .disconnected(.upgradeForbidden, let reason, _)?:
            return Line(.failed, name, "\(where_) refused the upgrade (\(reason))",
                        fix: "a proxy in front of Prefect must pass WebSocket upgrades and the Sec-WebSocket-Protocol header")
        case .disconnected(.timedOut, let reason, _)?:
            return Line(.failed, name, "\(where_): \(reason)",
                        fix: "the server took the connection but never answered: check that PREFECT_API_URL reaches "
                            + "Prefect itself (not a proxy or load balancer that holds connections) and that the "
                            + "server is healthy")
        case .disconnected(.lost, let reason, _)?:
            return Line(.failed, name, "\(where_): \(reason)", fix: reachFix(config))
        case .event?, nil:
            return Line(.failed, name, "\(where_): the socket ended without an answer", fix: reachFix(config))
        }
    }

    private static func credentialFix(_ config: Config) -> String { config.prefectCredentialFix }

    /// For a Prefect Cloud workspace root: the ids it names and where run links will point. (A malformed Cloud root
    /// never gets here: it is a configuration error, printed with its fix.)
    private static func cloudLine(_ config: Config) -> Line? {
        guard let cloud = config.cloudWorkspace else {
            guard config.prefectAPIKey != nil else { return nil }
            return Line(.skipped, "prefect cloud", "PREFECT_API_URL is not a Cloud workspace root; PREFECT_API_KEY is "
                        + "sent as a Bearer token to this server", fix: "for Prefect Cloud use \(CloudWorkspace.shape)")
        }
        return Line(.ok, "prefect cloud", "workspace root well-formed (account \(cloud.accountID), workspace "
                    + "\(cloud.workspaceID)); run links open \(config.prefectUI)/runs/flow-run/<run id>")
    }

    /// The proxy settings as read (never the credentials), when any proxy is set.
    private static func proxyLine(_ rule: ProxyRule) -> Line? {
        guard !rule.isEmpty else { return nil }
        var parts: [String] = []
        if let https = rule.https { parts.append("https via \(https)" + (https.username == nil ? "" : " (with credentials)")) }
        if let http = rule.http { parts.append("http via \(http)" + (http.username == nil ? "" : " (with credentials)")) }
        parts.append(rule.noProxy.isEmpty ? "no NO_PROXY" : "NO_PROXY has \(rule.noProxy.count) entries")
        return Line(.ok, "proxy", parts.joined(separator: ", "))
    }

    private static func reachFix(_ config: Config) -> String {
        if let proxy = config.proxy.route(for: config.prefectAPI).endpoint {
            return "Prefect goes through the proxy \(proxy): check HTTPS_PROXY/HTTP_PROXY (host, port, user:pass@) and "
                + "that the proxy allows CONNECT to \(config.prefectAPI.authority), or list the host in NO_PROXY"
        }
        var fix = "check PREFECT_API_URL (host, port, /api) and that this node can reach the server"
        if config.prefectAPI.tls { fix += "; for a private CA set PREFECT_CA_FILE" }
        return fix
    }

    // MARK: - APNs

    private static func apns(_ config: Config, keyUsable: Bool, _ report: Report) async {
        let hosts: [(String, HTTPURL, APNsEnvironment)] = [
            ("apns production", config.apnsProduction, .production),
            ("apns development", config.apnsDevelopment, .development),
        ]
        let tls: TLSContext
        do {
            tls = try Wiring.apnsTLS(caFile: config.apnsCAFile)
        } catch {
            return report.add(Line(.failed, "apns tls", "\(error)", fix: "APNS_CA_FILE must be a readable PEM file, or unset"))
        }
        var reachable: [APNsEnvironment] = []
        for (name, url, environment) in hosts {
            let line = handshake(name, url, tls, caFile: config.apnsCAFile, route: config.proxy.route(for: url))
            if line.status == .ok { reachable.append(environment) }
            report.add(line)
        }
        guard keyUsable, !reachable.isEmpty else { return }

        var options = APNsClient.Options()
        options.connection.connectTimeoutMs = 10_000
        options.connection.requestTimeoutMs = 10_000
        options.retry = .never
        guard let client = try? Wiring.apnsClient(config, options: options) else { return }
        defer { client.shutdown() }
        for (name, url, environment) in hosts where reachable.contains(environment) {
            let probe = Push(kind: .alert, deviceToken: String(repeating: "0", count: 64), environment: environment,
                             topic: config.apnsTopic, priority: 5, expiration: 0,
                             payload: #"{"aps":{"alert":"prefect-push check"}}"#)
            report.add(token(name, url, await client.send(probe)))
        }
    }

    private static func handshake(_ name: String, _ url: HTTPURL, _ tls: TLSContext, caFile: String?,
                                  route: ProxyRule.Route) -> Line {
        do {
            _ = try TLSSocket.connect(host: url.host, port: url.port, tls: tls, timeoutMs: 10_000, proxy: route.endpoint)
            let tunnel = route.endpoint == nil ? " (direct)" : " (\(route.description): CONNECT answered 2xx)"
            return Line(.ok, name, "TLS to \(url.authority)\(tunnel): certificate verified, ALPN h2")
        } catch {
            let text = error.description
            let fix: String
            if let proxy = route.endpoint, text.hasPrefix("proxy ") {
                fix = "APNs goes through the proxy \(proxy): check HTTPS_PROXY (host, port, user:pass@) and that the "
                    + "proxy allows CONNECT to \(url.authority)"
            } else if text.hasPrefix("resolve ") {
                fix = "this node cannot resolve \(url.host): check its DNS (and /etc/nsswitch.conf in a container)"
            } else if text.includes("verify") {
                fix = caFile == nil ? "install the system CA bundle (ca-certificates), or set APNS_CA_FILE"
                                    : "APNS_CA_FILE must hold the CA that signed \(url.host)'s certificate"
            } else if text.includes("ALPN") {
                fix = "something between here and \(url.host) terminates TLS without HTTP/2; APNs needs a direct connection"
            } else {
                fix = "allow outbound TCP \(url.port) to \(url.host) (APNs), or check APNS_PRODUCTION_URL / APNS_DEVELOPMENT_URL"
            }
            return Line(.failed, name, text, fix: fix)
        }
    }

    private static func token(_ name: String, _ url: HTTPURL, _ outcome: APNsOutcome) -> Line {
        let label = name + " token"
        switch outcome {
        case .delivered:
            return Line(.ok, label, "\(url.authority) accepted the provider token")
        case .rejected(let r) where r.status == 410 || r.reason == .badDeviceToken || r.reason == .deviceTokenNotForTopic
            || r.reason == .unregistered:
            return Line(.ok, label, "\(url.authority) accepted the provider token and topic (the probe's made-up device "
                        + "token got \(r.reason?.rawValue ?? String(r.status)), as it should)")
        case .rejected(let r) where r.status == 403:
            return Line(.failed, label, "\(url.authority) refused the provider token (\(r.reason?.rawValue ?? "403"))",
                        fix: "APNS_KEY_ID and APNS_TEAM_ID must belong to this key, and the key must have APNs enabled")
        case .rejected(let r) where r.reason == .topicDisallowed || r.reason == .badTopic:
            return Line(.failed, label, "\(url.authority) refused the topic (\(r.reason!.rawValue))",
                        fix: "APNS_TOPIC must be the app's bundle id, in the key's team")
        case .rejected(let r):
            return Line(.failed, label, "\(url.authority) answered \(r.status) \(r.reason?.rawValue ?? "")",
                        fix: "see Apple's table of APNs errors for this reason")
        case .timedOut:
            return Line(.failed, label, "\(url.authority) did not answer in 10 s", fix: "try again; check the node's network")
        case .unreachable(let why), .connectionLost(let why):
            return Line(.failed, label, "\(url.authority): \(why)", fix: "try again; check the node's network")
        }
    }
}
