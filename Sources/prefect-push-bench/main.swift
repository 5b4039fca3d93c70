import Glibc
import Relay

// `make bench` part 2: the relay's APNs client pushing N alerts over one connection, timed.
//
//   prefect-push-bench N    (APNS_* from the environment, as for the relay)
//
// Prints one line: `pushes=N delivered=D seconds=S per_second=R cpu_us_per_push=U connections=C` (U: the client's
// CPU time, all threads, per push while they went out).

var environment: [String: String] = [:]
var cursor = environ
while let entry = cursor.pointee {
    let text = String(cString: entry)
    if let eq = text.firstIndex(of: "=") { environment[String(text[..<eq])] = String(text[text.index(after: eq)...]) }
    cursor += 1
}
let pushes = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 10_000 : 10_000
do {
    let result = try await APNsLoad.run(environment: environment, pushes: pushes)
    print("pushes=\(result.pushes) delivered=\(result.delivered) seconds=\(result.seconds) "
        + "per_second=\(Int(Double(result.delivered) / result.seconds)) "
        + "cpu_us_per_push=\((result.cpuSeconds * 1e6 / Double(max(1, result.pushes)) * 100).rounded() / 100) connections=\(result.connectionsOpened)")
    exit(result.delivered == result.pushes ? 0 : 1)
} catch {
    print("prefect-push-bench: \(error)")
    exit(2)
}
