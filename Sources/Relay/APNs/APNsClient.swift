import RelayCore

/// The relay's APNs side: one connection per host (production and development), one provider token shared
/// by both, and the answer rules of DESIGN.md §5. Safe from any task.
///
/// `send` applies the retry rules (403 provider-token errors: re-sign and retry once; 429, 5xx and
/// unreachable: bounded backoff). `deliver` adds the device rules and returns the store effect for the
/// caller, which owns the store, to apply.
final class APNsClient: Sendable {
    struct Options: Sendable {
        var connection = APNsConnection.Options()
        var retry = RetryPolicy()
        var tokenPolicy = ProviderTokenPolicy()
        init() {}
    }

    private let production: APNsConnection
    private let development: APNsConnection
    private let signer: JWTSigner
    private let retry: RetryPolicy

    /// Builds the client from configuration, or nil when no APNs key is configured (the relay then runs
    /// without APNs). Throws `ConfigError` naming the variable for a bad key or CA file.
    static func make(config: Config, options: Options = Options()) throws -> APNsClient? {
        guard let credentials = config.apns else { return nil }
        return try APNsClient(credentials: credentials, production: config.apnsProduction,
                              development: config.apnsDevelopment, caFile: config.apnsCAFile, options: options)
    }

    /// `now` (unix seconds) drives provider-token refresh; tests inject their own.
    init(credentials: Config.APNsCredentials, production: HTTPURL, development: HTTPURL, caFile: String?,
         options: Options = Options(), now: (@Sendable () -> Int64)? = nil) throws {
        let key = try ProviderKey(source: credentials.key)
        if let now {
            signer = JWTSigner(key: key, keyID: credentials.keyID, teamID: credentials.teamID,
                               policy: options.tokenPolicy, now: now)
        } else {
            signer = JWTSigner(key: key, keyID: credentials.keyID, teamID: credentials.teamID, policy: options.tokenPolicy)
        }
        let tls: TLSContext
        do { tls = try TLSContext(caFile: caFile) } catch {
            throw ConfigError(caFile == nil ? "APNS_PRODUCTION_URL" : "APNS_CA_FILE", "could not set up TLS: \(error)")
        }
        self.production = try APNsConnection(host: production.host, port: production.port,
                                             authority: production.authority, tls: tls, options: options.connection)
        self.development = try APNsConnection(host: development.host, port: development.port,
                                              authority: development.authority, tls: tls, options: options.connection)
        self.retry = options.retry
    }

    deinit { shutdown() }

    /// Closes both connections; pushes still waiting finish as not sent. Idempotent.
    func shutdown() {
        production.close()
        development.close()
    }

    // MARK: - Sending

    /// Sends one push to `push.environment`'s host, retrying per the rules above, and logs each answer.
    func send(_ push: Push, retry: RetryPolicy? = nil) async -> APNsOutcome {
        let retry = retry ?? self.retry
        var token: String
        do { token = try signer.token() } catch {
            Log.error("apns.sign_failed", ["error": error.description])
            return .unreachable("could not sign the provider token")
        }
        var retries = 0
        var renewed = false
        while true {
            let outcome = await attempt(push, token: token, attempt: retries + (renewed ? 2 : 1))
            switch outcome.action {
            case .renewProviderToken where !renewed:
                renewed = true
                guard case .rejected(let rejection) = outcome, let reason = rejection.reason,
                      let renewal = signer.renew(rejected: token, reason: reason) else { return outcome }
                token = renewal.token
                // Only the request that signed anew recycles, so a burst of 403s replaces the link once.
                if renewal.isNew { connection(for: push.environment).recycle() }
            case .retryLater:
                retries += 1
                guard var delay = retry.delayMs(retry: retries, random: Double.random(in: 0..<1)) else { return outcome }
                if case .rejected(let rejection) = outcome, let asked = rejection.retryAfter {
                    // APNs said how long: waiting less only earns another 429.
                    guard asked * 1000 <= retry.maxMs * 4 else { return outcome }
                    delay = max(delay, asked * 1000)
                }
                try? await Task.sleep(nanoseconds: UInt64(delay) * 1_000_000)
            default:
                return outcome
            }
        }
    }

    private func attempt(_ push: Push, token: String, attempt: Int) async -> APNsOutcome {
        let request = APNsRequest(path: push.path, headers: [("authorization", "bearer " + token)] + push.headers,
                                  body: Array(push.payload.utf8))
        let started = monotonicMs()
        let exchange = await connection(for: push.environment).send(request)
        let outcome = Self.outcome(of: exchange)
        Self.log(push, outcome, attempt: attempt, ms: monotonicMs() - started)
        return outcome
    }

    private func connection(for environment: APNsEnvironment) -> APNsConnection {
        environment == .production ? production : development
    }

    /// Turns the wire result into a domain outcome, reading `{"reason","timestamp"}` from error bodies.
    static func outcome(of exchange: APNsExchange) -> APNsOutcome {
        switch exchange {
        case .response(200, let apnsID, _, _):
            return .delivered(apnsID: apnsID)
        case .response(let status, let apnsID, let body, let retryAfter):
            let json = try? JSONParser.parse(body)
            let reason = json?["reason"]?.string.map(APNsReason.init(rawValue:))
            return .rejected(APNsRejection(status: status, reason: reason, timestamp: json?["timestamp"]?.int, apnsID: apnsID,
                                           retryAfter: retryAfter))
        case .notSent(let why): return .unreachable(why)
        case .lost(let why): return .connectionLost(why)
        case .timedOut: return .timedOut
        }
    }

    /// A delivered push is a debug line (a fan-out to many phones logs one `apns.fanout` line instead); anything
    /// else is a warning. Fields are only formatted when the line will be written.
    private static func log(_ push: Push, _ outcome: APNsOutcome, attempt: Int, ms: Int64) {
        guard Log.isEnabled(outcome.isDelivered ? .debug : .warn) else { return }
        var apnsID = ""
        var detail = ""
        switch outcome {
        case .delivered(let id): apnsID = id ?? ""
        case .rejected(let rejection): apnsID = rejection.apnsID ?? ""
        case .unreachable(let why), .connectionLost(let why): detail = why
        case .timedOut: break
        }
        let fields: KeyValuePairs<String, String> = [
            "device": Log.short(push.deviceToken), "host": push.environment.rawValue, "type": push.kind.rawValue,
            "status": String(outcome.status), "reason": outcome.label, "apns_id": apnsID, "attempt": String(attempt),
            "ms": String(ms), "detail": detail,
        ]
        if outcome.isDelivered { Log.debug("apns.sent", fields) } else { Log.warn("apns.not_sent", fields) }
    }
}
