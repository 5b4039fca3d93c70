import Glibc
import Relay
import RelayCore

/// The relay's own APNs client under load, for `make bench` (throughput on one connection), through the client's
/// `package` API; the relay itself never calls it.
///
/// Pushes go out the way an announce fans out: one `APNsClient.fanOut` over the host's one shared
/// connection.
enum APNsLoad {
    struct Result: Sendable {
        var pushes: Int
        var delivered: Int
        var seconds: Double
        /// CPU time (user + system) the process spent while the pushes went out, all threads.
        var cpuSeconds: Double
        var connectionsOpened: Int
    }

    /// Builds the client from the same environment the relay reads (`APNS_*`), connects with one push (the
    /// stream limit is 1 until APNs first answers 200), then times `pushes` alerts to distinct tokens.
    static func run(environment: [String: String], pushes: Int) async throws -> Result {
        var env = environment
        if env["PREFECT_API_URL"] == nil { env["PREFECT_API_URL"] = "http://127.0.0.1:1/api" }
        let config = try Config(environment: env)
        Log.setLevel(config.logLevel)
        var options = APNsClient.Options()
        options.connection.requestTimeoutMs = 120_000
        guard let client = try APNsClient.make(config: config, options: options) else {
            throw ConfigError("APNS_KEY", "the benchmark needs an APNs key")
        }
        defer { client.shutdown() }
        let opened = client.linksOpened
        let payload = #"{"aps":{"alert":{"title":"Approve the nightly deploy?","subtitle":"nightly-deploy","#
            + #""body":"service: billing-api\nReply with a comment."},"category":"waiting-reply","sound":"default"},"#
            + #""body":{"runId":"95d737c2-8dd4-4a0b-b4d5-e6d147c8ff6e","serverId":"bench"}}"#
        func item(_ n: Int) -> (push: Push, device: Device) {
            let digits = String(n, radix: 16)
            let token = "ab" + String(repeating: "0", count: 62 - digits.count) + digits
            let device = Device(id: "bench-\(n)", token: token, startToken: nil, environment: .production,
                                serverID: "bench", createdAt: 0, updatedAt: 0)
            let push = Push(kind: .alert, deviceToken: token, environment: .production, topic: config.apnsTopic,
                            priority: 10, collapseID: "bench", expiration: 0, payload: payload)
            return (push, device)
        }
        let warm = item(0)
        _ = await client.deliver(warm.push, to: warm.device)
        let items = (1...pushes).map(item)
        let started = SystemClock.monotonic()
        let cpuStarted = processCPUSeconds()
        let delivered = await client.fanOut(items) { _, _ in }
        let seconds = SystemClock.monotonic() - started
        return Result(pushes: pushes, delivered: delivered, seconds: seconds, cpuSeconds: processCPUSeconds() - cpuStarted,
                      connectionsOpened: client.linksOpened - opened)
    }
}

/// User + system CPU seconds of the whole process so far.
private func processCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}
