import Glibc
import Testing
@testable import FakeAPNs
@testable import Relay
@testable import RelayCore

/// A pause is announced within its usual time while 16 credential checks hang. The relay binary runs against the
/// scripted Prefect (`bench/peer.py`), which holds every `POST /flows/count` with a credential other than the
/// configured one: no answer, the connection kept open (a Prefect whose database is locked). 16 API calls with 16
/// different credentials, as many as the relay checks at once (`Authorizer.maxConcurrentChecks`), each start a check
/// that hangs; a pause made then must reach the fake APNs as soon as one made before the hold did.
///
/// The held callers wait for Prefect: none is answered until the hold is released (then 401, Prefect's answer), or
/// until the relay gives up on Prefect (503, no sooner than its deadline for a Prefect call).
@Suite(.serialized) struct CredentialFloodTests {
    static let good = ScriptedPrefect.credential
    static let phone = "cc" + String(repeating: "03", count: 31)
    static let checks = Authorizer.maxConcurrentChecks
    /// Pause to alert, with or without the hold. Without it 5-130 ms here (2 shared cores), 2-10 ms for a pause
    /// beside 16 checks Prefect answers at once; the bound leaves room for a loaded CI machine and stays far below a
    /// relay that queues the pause's reads behind the held checks (9.2-9.3 s: they wait for the checks' deadline).
    static let usualSeconds: Double = 2
    /// A Prefect call's deadline in the relay (`HTTPCall.timeoutSeconds`): no held caller is answered before it.
    static let prefectDeadline: Double = 10

    @Test func aPauseIsAnnouncedInItsUsualTimeWhileSixteenChecksHang() throws {
        let directory = TestFiles.temporaryDirectory()
        defer { TestFiles.removeTree(directory) }
        let (peerProcess, peer) = try ScriptedPrefect.start(directory: directory)
        defer { peerProcess.stop(signal: SIGKILL) }  // nothing to flush
        let apns = try FakeAPNs(name: "production")
        defer { apns.stop() }
        let relay = try RelayProcess(environment: ScriptedPrefect.relayEnvironment(peer: peer, apns: apns),
                                     directory: directory)
        try waitUntil("the relay subscribes", timeout: 30) {
            (try? relay.http.request("GET", "/health").json?["subscribed"]) == true
        }
        // Registered (and its credential admitted) before the hold.
        let body: JSONValue = ["id": "flood-phone", "token": .string(Self.phone), "environment": "production",
                               "server_id": "flood"]
        let registered = try relay.http.request("POST", "/devices", headers: ["Authorization": Self.good],
                                                body: body.encoded())
        try #require(registered.status == 200)

        // The usual time: a pause with nothing else going on.
        let usual = try announce(peer, apns)
        #expect(usual < Self.usualSeconds, "a pause without the hold took \(usual) s")

        #expect(try peer.request("POST", "/control/hold-credential-checks", body: "").status == 200)
        var released = false
        defer { if !released { _ = try? peer.request("POST", "/control/release-credential-checks", body: "") } }
        let flood = try Flood(port: relay.port, count: Self.checks)
        defer { flood.close() }
        // Under way: as many as reach Prefect (the relay may queue some) stay there, unchanged for longer than the
        // pool takes to count a read as slow (200 ms) and open connections beside it.
        var held = 0
        var steadySince = SystemClock.monotonic()
        try waitUntil("the checks reach Prefect and stay there", timeout: 10) {
            let reply = try? peer.request("GET", "/control/credential-checks", timeout: 2)
            let now = (reply?.json?["held"]?.int).map(Int.init) ?? -1
            if now != held { (held, steadySince) = (now, SystemClock.monotonic()) }
            return held >= 1 && (held == Self.checks || SystemClock.monotonic() - steadySince >= 0.5)
        }
        #expect(try relay.http.request("GET", "/health/live", timeout: 2).status == 200)
        // An admitted credential is not checked again: it gets in beside the flood.
        let admitted = try relay.http.request("GET", "/metrics", headers: ["Authorization": Self.good], timeout: 2)
        #expect(admitted.status == 200)

        let flooded = try announce(peer, apns, watching: flood, wait: 3 * Self.prefectDeadline)
        print("credential-flood usual_ms=\(Int(usual * 1000)) flooded_ms=\(Int(flooded * 1000)) "
              + "checks_held_at_prefect=\(held)")
        #expect(flooded < Self.usualSeconds,
                "with \(Self.checks) checks hanging (\(held) of them at Prefect) a pause took \(flooded) s")
        #expect(try relay.http.request("GET", "/health/live", timeout: 2).status == 200)

