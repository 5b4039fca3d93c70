import RelayCore

/// The API's behaviour once a request is framed (README "API"): credential, body, then the registry.
/// Runs on the API's own executor thread (`RelayExecutor.api`), with its credential checks on Prefect connections of
/// their own (`Authorizer`): a flood of requests never queues in front of a pause. Its reads and writes go to the
/// `Ledger` (a few hundred microseconds each on the relay's thread); the API's loop thread only frames and writes.
struct API: Sendable {
    let ledger: Ledger
    let outbox: OutboxSender
    let planner: PushPlanner
    let status: RelayStatus
    let authorizer: Authorizer
    /// `MAX_DEVICES`: registering a new device beyond it is a 409.
    var maxDevices: Int = Config.defaultMaxDevices

    func handle(_ request: APIRequest) async -> APIResponse {
        let started = SystemClock.monotonic()
        let response = await answer(request)
        let ms = Int((SystemClock.monotonic() - started) * 1000)
        var level: Config.LogLevel = response.status >= 500 ? .warn : (response.status >= 400 ? .info : .debug)
        // A probe's 503 repeats every few seconds; `health.failing` says it once.
        if request.route == .health || request.route == .live { level = min(level, .info) }
        // `via`: the trusted proxy that named the client (empty, so left out, for a direct client).
        Log.emit(level, "api.request", ["route": request.route.name, "method": request.method,
                                        "status": String(response.status), "ms": String(ms),
                                        "client": request.client?.address.description ?? "?",
                                        "via": request.client?.via?.description ?? ""])
        return response
    }

    private func answer(_ request: APIRequest) async -> APIResponse {
        if request.route.needsCredential {
            switch await authorizer.verdict(for: request.authorization) {
            case .admitted: break
            case .refused:
                return APIError.unauthorized(request.authorization == nil
                    ? "send the Prefect server's credential in the Authorization header"
                    : "the Prefect server refused this credential").response
            case .unavailable(let why):
                return APIError.unavailable(why).response
            case .malformed(let why):
                return APIError.badRequest(why).response
            case .busy:
                var response = APIError(status: 429, message: "too many credential checks under way; retry in a moment")
                    .response
                response.headers.append(("retry-after", "1"))
                return response
            }
        }
        switch request.route {
        case .health:
            return await status.health()
        case .live:
            return await status.live()
        case .metrics:
            return APIResponse(status: 200, text: await status.metricsText(), contentType: "text/plain; version=0.0.4")
        case .registerDevice:
            let body: JSONValue
            switch parse(request.body) {
            case .failure(let error): return error.response
            case .success(let value): body = value
            }
            switch Validation.registration(body) {
            case .failure(let error): return error.response
            case .success(let registration): return await register(registration)
            }
        case .unregisterDevice(let id):
            return await unregister(id: id)
        case .putActivity(let deviceID, let runID):
            switch parse(request.body).flatMap(Validation.activityToken) {
            case .failure(let error): return error.response
            case .success(let token): return await setActivity(deviceID: deviceID, runID: runID, token: token)
            }
        case .testPush(let deviceID):
            return await testPush(deviceID: deviceID)
        }
    }

    private func parse(_ body: [UInt8]) -> Result<JSONValue, APIError> {
        guard !body.isEmpty else { return .failure(.badRequest("the body is empty; send a JSON object")) }
        do {
            return .success(try JSONParser.parse(body))
        } catch {
            return .failure(.badRequest("the body is not valid JSON: \(error.message)"))
        }
    }
}
