import FakeAPNs
import Glibc
import Relay
import RelayCore

// A stand-in for APNs for `make demo` and `make bench`: HTTP/2 over TLS on 127.0.0.1, answering 200 with an
// apns-id, printing each push the way a phone would show it. Not for production; never shipped in the image.
//
//   fake-apns --port N --cert server.pem --key server.key --jwt-public-key key.pub.pem --key-id K --team-id T [--quiet]

func argument(_ name: String) -> String? {
    let args = CommandLine.arguments
    guard let index = args.firstIndex(of: name), index + 1 < args.count else { return nil }
    return args[index + 1]
}

func required(_ name: String) -> String {
    guard let value = argument(name) else {
        FileHandleLine.write("fake-apns: missing \(name)\n")
        exit(2)
    }
    return value
}

enum FileHandleLine {
    static func write(_ text: String) {
        var bytes = Array(text.utf8)
        _ = bytes.withUnsafeMutableBytes { Glibc.write(1, $0.baseAddress, $0.count) }
    }
}

/// One push as a phone would show it.
func describe(_ request: FakeAPNs.Request, host: String) -> String {
    let kind = request.headers["apns-push-type"] ?? "?"
    let token = request.token
    let short = token.count > 10 ? String(token.prefix(6)) + "…" + String(token.suffix(3)) : token
    guard let payload = try? JSONParser.parse(request.body), let aps = payload["aps"] else {
        return "[\(host)] \(kind) to \(short): unreadable payload (\(request.body.utf8.count) bytes)\n"
    }
    var out = "\n[\(host)] \(kind) to \(short)  (\(request.body.utf8.count) bytes, topic \(request.headers["apns-topic"] ?? "?"))\n"
    if kind == "alert" {
        let alert = aps["alert"]
        out += "  ┌ \(alert?["title"]?.string ?? "")\n"
        if let subtitle = alert?["subtitle"]?.string { out += "  │ \(subtitle)\n" }
        for line in (alert?["body"]?.string ?? "").split(separator: "\n", omittingEmptySubsequences: false) {
            out += "  │ \(line)\n"
        }
        let category = aps["category"]?.string ?? "-"
        let actions = category == "waiting-reply" ? "Reply · Resume · Cancel" : "Resume · Cancel"
        out += "  └ category \(category): \(actions)\n"
        if let data = payload["body"] { out += "    data \(data.encoded())\n" }
    } else {
        let event = aps["event"]?.string ?? "?"
        let state = aps["content-state"]
        let props = state?["props"]?.string.flatMap { try? JSONParser.parse($0) }
        out += "  Live Activity \(event): \(state?["name"]?.string ?? "?")"
        if let ended = props?["ended"]?.string { out += ", ended = \(ended)" }
        if let dismissal = aps["dismissal-date"]?.int { out += ", dismissed at \(dismissal)" }
        out += "\n"
        if let props {
            out += "    \(props["title"]?.string ?? "")  [\(props["stateName"]?.string ?? "")]\n"
            out += "    props \(props.encoded())\n"
        }
    }
    return out
}

let quiet = CommandLine.arguments.contains("--quiet")
let name = argument("--name") ?? "apns"
let identity = FakeAPNs.Identity(certificateChainPath: required("--cert"), privateKeyPath: required("--key"),
                                 jwtPublicKeyPath: required("--jwt-public-key"), keyID: required("--key-id"),
                                 teamID: required("--team-id"))
let fake: FakeAPNs
do {
    fake = try FakeAPNs(name: name, identity: identity, port: Int(argument("--port") ?? "0") ?? 0) { request in
        if !quiet { FileHandleLine.write(describe(request, host: name)) }
    }
} catch {
    FileHandleLine.write("fake-apns: \(error)\n")
    exit(1)
}
FileHandleLine.write("fake-apns \(name) listening on https://127.0.0.1:\(fake.port)\n")
// Runs until killed (the demo and the benchmark stop it); bounded by whoever started it.
while true { sleep(3600) }
