import RelayCore

/// The optional scrape port (`METRICS_PORT`, `METRICS_BIND`): `GET /metrics` without the Prefect credential, as
/// exporters serve it, so Prometheus holds no Prefect password or Cloud key. It answers nothing else, and runs on its
/// own lws context and thread: a scraper never shares a connection cap or a loop with the app's API.
enum MetricsListener {
    /// At most this many scrape connections at once (Prometheus uses one per target).
    static let maxConnections = 16

    static func start(port: Int, bind: String, status: RelayStatus) throws(StartupError) -> WebSocketsLoop {
        var limits = HTTPServer.Limits()
        limits.maxConnections = maxConnections
        limits.maxPerAddress = maxConnections
        let server = HTTPServer(router: Router(basePath: ""), limits: limits, requests: status.requests) { request, reply in
            Task(executorPreference: RelayExecutor.api) { reply(await answer(request, status: status)) }
        }
        let loop = try WebSocketsLoop(settings: .init(port: port, clientTLS: false,
                                                      maxConnections: maxConnections, bindAddress: bind,
                                                      portVariable: "METRICS_PORT", bindVariable: "METRICS_BIND"),
                                      handlers: [server])
        try loop.start()
        return loop
    }

    static func answer(_ request: APIRequest, status: RelayStatus) async -> APIResponse {
        guard request.route == .metrics else {
            return APIError.notFound("this port serves only GET /metrics").response
        }
        return APIResponse(status: 200, text: await status.metricsText(), contentType: "text/plain; version=0.0.4")
    }
}