        flood.look()
        let releasedAt = SystemClock.monotonic()
        #expect(try peer.request("POST", "/control/release-credential-checks", body: "").status == 200)
        released = true
        for (index, reply) in flood.replies(timeout: 15).enumerated() {
            guard let reply else {
                Issue.record("flood call \(index): no answer within 15 s of the release")
                continue
            }
            if let at = flood.answeredAt[index], at < releasedAt {
                // Before the release only the relay's own deadline may answer, with a 503.
                #expect(reply.status == 503 && at - flood.sentAt >= Self.prefectDeadline,
                        "flood call \(index) answered \(reply.status) after \(at - flood.sentAt) s, checks still held")
            } else {
                #expect(reply.status == 401, "flood call \(index) answered \(reply.status) after the release")
            }
        }
    }

    /// Makes a pause, waits (bounded by `wait`) for its alert at the fake APNs, ends the pause; returns the seconds
    /// from the peer's write of the Paused event to the alert's arrival (both CLOCK_MONOTONIC). `watching`'s calls
    /// are looked at while it waits, so the moment any is answered is known.
    private func announce(_ peer: TestHTTP, _ apns: FakeAPNs, watching flood: Flood? = nil,
                          wait: Double = 30) throws -> Double {
        let paused = try peer.request("POST", "/control/pause", body: "")
        let runID = try #require(paused.json?["run"]?.string)
        let sentNs = try #require(paused.json?["sent_ns"]?.int)
        var alert: FakeAPNs.Request?
        try waitUntil("the alert of run \(runID) reaches the fake APNs", timeout: wait) {
            flood?.look()
            alert = apns.requests(for: Self.phone).first { $0.body.contains(runID) }
            return alert != nil
        }
        #expect(try peer.request("POST", "/control/resume/\(runID)", body: "").status == 200)
        return Double(alert!.arrivedAtNs - sentNs) / 1e9
    }
}

/// Calls to the relay's API, one per credential (`GET /metrics` with `Bearer flood-N`), each on its own socket and
/// sent at once; their answers are read later. Single-threaded: the kernel holds the answers until then.
private final class Flood {
    let sockets: [Int32]
    let sentAt: Double
    /// When each call was first seen answered (monotonic seconds), by `look()`.
    private(set) var answeredAt: [Int: Double] = [:]

    init(port: Int, count: Int) throws {
        // Before the first send: no call's check can start earlier.
        sentAt = SystemClock.monotonic()
        var sockets: [Int32] = []
        do {
            for index in 0..<count {
                let fd = try TestSocket.connect(port: port)
                sockets.append(fd)
                let request = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
                    + "Authorization: Bearer flood-\(index)\r\n\r\n"
                try TestSocket.send(fd, Array(request.utf8))
            }
        } catch {
            sockets.forEach { _ = Glibc.close($0) }
            throw error
        }
        self.sockets = sockets
    }

    /// Notes, without waiting, which calls have an answer (or a close) to read.
    func look() {
        let now = SystemClock.monotonic()
        for (index, fd) in sockets.enumerated() where answeredAt[index] == nil {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&pfd, 1, 0) > 0 { answeredAt[index] = now }
        }
    }

    /// Each call's answer, waiting up to `timeout` seconds in all; nil for one that got none.
    func replies(timeout: Double) -> [TestHTTP.Reply?] {
        look()
        let deadline = SystemClock.monotonic() + timeout
        return sockets.map { fd in
            let left = max(0.1, deadline - SystemClock.monotonic())
            return (try? TestSocket.receiveAll(fd, timeout: left)).flatMap { try? TestHTTP.parse($0) }
        }
    }

    func close() { sockets.forEach { _ = Glibc.close($0) } }
}
