import Glibc
@testable import Relay
import RelayCore
import Synchronization

// One client, one load: GETs of one URL, timed call by call from `send` to its answer (the caller's view, task
// resumption included), with `concurrency` callers each sending its next request as soon as its last is answered.
//
//   rest-client-bench pool|curl URL REQUESTS CONCURRENCY [CA_FILE]
//
// Before the timed requests, 5 rounds of `concurrency` calls open and warm the connections; the first round is
// timed as `cold_us`. Prints one line: `client=… requests=… concurrency=… failures=… p50_us=… p90_us=…
// p99_us=… max_us=… total_ms=… cpu_us_per_request=… cold_us=… connections=…` (cpu: this process, every thread,
// over the timed requests; connections: opened over the whole run). bench/rest-client/run.py runs it.

let arguments = CommandLine.arguments
guard arguments.count >= 5, let requests = Int(arguments[3]), let concurrency = Int(arguments[4]),
      requests > 0, concurrency > 0 else {
    print("usage: rest-client-bench pool|curl URL REQUESTS CONCURRENCY [CA_FILE]")
    exit(2)
}
let kind = arguments[1]
let target = try HTTPURL.parse(arguments[2], variable: "URL")
let caFile = arguments.count > 5 ? arguments[5] : nil
let origin = HTTPURL(tls: target.tls, host: target.host, port: target.port, path: "")
let call = HTTPCall(method: "GET", url: origin, path: target.path, headers: [("accept", "application/json")], body: nil)

Log.setLevel(.warn)
let createdAt = nanoseconds()
let send: @Sendable (HTTPCall) async -> Result<HTTPReply, HTTPFailure>
let connections: @Sendable () -> Int
let close: @Sendable () -> Void
switch kind {
case "pool":
    let pool = try HTTPPool(options: HTTPPool.Options(caFile: caFile))
    send = { await pool.send($0) }
    connections = { pool.connectionsOpened }
    close = { pool.close() }
case "curl":
    var options = CurlClient.Options()
    options.caFile = caFile
    let client = try CurlClient(options: options)
    send = { await client.send($0) }
    connections = { client.connectionsOpened }
    close = { client.close() }
default:
    print("rest-client-bench: unknown client \(kind) (pool or curl)")
    exit(2)
}

func nanoseconds() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
}

func cpuMicroseconds() -> Int64 {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    func us(_ t: timeval) -> Int64 { Int64(t.tv_sec) * 1_000_000 + Int64(t.tv_usec) }
    return us(usage.ru_utime) + us(usage.ru_stime)
}

/// The next call's number, shared by the callers.
final class Counter: Sendable {
    let value = Atomic<Int>(0)
}

/// `count` calls over `concurrency` callers; each call's latency in ns, and the failures.
func run(_ count: Int) async -> (latencies: [Int64], failures: Int) {
    let next = Counter()
    return await withTaskGroup(of: ([Int64], Int).self) { group in
        for _ in 0..<concurrency {
            group.addTask {
                var latencies: [Int64] = []
                var failures = 0
                while next.value.add(1, ordering: .relaxed).oldValue < count {
                    let started = nanoseconds()
                    let result = await send(call)
                    latencies.append(nanoseconds() - started)
                    if case .success(let reply) = result, reply.status == 200, !reply.body.isEmpty { continue }
                    failures += 1
                    if failures == 1 { print("rest-client-bench: \(result)") }
                }
                return (latencies, failures)
            }
        }
        return await group.reduce(into: ([Int64](), 0)) { $0.0 += $1.0; $0.1 += $1.1 }
    }
}

// Cold: from making the client (libcurl's global set-up included; OpenSSL's, for both, on first use) until the last
// of the first `concurrency` calls at once is answered: connections opened, TLS handshakes. Then 4 more rounds.
_ = await run(concurrency)
let coldUs = (nanoseconds() - createdAt) / 1000
_ = await run(4 * concurrency)
let cpuBefore = cpuMicroseconds()
let started = nanoseconds()
let (latencies, failures) = await run(requests)
let totalNs = nanoseconds() - started
let cpu = cpuMicroseconds() - cpuBefore
close()

let sorted = latencies.sorted()
func percentile(_ p: Double) -> Int64 { sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))] / 1000 }
print("client=\(kind) requests=\(requests) concurrency=\(concurrency) failures=\(failures) "
    + "p50_us=\(percentile(0.5)) p90_us=\(percentile(0.9)) p99_us=\(percentile(0.99)) max_us=\(sorted.last! / 1000) "
    + "total_ms=\(Double(totalNs / 10_000) / 100) cpu_us_per_request=\(Double(cpu * 100 / Int64(requests)) / 100) "
    + "cold_us=\(coldUs) connections=\(connections())")
exit(failures == 0 ? 0 : 1)
