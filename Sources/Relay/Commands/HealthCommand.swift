import RelayCore

/// `prefect-push health`: asks the relay on this host whether it is alive (`GET <BASE_PATH>/health/live` on `PORT`),
/// for a container's HEALTHCHECK in an image with no shell and no curl (as gorush's `--ping`). Liveness, not
/// readiness: a relay waiting on Prefect is alive, and restarting it would not bring Prefect back.
///
/// Exit 0 when the relay answers 200 within 3 s; 1 otherwise (the reason on stderr), a usage error or a malformed
/// `PORT`, `API_BIND` or `BASE_PATH` included: Docker's HEALTHCHECK reserves exit code 2. Reads only those three
/// settings, so a relay is probed whatever the rest of the environment says.
enum HealthCommand {
    static let usage = "health       exit 0 if the relay on this host answers GET <BASE_PATH>/health/live on PORT "
        + "within 3 s, else 1 (a container HEALTHCHECK)"

    static func run(arguments: [String], environment: [String: String]) async -> Int32 {
        guard arguments.isEmpty else {
            Stderr.write("usage: prefect-push health (PORT, API_BIND and BASE_PATH say where the relay listens)\n")
            return 1
        }
        let listener: Config.APIListener
        do { listener = try Config.apiListener(environment: environment) } catch {
            Stderr.write("health: \(error)\n")
            return 1
        }
        let url = HTTPURL(tls: false, host: host(bound: listener.bind), port: listener.port, path: "")
        let path = listener.basePath + "/health/live"
        let pool: HTTPPool
        do { pool = try HTTPPool() } catch {
            Stderr.write("health: \(error)\n")
            return 1
        }
        defer { pool.close() }
        let call = HTTPCall(method: "GET", url: url, path: path, headers: [], body: nil, timeoutSeconds: 3)
        switch await pool.send(call) {
        case .success(let reply) where reply.status == 200:
            return 0
        case .success(let reply):
            Stderr.write("health: GET \(url.authority)\(path) answered \(reply.status)\n")
            return 1
        case .failure(let failure):
            Stderr.write("health: GET \(url.authority)\(path): \(failure)\n")
            return 1
        }
    }

    /// Where to reach a listener bound to `bind`: the loopback for a wildcard, else the address itself.
    static func host(bound bind: String) -> String {
        switch bind {
        case "", "0.0.0.0": return "127.0.0.1"
        case "::": return "::1"
        default: return bind
        }
    }
}
