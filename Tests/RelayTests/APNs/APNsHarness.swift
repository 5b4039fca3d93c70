import Synchronization
@testable import RelayCore
@testable import Relay
@testable import FakeAPNs

/// Two fake APNs hosts (production, development) and a client pointed at them through the test CA.
struct APNsHarness {
    let production: FakeAPNs
    let development: FakeAPNs
    let client: APNsClient

    init(requestTimeoutMs: Int = 5_000, retry: Backoff = Backoff(initial: 0.01, maximum: 0.04, jitter: 0, limit: 3),
         keyPath: String = APNsFixtures.keyPath, maxConcurrentStreams: UInt32 = 1000,
         pingIntervalMs: Int = 45_000, pingTimeoutMs: Int = 10_000,
         now: (@Sendable () -> Int64)? = nil) throws {
        production = try FakeAPNs(name: "production", maxConcurrentStreams: maxConcurrentStreams)
        development = try FakeAPNs(name: "development", maxConcurrentStreams: maxConcurrentStreams)
        var options = APNsClient.Options()
        options.connection.requestTimeoutMs = requestTimeoutMs
        options.connection.connectTimeoutMs = 2_000
        options.connection.link.reconnectDelayMs = 50
        options.connection.link.pingIntervalMs = pingIntervalMs
        options.connection.link.pingTimeoutMs = pingTimeoutMs
        options.retry = retry
        let credentials = Config.APNsCredentials(key: .file(keyPath), keyID: APNsFixtures.keyID, teamID: APNsFixtures.teamID)
        client = try APNsClient(credentials: credentials,
                                production: HTTPURL(tls: true, host: "127.0.0.1", port: production.port, path: ""),
                                development: HTTPURL(tls: true, host: "127.0.0.1", port: development.port, path: ""),
                                caFile: APNsFixtures.path("ca.pem"), options: options, now: now)
    }

    func stop() {
        client.shutdown()
        production.stop()
        development.stop()
    }

    static func token(_ n: Int) -> String {
        let digits = String(n, radix: 16)
        return "ab" + String(repeating: "0", count: 62 - digits.count) + digits
    }

    static func alert(_ token: String, environment: APNsEnvironment = .production, collapseID: String? = nil,
                      expiration: Int64? = nil) -> Push {
        Push(kind: .alert, deviceToken: token, environment: environment, topic: "io.example.app", priority: 10,
             collapseID: collapseID, expiration: expiration,
             payload: #"{"aps":{"alert":{"title":"t","body":"b"}},"body":{"runId":"r"}}"#)
    }

    static func device(_ token: String, start: String? = nil, environment: APNsEnvironment = .production) -> Device {
        Device(id: "dev-" + token.suffix(4), token: token, startToken: start, environment: environment, serverID: "s",
               createdAt: 0, updatedAt: 0)
    }
}

extension APNsClient {
    /// Delivers many pushes (through `fanOut`) and returns the results in the order given.
    func deliverAll(_ items: [(push: Push, device: Device)]) async -> [Delivery] {
        let results = Mutex([Delivery?](repeating: nil, count: items.count))
        _ = await fanOut(items) { index, delivery in results.withLock { $0[index] = delivery } }
        return results.withLock { $0.map { $0! } }
    }
}
