import RelayCore

/// The relay's APNs side: one connection per host (production and development), one provider token shared
/// by both, and the answer rules (`docs/architecture.md`, "APNs"). Safe from any task.
///
/// `send` applies the retry rules (403 provider-token errors: re-sign and retry once; 429, 5xx and
/// unreachable: bounded backoff). `deliver` adds the device rules and returns the store effect for the
/// caller, which owns the store, to apply.
package final class APNsClient: Sendable {
    package struct Options: Sendable {
        package var connection = APNsHostLoop.Options()
        var retry = Backoff.withinSend
        var tokenPolicy = ProviderTokenPolicy()
        package init() {}
    }

    private let production: APNsHostLoop
    private let development: APNsHostLoop
    private let signer: JWTSigner
    let retry: Backoff

    /// Builds the client from configuration, or nil when no APNs key is configured (the relay then runs
    /// without APNs). Throws `ConfigError` naming the variable for a bad key or CA file.
    package static func make(config: Config, options: Options = Options()) throws -> APNsClient? {
        guard let credentials = config.apns else { return nil }
        return try APNsClient(credentials: credentials, production: config.apnsProduction,
                              development: config.apnsDevelopment, caFile: config.apnsCAFile, options: options,
                              proxy: config.proxy)
    }

    /// `now` (unix seconds) drives provider-token refresh; tests inject their own.
    init(credentials: Config.APNsCredentials, production: HTTPURL, development: HTTPURL, caFile: String?,
         options: Options = Options(), now: (@Sendable () -> Int64)? = nil, proxy: ProxyRule = .none) throws {
        let key = try ProviderKey(source: credentials.key)
        if let now {
            signer = JWTSigner(key: key, keyID: credentials.keyID, teamID: credentials.teamID,
                               policy: options.tokenPolicy, now: now)
        } else {
            signer = JWTSigner(key: key, keyID: credentials.keyID, teamID: credentials.teamID, policy: options.tokenPolicy)
        }
        let tls: TLSContext
        do { tls = try Wiring.apnsTLS(caFile: caFile) } catch {
            throw ConfigError(caFile == nil ? "APNS_PRODUCTION_URL" : "APNS_CA_FILE", "could not set up TLS: \(error)")
        }
        self.production = try APNsHostLoop(host: production.host, port: production.port,
                                             authority: production.authority, tls: tls, options: options.connection,
                                             proxy: proxy.route(for: production).endpoint)
        self.development = try APNsHostLoop(host: development.host, port: development.port,
                                              authority: development.authority, tls: tls, options: options.connection,
                                              proxy: proxy.route(for: development).endpoint)
        self.retry = options.retry
    }

    deinit { shutdown() }

    /// TLS + HTTP/2 connections this client opened, to both hosts, since start-up (`/metrics`).
    package var linksOpened: Int { production.linksOpenedTotal + development.linksOpenedTotal }

    /// Each host the client has tried to reach, by authority, with its failures since the last connect (`/health`).
    func reachability() -> [String: FailureStreak] {
        var hosts: [String: FailureStreak] = [:]
        for connection in [production, development] {
            if let streak = connection.reachability.withLock({ $0 }) { hosts[connection.authority] = streak }
        }
        return hosts
    }

    /// Closes both connections; pushes still waiting finish as not sent. Idempotent.
    package func shutdown() {
        production.close()
        development.close()
    }

    // MARK: - Sending

    /// Sends one push to `push.environment`'s host, retrying per the rules above, and logs each answer.
    func send(_ push: Push) async -> APNsOutcome {
        let backoff = retry
        guard var token = currentToken() else { return .unreachable("could not sign the provider token") }
        var (retries, renewedOnce) = (0, false)
        while true {
            let outcome = await attempt(push, token: token, attempt: APNsOutcome.attempt(retries: retries, renewed: renewedOnce))
            switch outcome.nextStep(push.purpose, retries: &retries, renewed: &renewedOnce, backoff: backoff, random: Double.random(in: 0..<1)) {
            case .renewToken(let reason):
                guard let renewed = renewed(after: token, reason: reason, on: push.environment) else { return outcome }
                token = renewed
            case .retry(let ms):
                try? await Task.sleep(nanoseconds: UInt64(ms) * 1_000_000)
            case .finish:
                return outcome
            }
        }
    }

    private func attempt(_ push: Push, token: String, attempt: Int) async -> APNsOutcome {
        let started = monotonicMs()
        let exchange = await connection(for: push.environment).send(Self.request(push, token: token))
        let outcome = Self.outcome(of: exchange)
        Self.log(push, on: push.environment, outcome, attempt: attempt, ms: monotonicMs() - started)
        return outcome
    }

    func connection(for environment: APNsEnvironment) -> APNsHostLoop {
        environment == .production ? production : development
    }

    /// The HTTP/2 request for `push`, signed with `token`.
    static func request(_ push: Push, token: String) -> APNsRequest {
        APNsRequest(path: push.path, headers: [("authorization", "bearer " + token)] + push.headers,
                    body: Array(push.payload.utf8))
    }

    /// The provider token to sign with now, or nil (logged) when it can't be signed.
    func currentToken() -> String? {
        do { return try signer.token() } catch {
            Log.error("apns.sign_failed", ["error": error.description])
            return nil
        }
    }

    /// After a provider-token rejection of `token`: the token to use instead (re-signed when the policy allows),
    /// recycling the host's connection when this call was the one that re-signed.
    func renewed(after token: String, reason: APNsReason, on environment: APNsEnvironment) -> String? {
        guard let renewal = signer.renew(rejected: token, reason: reason) else { return nil }
        if renewal.isNew { connection(for: environment).recycle() }
        return renewal.token
    }

    /// Turns the wire result into a domain outcome, reading `{"reason","timestamp"}` from error bodies.
    static func outcome(of exchange: APNsExchange) -> APNsOutcome { APNsOutcome(exchange) }

    /// A delivered push is a debug line (a fan-out to many phones logs one `apns.fanout` line instead); anything
    /// else is a warning. Fields (and the push, which a fan-out would otherwise copy per answer) are only looked at
    /// when the line will be written.
    static func log(_ push: @autoclosure () -> Push, on environment: APNsEnvironment, _ outcome: APNsOutcome, attempt: Int, ms: Int64) {
        guard Log.isEnabled(outcome.isDelivered ? .debug : .warn) else { return }
        var apnsID = ""
        var detail = ""
        switch outcome {
        case .delivered(let id): apnsID = id ?? ""
        case .rejected(let rejection): apnsID = rejection.apnsID ?? ""
        case .unreachable(let why), .connectionLost(let why): detail = why
        case .timedOut: break
        }
        let push = push()
        let fields: KeyValuePairs<String, String> = [
            "device": Log.short(push.deviceToken), "host": environment.rawValue, "type": push.kind.rawValue,
            "status": String(outcome.status), "reason": outcome.label, "apns_id": apnsID, "attempt": String(attempt),
            "ms": String(ms), "detail": detail,
        ]
        if outcome.isDelivered { Log.debug("apns.sent", fields) } else { Log.warn("apns.not_sent", fields) }
    }
}
