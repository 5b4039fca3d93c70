import CShims
import Dispatch
import FakeAPNs
import Glibc
import Relay
import RelayCore
import Synchronization

// A stand-in for APNs for `make demo` and `make bench`: HTTP/2 over TLS on 127.0.0.1, answering 200 with an
// apns-id, printing each push the way a phone would show it. Not for production; never shipped in the image.
//
//   fake-apns --port N --cert server.pem --key server.key --jwt-public-key key.pub.pem --key-id K --team-id T [--quiet]
//             [--arrivals] [--control]
//
// --arrivals (for `make bench` and `make chaos`): instead of the phone view, one line per request,
// `arrival <CLOCK_MONOTONIC ns> <token> <apns-collapse-id or -> <apns-push-type> <status answered, 0: none>
// <the payload's runId or ->` (the run id tells which pause a push without a collapse id belongs to), written in
// batches by the main thread (the loop thread only queues each request) so the fake's loop never waits on stdout.
//
// --control (for `make chaos`): read commands from stdin, one per line, each acknowledged on stdout with
// `ok <command>` once in effect (or `error <command>`):
//   answer <status> <reason>   answer every request with that status and `{"reason":...}` (e.g. 503 ServiceUnavailable)
//   answer normal              back to accepting every request
//   goaway <n> | goaway off    on every connection, GOAWAY after n answered streams (later ones are not processed)
//   silence on | silence off   established connections, open or new, are neither read nor written (TLS still
//                              completes), until off
//   exit                       die at once like kill -9 (the kernel resets every connection), but only after
//                              writing the arrival line of every request answered; no acknowledgement
//   straggle <token> <ms>      answer the requests to <token> <ms> later (0: at once again): a push that holds its
//                              fan-out open
//   kill <pid> after <n> [wait <ms>]
//                              (with --arrivals) SIGKILL process <pid> as the n-th request from now arrives (before
//                              answering it), or <ms> after, then write `killed <pid> <CLOCK_MONOTONIC ns just before
//                              the signal>`: a kill that lands mid fan-out however fast the sender is
// Starting it again on the same --port brings APNs back.

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
    static func write(_ text: String) { write(Array(text.utf8)) }

    static func write(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let written = Glibc.write(1, raw.baseAddress! + offset, raw.count - offset)
                if written < 0 && errno == EINTR { continue }
                if written <= 0 { return }
                offset += written
            }
        }
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

/// The arrival lines of `requests`, one each: `arrival <ns> <token> <collapse id> <push type> <status> <run id>` (see
/// the top of this file). Made as bytes, without a String per field: the benchmark's 1,000-device rows make 1,000 of
/// them per pause on the same two cores as the relay they time.
func arrivalLines(_ requests: [FakeAPNs.Request]) -> [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(requests.count * 200)
    for request in requests {
        out.append(contentsOf: "arrival ".utf8)
        out.append(contentsOf: String(request.arrivedAtNs).utf8)
        out.append(UInt8(ascii: " "))
        out.append(contentsOf: request.token.utf8)
        out.append(UInt8(ascii: " "))
        out.append(contentsOf: (request.headers["apns-collapse-id"] ?? "-").utf8)
        out.append(UInt8(ascii: " "))
        out.append(contentsOf: (request.headers["apns-push-type"] ?? "-").utf8)
        out.append(UInt8(ascii: " "))
        out.append(contentsOf: String(request.answer.map(status) ?? 0).utf8)
        out.append(UInt8(ascii: " "))
        var body = request.body
        body.withUTF8 { appendRunID(of: $0, to: &out) }
        out.append(UInt8(ascii: "\n"))
    }
    return out
}

/// The HTTP status an answer ends in (0: never answered).
func status(_ answer: FakeAPNs.Answer) -> Int {
    switch answer {
    case .accept: return 200
    case .reject(let status, _): return status
    case .gone: return 410
    case .slow(_, let later): return status(later)
    case .silent: return 0
    }
}

