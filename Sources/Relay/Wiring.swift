import RelayCore

/// The clients both the relay (`RelayMain`) and `prefect-push check` (`CheckCommand`) make from a `Config`, each made only
/// here: the Prefect REST pools, the events socket's lws loop, the APNs TLS context and client. Check is meant to try
/// what the relay will use; when each made its own, they drifted (check's events loop missed the relay's client-TLS
/// setting).
enum Wiring {
    // MARK: - Prefect

    /// The pause path's REST pool: Prefect's extra CA file and the proxy rule.
    static func prefectPoolOptions(_ config: Config) -> HTTPPool.Options {
        HTTPPool.Options(caFile: config.prefectCAFile, proxy: config.proxy)
    }

    /// The API's credential checks' own pool: as the pause path's, with one connection per check that may run at
    /// once and no extra ones, on a thread of its own.
    static func credentialPoolOptions(_ config: Config) -> HTTPPool.Options {
        var options = prefectPoolOptions(config)
        (options.maxConnectionsPerHost, options.extraConnectionsPerHost) = (Authorizer.maxConcurrentChecks, 0)
        options.threadName = "pp-auth"
        return options
    }

    static func prefectPool(_ config: Config) throws(IOError) -> HTTPPool {
        try HTTPPool(options: prefectPoolOptions(config))
    }

    static func credentialPool(_ config: Config) throws(IOError) -> HTTPPool {
        try HTTPPool(options: credentialPoolOptions(config))
    }

    /// The events socket's lws loop: no listener; client TLS only for an https Prefect (lws then sets up no OpenSSL
    /// client context for a plain-http one); Prefect's extra CA file; the proxy `ProxyRule` picks for
    /// `PREFECT_API_URL`.
    static func eventsLoopSettings(_ config: Config) -> WebSocketsLoop.Settings {
        WebSocketsLoop.Settings(port: -1, clientCAFile: config.prefectCAFile, clientTLS: config.prefectAPI.tls,
                                clientProxy: config.proxy.route(for: config.prefectAPI).endpoint,
                                threadName: "pp-events")
    }

    /// The loop `events` is handed to, not yet started; `startEvents()` connects it once the loop runs.
    static func eventsLoop(_ config: Config, events: sending EventsSocket) throws(StartupError) -> WebSocketsLoop {
        try WebSocketsLoop(settings: eventsLoopSettings(config), handlers: [events])
    }

    // MARK: - APNs

    /// The APNs TLS context: TLS 1.2+, ALPN h2, the system roots plus `APNS_CA_FILE`. The client's connections and
    /// check's handshakes both use one made here.
    static func apnsTLS(caFile: String?) throws(TLSError) -> TLSContext {
        try TLSContext(caFile: caFile, caVariable: "APNS_CA_FILE")
    }

    /// The APNs client, or nil without an APNs key. `options`: check's are shorter deadlines and no retries.
    static func apnsClient(_ config: Config, options: APNsClient.Options = APNsClient.Options()) throws -> APNsClient? {
        try APNsClient.make(config: config, options: options)
    }
}
