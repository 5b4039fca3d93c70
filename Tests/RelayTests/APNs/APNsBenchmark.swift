import Glibc
import Testing
@testable import Relay
@testable import RelayCore

/// Throughput of one connection against the fake, and h2load against the same fake for comparison.
/// Prints numbers only (no timing assertions); runs when APNS_BENCH is set:
/// `APNS_BENCH=1 swift test --filter APNsBenchmark`.
@Suite(.enabled(if: getenv("APNS_BENCH") != nil), .serialized) struct APNsBenchmark {
    static let pushes = 10_000

    @Test(arguments: [100, 1000]) func pushesPerSecondOnOneConnection(streams: Int) async throws {
        Log.setLevel(.warn)
        let harness = try APNsHarness(requestTimeoutMs: 120_000)
        defer { harness.stop() }
        _ = await harness.client.send(APNsHarness.alert(APNsHarness.token(0)))  // connect and lift the stream limit
        let client = try benchClient(harness, streams: streams)
        defer { client.shutdown() }
        _ = await client.send(APNsHarness.alert(APNsHarness.token(0)))
        let started = monotonicMs()
        let delivered = await withTaskGroup(of: Bool.self) { group in
            for n in 1...Self.pushes { group.addTask { await client.send(APNsHarness.alert(APNsHarness.token(n))).isDelivered } }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        let ms = max(1, monotonicMs() - started)
        print("bench.client streams=\(streams) pushes=\(Self.pushes) delivered=\(delivered) ms=\(ms) "
            + "per_second=\(Int64(Self.pushes) * 1000 / ms) connections=\(harness.production.connectionCount - 1)")
        #expect(delivered == Self.pushes)

        if streams == 100 { try runH2load(against: harness) }
    }

    private func benchClient(_ harness: APNsHarness, streams: Int) throws -> APNsClient {
        var options = APNsClient.Options()
        options.connection.link.maxConcurrentStreams = streams
        options.connection.requestTimeoutMs = 120_000
        let credentials = Config.APNsCredentials(key: .file(APNsFixtures.keyPath), keyID: APNsFixtures.keyID,
                                                 teamID: APNsFixtures.teamID)
        let url = HTTPURL(tls: true, host: "127.0.0.1", port: harness.production.port, path: "")
        return try APNsClient(credentials: credentials, production: url, development: url,
                              caFile: APNsFixtures.path("ca.pem"), options: options)
    }

    /// h2load -n 10000 -c 1 -m 100 with the same headers and body, printing its summary lines.
    private func runH2load(against harness: APNsHarness) throws {
        let signer = JWTSigner(key: try ProviderKey(path: APNsFixtures.keyPath), keyID: APNsFixtures.keyID,
                               teamID: APNsFixtures.teamID)
        let push = APNsHarness.alert(APNsHarness.token(1))
        let bodyPath = "/tmp/apns-bench-body-\(getpid()).json"
        guard let file = fopen(bodyPath, "w") else { return }
        fputs(push.payload, file)
        fclose(file)
        defer { unlink(bodyPath) }
        let headers = push.headers.map { "-H '\($0.name): \($0.value)'" }.joined(separator: " ")
        let command = "h2load -n \(Self.pushes) -c 1 -m 100 -d \(bodyPath) -H 'authorization: bearer \(try signer.token())' "
            + "\(headers) https://127.0.0.1:\(harness.production.port)\(push.path) 2>&1"
        guard let pipe = popen(command, "r") else { return }
        var line = [CChar](repeating: 0, count: 1024)
        while fgets(&line, Int32(line.count), pipe) != nil {
            let text = String(decoding: line.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if text.contains("finished in") || text.contains("requests:") || text.contains("status codes:") {
                print("bench.h2load " + text.trimmingWhitespace())
            }
        }
        pclose(pipe)
    }
}