/// Appends the first `runId` value in a payload (an alert's `body.runId`, or the escaped one in a Live Activity's
/// props), or `-`; found by a byte scan rather than parsing: it runs for every request (on the main thread, in
/// batches).
func appendRunID(of body: UnsafeBufferPointer<UInt8>, to out: inout [UInt8]) {
    let key = "runId".utf8
    var start = 0
    while start + key.count <= body.count {
        if body[start..<(start + key.count)].elementsEqual(key) {
            var index = start + key.count
            // `":"`, `\":\"` or `": "`
            while index < body.count, body[index] == UInt8(ascii: "\\") || body[index] == UInt8(ascii: "\"")
                    || body[index] == UInt8(ascii: ":") || body[index] == UInt8(ascii: " ") {
                index += 1
            }
            guard index + 36 <= body.count else { break }
            out.append(contentsOf: body[index..<(index + 36)])
            return
        }
        start += 1
    }
    out.append(UInt8(ascii: "-"))
}

/// Lines from stdin (with --control), read while waiting for them or for `wake` (an eventfd, drained here).
struct ControlReader {
    private var fd: Int32
    private var buffer: [UInt8] = []

    init(enabled: Bool) { fd = enabled ? 0 : -1 }

    /// Waits up to `ms` (-1: without limit) for input or `wake` and returns the complete lines read (none once
    /// stdin is closed).
    mutating func wait(ms: Int32, wake: Int32? = nil) -> [String] {
        var fds: [pollfd] = []
        if fd >= 0 { fds.append(pollfd(fd: fd, events: Int16(POLLIN), revents: 0)) }
        if let wake { fds.append(pollfd(fd: wake, events: Int16(POLLIN), revents: 0)) }
        guard !fds.isEmpty else {
            usleep(UInt32(max(ms, 1)) * 1000)
            return []
        }
        guard poll(&fds, nfds_t(fds.count), ms) > 0 else { return [] }
        if let wake, fds[fds.count - 1].revents != 0 { drainSignal(wake) }
        guard fd >= 0, fds[0].revents != 0 else { return [] }
        var chunk = [UInt8](repeating: 0, count: 4096)
        let count = read(fd, &chunk, chunk.count)
        if count <= 0 {
            fd = -1  // stdin closed: keep serving, stop reading
            return []
        }
        buffer += chunk[0..<count]
        var lines: [String] = []
        while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
            lines.append(String(decoding: buffer[..<newline], as: UTF8.self))
            buffer.removeSubrange(...newline)
        }
        return lines
    }
}

/// Empties an eventfd (non-blocking: nothing to read is fine).
func drainSignal(_ descriptor: Int32) {
    var count: UInt64 = 0
    _ = read(descriptor, &count, 8)
}

/// Applies one --control command; false if it isn't one.
func apply(_ command: String) -> Bool {
    let words = command.split(separator: " ").map(String.init)
    switch (words.first, words.count) {
    case ("answer", 2) where words[1] == "normal":
        fake.answerEveryone(nil)
    case ("answer", 3):
        guard let code = Int(words[1]) else { return false }
        fake.answerEveryone(.reject(code, words[2]))
    case ("goaway", 2):
        guard words[1] == "off" || Int(words[1]) != nil else { return false }
        fake.goAway(afterStreams: Int(words[1]))
    case ("silence", 2) where words[1] == "on" || words[1] == "off":
        fake.silence(words[1] == "on")
    case ("straggle", 3):
        guard let ms = Int(words[2]), ms >= 0 else { return false }
        if ms == 0 { fake.script(words[1], .accept) } else { fake.script(words[1], .slow(ms: ms, .accept)) }
    case ("kill", 4) where words[2] == "after", ("kill", 6) where words[2] == "after" && words[4] == "wait":
        guard arrivals, let pid = Int32(words[1]), let count = Int(words[3]), count > 0,
              let wait = words.count == 6 ? Int(words[5]) : 0, wait >= 0 else { return false }
        killPlan.withLock { $0 = (pid, count, wait) }
    case ("exit", 1):
        // The loop thread reports a request (under this lock) before it answers it, so holding the lock until
        // _exit means no request is answered without its line.
        pendingArrivals.withLock { requests in
            FileHandleLine.write(arrivalLines(requests))
            _exit(137)
        }
    default:
        return false
    }
    return true
}

