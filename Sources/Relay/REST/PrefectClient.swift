import RelayCore

/// REST calls to the watched Prefect server, over kept-alive connections (`HTTPPool`).
/// The relay's own calls carry `Config.prefectAuthorization`: `Bearer <PREFECT_API_KEY>` for Prefect Cloud, or
/// `Basic base64(PREFECT_API_AUTH_STRING)`; the credential check forwards the caller's header instead. 503
/// (Prefect's SQLite "database is locked") and 429 (a rate limit) are
/// retried with backoff, waiting at least what `Retry-After` asks (bounded by `longestRetryWait`).
struct PrefectClient: Sendable {
    let api: HTTPURL
    let ownAuthorization: String?
    let http: HTTPPool

    init(config: Config, http: HTTPPool) {
        api = config.prefectAPI
        ownAuthorization = config.prefectAuthorization
        self.http = http
    }

    /// `POST /flows/count` with the caller's Authorization header: Prefect's answer to "may this caller in?".
    func checkCredential(_ authorization: String?) async -> Result<Int, HTTPFailure> {
        let result = await call("POST", "/flows/count", body: "{}", authorization: authorization, retry: .never)
        return result.map(\.status)
    }

    /// Whether the server lets anyone in: true when no credential is configured and `POST /flows/count` without one
    /// is answered 2xx; false when one is configured or the server wants one; nil when it didn't answer.
    func answersWithoutCredential() async -> Bool? {
        guard ownAuthorization == nil else { return false }
        guard case .success(let status) = await checkCredential(nil) else { return nil }
        return (200..<300).contains(status)
    }

    /// The longest a single call waits on a server's `Retry-After` before giving up to its caller (who retries
    /// on its own schedule: the tick, the listing).
    static let longestRetryWait = 10

    /// A JSON call with the relay's own credential; a 503 or 429 is retried on `retry`'s schedule, or after its
    /// `Retry-After` when that is longer (up to `longestRetryWait`). `answered`: the first attempt's answer, when it was sent already (a read ahead). `run`:
    /// the run the read is about, for the pool's per-run bound (`HTTPCall.group`).
    func json(_ method: String, _ path: String, body: JSONValue? = nil, retry: Backoff = .prefectCall, run: String? = nil,
              answered: Result<HTTPReply, HTTPFailure>? = nil) async -> Result<HTTPReply, HTTPFailure> {
        await call(method, path, body: body?.encoded(), authorization: ownAuthorization, retry: retry, run: run,
                   answered: answered)
    }

    private func call(_ method: String, _ path: String, body: String?, authorization: String?, retry: Backoff,
                      run: String? = nil, answered: Result<HTTPReply, HTTPFailure>? = nil) async
        -> Result<HTTPReply, HTTPFailure>
    {
        let request = request(method, path, body: body, authorization: authorization, run: run)
        var attempt = 0
        var answered = answered
        while true {
            let result = if let first = answered.take() { first } else { await http.send(request) }
            if case .success(let reply) = result, reply.status == 503 || reply.status == 429,
               let delay = retry.delay(retry: attempt + 1, random: .random(in: 0..<1))
            {
                attempt += 1
                let asked = reply.retryAfter ?? 0
                guard asked <= PrefectClient.longestRetryWait else { return result }
                try? await Task.sleep(for: .milliseconds(Int(max(delay, Double(asked)) * 1000)))
                continue
            }
            return result
        }
    }

    private func request(_ method: String, _ path: String, body: String?, authorization: String?,
                         run: String? = nil) -> HTTPCall {
        var headers: [(String, String)] = [("accept", "application/json")]
        if let authorization { headers.append(("authorization", authorization)) }
        if body != nil { headers.append(("content-type", "application/json")) }
        return HTTPCall(method: method, url: api, path: api.path + path, headers: headers,
                        body: body.map { Array($0.utf8) }, group: run)
    }
}

// MARK: - Reads

/// The answer to a read of one object.
enum PrefectRead: Sendable {
    case found(JSONValue)
    case notFound
    case failed(String)

    init(_ result: Result<HTTPReply, HTTPFailure>, path: String) {
        switch result {
        case .failure(let failure): self = .failed(failure.reason)
        case .success(let reply) where reply.status == 404: self = .notFound
        case .success(let reply) where reply.status == 200:
            guard let value = try? JSONParser.parse(reply.body) else { self = .failed("unparsable JSON from \(path)"); return }
            self = .found(value)
        case .success(let reply): self = .failed("\(path) answered \(reply.status)")
        }
    }
}

extension PrefectClient {
    /// `GET /flow_runs/{id}`; `answered`: the answer to one sent ahead (`RunReadAhead`), retried as any other.
    func flowRun(id: String, answered: Result<HTTPReply, HTTPFailure>? = nil) async -> PrefectRead {
        let path = "/flow_runs/\(id)"
        return PrefectRead(await json("GET", path, run: id, answered: answered), path: path)
    }

    /// `GET /flows/{id}`.
    func flow(id: String) async -> PrefectRead { await read("/flows/\(id)") }

    func read(_ path: String) async -> PrefectRead { PrefectRead(await json("GET", path), path: path) }

    /// A call with the relay's own credential sent from a thread that is not a task, once; `done` gets the raw
    /// answer on the pool's thread, for a read's `answered:` to take as its first attempt (and retry: a 503, a 429
    /// with its `Retry-After`).
    func begin(_ method: String, _ path: String, body: JSONValue? = nil, run: String? = nil,
               done: @escaping @Sendable (Result<HTTPReply, HTTPFailure>) -> Void) {
        http.submit(request(method, path, body: body?.encoded(), authorization: ownAuthorization, run: run), done: done)
    }

    /// A filter call (`POST …/filter`) whose answer is a JSON array; `answered` as for `flowRun`.
    func filter(_ path: String, _ body: JSONValue, run: String? = nil,
                answered: Result<HTTPReply, HTTPFailure>? = nil) async -> Result<[JSONValue], HTTPFailure>
    {
        switch await json("POST", path, body: body, run: run, answered: answered) {
        case .failure(let failure): return .failure(failure)
        case .success(let reply) where reply.status == 200:
            guard let value = try? JSONParser.parse(reply.body), let items = value.array else {
                return .failure(HTTPFailure(.unexpectedAnswer, "\(path) answered something other than a JSON array"))
            }
            return .success(items)
        case .success(let reply): return .failure(HTTPFailure(.unexpectedAnswer, "\(path) answered \(reply.status)"))
        }
    }
}