let quiet = CommandLine.arguments.contains("--quiet")
let arrivals = CommandLine.arguments.contains("--arrivals")
let name = argument("--name") ?? "apns"
/// Requests whose arrival lines the main thread is still to write.
let pendingArrivals = Mutex<[FakeAPNs.Request]>([])
/// `kill <pid> after <n> [wait <ms>]`: the process to kill, how many more requests to let arrive first, and how
/// long after the last of them.
let killPlan = Mutex<(pid: Int32, left: Int, waitMs: Int)?>(nil)
/// A kill done and not yet reported: the process and when (CLOCK_MONOTONIC ns).
let killed = Mutex<(pid: Int32, ns: Int64)?>(nil)

/// Kills `pid` now and has the main thread report it (it is woken even if no request comes after).
func killNow(_ pid: Int32) {
    let ns = monotonicNanoseconds()
    kill(pid, SIGKILL)
    killed.withLock { $0 = (pid, ns) }
    var one: UInt64 = 1
    _ = write(arrivalSignal, &one, 8)
}
/// Written by the loop thread when it queues an arrival into an empty `pendingArrivals`: the main thread sleeps until
/// then instead of looking every 2 ms (which took a slice of the cores the benchmark times 500 times a second).
/// Held open for the life of the process (-1 without --arrivals).
let arrivalSignal = arrivals ? eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC)) : -1
if arrivals && arrivalSignal < 0 {
    // Without it the main thread would sleep for good and no arrival line would ever be written.
    FileHandleLine.write("fake-apns: eventfd failed: \(String(cString: strerror(errno)))\n")
    exit(1)
}
let identity = FakeAPNs.Identity(certificateChainPath: required("--cert"), privateKeyPath: required("--key"),
                                 jwtPublicKeyPath: required("--jwt-public-key"), keyID: required("--key-id"),
                                 teamID: required("--team-id"))
let fake: FakeAPNs
do {
    fake = try FakeAPNs(name: name, identity: identity, port: Int(argument("--port") ?? "0") ?? 0,
                        keepsRequests: false) { request in
        if arrivals {
            // Only queued here: the line is made on the main thread, off the loop that the benchmark times.
            let wasEmpty = pendingArrivals.withLock { requests -> Bool in
                defer { requests.append(request) }
                return requests.isEmpty
            }
            if wasEmpty {
                var one: UInt64 = 1
                _ = write(arrivalSignal, &one, 8)
            }
            let victim = killPlan.withLock { plan -> (pid: Int32, waitMs: Int)? in
                guard let (pid, left, waitMs) = plan else { return nil }
                plan = left > 1 ? (pid, left - 1, waitMs) : nil
                return left > 1 ? nil : (pid, waitMs)
            }
            if let victim, victim.waitMs == 0 {
                killNow(victim.pid)
            } else if let victim {
                DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(victim.waitMs)) { killNow(victim.pid) }
            }
        } else if !quiet {
            FileHandleLine.write(describe(request, host: name))
        }
    }
} catch {
    FileHandleLine.write("fake-apns: \(error)\n")
    exit(1)
}
FileHandleLine.write("fake-apns \(name) listening on https://127.0.0.1:\(fake.port)\n")
// Runs until killed (the demo, the benchmark and the chaos suite stop it); bounded by whoever started it.
var commands = ControlReader(enabled: CommandLine.arguments.contains("--control"))
/// Arrivals were written last turn: a burst may be under way, so the next lines are gathered for 2 ms (commands are
/// still read meanwhile) rather than written one wake-up each.
var inBurst = false
while true {
    let lines = !arrivals ? commands.wait(ms: 1000)
        : inBurst ? commands.wait(ms: 2) : commands.wait(ms: -1, wake: arrivalSignal)
    for command in lines {
        FileHandleLine.write((apply(command) ? "ok " : "error ") + command + "\n")
    }
    guard arrivals else { continue }
    if inBurst { drainSignal(arrivalSignal) }
    let requests = pendingArrivals.withLock { requests -> [FakeAPNs.Request] in
        defer { requests.removeAll(keepingCapacity: true) }
        return requests
    }
    inBurst = !requests.isEmpty
    if inBurst { FileHandleLine.write(arrivalLines(requests)) }
    // After the arrival lines: every request stamped before the kill is reported before it.
    if let (pid, ns) = killed.withLock({ done in defer { done = nil }; return done }) {
        FileHandleLine.write("killed \(pid) \(ns)\n")
    }
}
