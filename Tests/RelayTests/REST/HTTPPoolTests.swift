import Glibc
import Synchronization
import Testing
@testable import Relay
@testable import RelayCore

/// The Prefect connection pool against scripted loopback servers: reuse, the per-host limit and its queue, a
/// server that hangs up on a reused connection, `Connection: close`, and a server that never answers.
@Suite struct HTTPPoolTests {
    func get(_ server: ScriptedHTTPServer, _ path: String = "/api/x", timeout: Int32 = 10) -> HTTPCall {
        HTTPCall(method: "GET", url: server.url, path: path, headers: [("accept", "application/json")], body: nil,
                 timeoutSeconds: timeout)
    }

    func status(_ result: Result<HTTPReply, HTTPFailure>) -> Int? {
        if case .success(let reply) = result { return reply.status }
        return nil
    }

    @Test func sequentialCallsShareOneConnection() async throws {
        let server = try ScriptedHTTPServer { _, request in .answer("{\"n\":\(request)}") }
        defer { server.stop() }
        let pool = try HTTPPool()
        defer { pool.close() }
        for index in 0..<10 {
            let result = await pool.send(get(server))
            guard case .success(let reply) = result else { Issue.record("call \(index): \(result)"); return }
            #expect(reply.status == 200)
            #expect(String(decoding: reply.body, as: UTF8.self) == "{\"n\":\(index)}")
        }
        #expect(server.accepted == 1)
    }

    @Test func requestsCarryHostUserAgentAndTheirBody() async throws {
        let server = try ScriptedHTTPServer { _, _ in .answer("1") }
        defer { server.stop() }
        let pool = try HTTPPool()
        defer { pool.close() }
        let post = HTTPCall(method: "POST", url: server.url, path: "/api/flows/count",
                            headers: [("accept", "application/json"), ("authorization", "Basic eDp5"),
                                      ("content-type", "application/json")], body: Array("{}".utf8))
        #expect(status(await pool.send(post)) == 200)
        #expect(status(await pool.send(get(server, "/api/flows/abc"))) == 200)
        let texts = server.requestTexts
        #expect(texts.first == "POST /api/flows/count HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\n"
            + "User-Agent: prefect-push/\(BuildInfo.version)\r\naccept: application/json\r\n"
            + "authorization: Basic eDp5\r\ncontent-type: application/json\r\nContent-Length: 2\r\n\r\n{}")
        #expect(texts.last?.hasPrefix("GET /api/flows/abc HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\n") == true)
        #expect(texts.last?.contains("Content-Length") == false)
        // A header value that would split the request is refused before anything is sent.
        let smuggled = HTTPCall(method: "GET", url: server.url, path: "/api/x", headers: [("authorization", "a\r\nX: y")],
                                body: nil)
        guard case .failure = await pool.send(smuggled) else { Issue.record("sent a header with CRLF"); return }
        #expect(server.requests == 2)
    }

    @Test func callsBeyondTheLimitWaitTheirTurn() async throws {
        let server = try ScriptedHTTPServer { _, _ in .answer("{}") }
        defer { server.stop() }
        var options = HTTPPool.Options()
        options.maxConnectionsPerHost = 2
        options.extraConnectionsPerHost = 0  // the normal size alone (on a loaded machine an answer can take 200 ms)
        let pool = try HTTPPool(options: options)
        defer { pool.close() }
        let statuses = await withTaskGroup(of: Int?.self) { group in
            for _ in 0..<12 { group.addTask { self.status(await pool.send(self.get(server))) } }
            return await group.reduce(into: [Int?]()) { $0.append($1) }
        }
        #expect(statuses == Array(repeating: 200, count: 12))
        #expect(server.accepted <= 2)
        #expect(server.requests == 12)
    }

    /// The race keep-alive clients must survive: the server closes an idle connection just as a request goes out
    /// on it. The request is sent again, once, on a new connection.
    @Test func aReusedConnectionThatHangsUpIsReplaced() async throws {
        let server = try ScriptedHTTPServer { connection, request in
            connection == 0 && request == 1 ? .hangUp : .answer("{\"c\":\(connection)}")
        }
        defer { server.stop() }
        let pool = try HTTPPool()
        defer { pool.close() }
        #expect(status(await pool.send(get(server))) == 200)
        let second = await pool.send(get(server))
        guard case .success(let reply) = second else { Issue.record("\(second)"); return }
        #expect(String(decoding: reply.body, as: UTF8.self) == "{\"c\":1}")
        #expect(server.accepted == 2)
    }

    /// A fresh connection that hangs up is not retried: the server saw the request and said nothing.
    @Test func aFreshConnectionThatHangsUpFails() async throws {
        let server = try ScriptedHTTPServer { _, _ in .hangUp }
        defer { server.stop() }
        let pool = try HTTPPool()
        defer { pool.close() }
        guard case .failure = await pool.send(get(server)) else { Issue.record("expected a failure"); return }
        #expect(server.requests == 1)
    }

    @Test func connectionCloseIsHonoured() async throws {
        let server = try ScriptedHTTPServer { connection, _ in .answer("{}", close: connection == 0) }
        defer { server.stop() }
        let pool = try HTTPPool()
        defer { pool.close() }
        #expect(status(await pool.send(get(server))) == 200)
        #expect(status(await pool.send(get(server))) == 200)
        #expect(status(await pool.send(get(server))) == 200)
        #expect(server.accepted == 2)
    }

    @Test func aServerThatClosesAnIdleConnectionIsNoticed() async throws {
        // The first connection answers once and then closes; the pool sees the close while idle and opens anew.
        let server = try ScriptedHTTPServer { connection, _ in connection == 0 ? .answerThenHangUp("{}") : .answer("{}") }
        defer { server.stop() }
        let pool = try HTTPPool()
        defer { pool.close() }
        #expect(status(await pool.send(get(server))) == 200)
        try await Task.sleep(for: .milliseconds(100))
        #expect(status(await pool.send(get(server))) == 200)
        #expect(status(await pool.send(get(server))) == 200)
        #expect(server.accepted == 2)
    }

    @Test func aStalledServerTimesOut() async throws {
        let server = try ScriptedHTTPServer { _, _ in .stall }
        defer { server.stop() }
        let pool = try HTTPPool()
        defer { pool.close() }
        let started = monotonicMs()
        let result = await pool.send(get(server, timeout: 1))
        let elapsed = monotonicMs() - started
        guard case .failure(let failure) = result else { Issue.record("expected a timeout"); return }
        #expect(failure.reason.contains("did not answer within 1 s"))
        // Not before the 1 s deadline; the reason says it was the call's deadline and not the 10 s default (no upper
        // clock bound: a loaded machine can resume the test seconds late).
        #expect(elapsed >= 900)
        // The timed-out request stays open at the server, so its connection is not reused: another call opens another.
        _ = await pool.send(get(server, "/api/y", timeout: 1))
        #expect(server.accepted == 2)
    }

    /// More held requests than pooled connections: a new call still gets through (slow requests stop counting
    /// against the pool's size) long before the held ones time out; the held ones get their answers when the server
    /// gives them. Stalls are counted.
    @Test func heldRequestsDoNotBlockANewOne() async throws {
        // The first 8 connections hold what they are sent; later ones answer at once.
        let server = try ScriptedHTTPServer { connection, _ in
            connection < 8 ? .hold("{\"held\":\(connection)}") : .answer("{\"fresh\":true}")
        }
        defer { server.stop() }
        let pool = try HTTPPool()
        defer { pool.close() }
        let held = (0..<8).map { index in Task { await pool.send(get(server, "/api/held/\(index)", timeout: 30)) } }
        try await eventually("the server holds 8 requests", within: 30) { server.holding == 8 }
        // A 5 s deadline: queued behind the held ones (30 s), it would fail.
        let started = monotonicMs()
        let fresh = await pool.send(get(server, "/api/fresh", timeout: 5))
        guard case .success(let reply) = fresh else { Issue.record("the new call: \(fresh)"); return }
        #expect(String(decoding: reply.body, as: UTF8.self) == "{\"fresh\":true}")
        print("a new call beside 8 held ones answered in \(monotonicMs() - started) ms")
        // Counted once a loop turn: the fresh call's answer leaves 8 open at the server.
        try await eventually("8 reads in flight", within: 30) { pool.counts.snapshot.inFlight == 8 }
        try await eventually("8 reads counted stalled", within: 30) { pool.counts.snapshot.stalled == 8 }
        server.release()
        for (index, task) in held.enumerated() {
            guard case .success(let answer) = await task.value else { Issue.record("held call \(index)"); continue }
            #expect(String(decoding: answer.body, as: UTF8.self).hasPrefix("{\"held\":"))
        }
        #expect(server.accepted <= 12)
    }

    /// A call that times out leaves its request open; the same request asked again waits for that copy's answer
    /// instead of going out a second time, and gets it when the server answers.
    @Test func anAbandonedRequestIsNotSentAgainWhileOpen() async throws {
        let server = try ScriptedHTTPServer { _, request in .hold("{\"n\":\(request)}") }
        defer { server.stop() }
        let pool = try HTTPPool()
        defer { pool.close() }
        let first = await pool.send(get(server, "/api/flow_runs/a", timeout: 1))
        guard case .failure(let failure) = first else { Issue.record("expected a timeout: \(first)"); return }
        #expect(failure.reason.contains("did not answer within 1 s"))
        #expect(pool.counts.snapshot.abandoned == 1)
        let again = Task { await pool.send(get(server, "/api/flow_runs/a", timeout: 10)) }
        try await holds("the repeat is not sent while the first is open", during: 0.3) { server.requests == 1 }
        server.release()
        guard case .success(let reply) = await again.value else { Issue.record("the repeat got no answer"); return }
        #expect(String(decoding: reply.body, as: UTF8.self) == "{\"n\":0}")
        #expect(server.requests == 1)
        #expect(server.accepted == 1)
        // The connection is free again once answered.
        #expect(status(await pool.send(get(server, "/api/flow_runs/a"))) == 200)
        #expect(server.accepted == 1)
    }

    /// An abandoned request the server never answers gives its connection up after `abandonedHoldMs`; what waited
    /// on it is then sent on its own.
    @Test func anAbandonedRequestIsGivenUpInTheEnd() async throws {
        let server = try ScriptedHTTPServer { connection, _ in
            connection == 0 ? .stall : .answer("{\"c\":\(connection)}")
        }
        defer { server.stop() }
        var options = HTTPPool.Options()
        options.abandonedHoldMs = 1_500
        let pool = try HTTPPool(options: options)
        defer { pool.close() }
        guard case .failure = await pool.send(get(server, timeout: 1)) else { Issue.record("expected a timeout"); return }
        // Joins the open copy, which is given up 1.5 s after it was sent: then it goes out by itself.
        let again = await pool.send(get(server, timeout: 10))
        guard case .success(let reply) = again else { Issue.record("the repeat: \(again)"); return }
        #expect(String(decoding: reply.body, as: UTF8.self) == "{\"c\":1}")
        #expect(server.requests == 2)
    }

    /// One group's requests (one run's reads) take at most `maxInFlightPerGroup` connections; the rest wait their
    /// turn, and other groups' calls go on meanwhile.
    @Test func aGroupTakesAtMostItsShareOfConnections() async throws {
        let server = try ScriptedHTTPServer { connection, _ in connection < 3 ? .hold("{}") : .answer("{}") }
        defer { server.stop() }
        let pool = try HTTPPool()
        defer { pool.close() }
        func read(_ path: String, group: String) -> HTTPCall {
            var call = get(server, path, timeout: 30)
            call.group = group
            return call
        }
        let runA = (0..<5).map { index in Task { await pool.send(read("/api/a/\(index)", group: "a")) } }
        try await eventually("the server holds run a's 3 reads", within: 30) { server.holding == 3 }
        try await holds("run a reads on 3 connections at most", during: 0.1) { server.requests == 3 }
        #expect(status(await pool.send(read("/api/b", group: "b"))) == 200)
        server.release()
        for task in runA { #expect(status(await task.value) == 200) }
        #expect(server.requests == 6)
    }

    @Test func chunkedAnswersAndRetryAfter() async throws {
        let server = try ScriptedHTTPServer { _, request in
            request == 0
                ? .raw("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\n[1,\r\n2\r\n2]\r\n0\r\nT: 1\r\n\r\n")
                : .raw("HTTP/1.1 503 Service Unavailable\r\nRetry-After: 2\r\nContent-Length: 0\r\n\r\n")
        }
        defer { server.stop() }
        let pool = try HTTPPool()
        defer { pool.close() }
        guard case .success(let first) = await pool.send(get(server)) else { Issue.record("no answer"); return }
        #expect(String(decoding: first.body, as: UTF8.self) == "[1,2]")
        #expect(first.retryAfter == nil)
        guard case .success(let second) = await pool.send(get(server)) else { Issue.record("no answer"); return }
        #expect(second.status == 503)
        #expect(second.retryAfter == 2)
        #expect(server.accepted == 1)
    }

    @Test func nobodyListening() async throws {
        let pool = try HTTPPool()
        defer { pool.close() }
        let port = TestSocket.freePort()
        let call = HTTPCall(method: "GET", url: HTTPURL(tls: false, host: "127.0.0.1", port: port, path: ""),
                            path: "/", headers: [], body: nil)
        guard case .failure(let failure) = await pool.send(call) else { Issue.record("expected a failure"); return }
        #expect(failure.reason.contains("127.0.0.1:\(port)"))
    }

    /// A call handed over just before the pool closes is failed, not forgotten: the loop thread, just started, may
    /// take the call in the same look at its inbox that tells it to close. `close()` joins the loop, so by its
    /// return every call the pool took has its answer.
    @Test func aCallHandedOverJustBeforeCloseIsFailed() throws {
        let server = try ScriptedHTTPServer { _, _ in .stall }
        defer { server.stop() }
        for round in 0..<20 {
            let pool = try HTTPPool()
            let answers = Locked([String]())
            pool.submit(get(server)) { result in
                let answer = if case .failure(let failure) = result { failure.reason } else { "an answer" }
                answers.withLock { $0.append(answer) }
            }
            pool.close()
            let seen = answers.withLock { $0 }
            #expect(seen == ["the relay is shutting down"], "round \(round)")
        }
    }

    @Test func closingFailsWhatIsWaiting() async throws {
        let server = try ScriptedHTTPServer { _, _ in .stall }
        defer { server.stop() }
        let pool = try HTTPPool()
        let call = get(server)
        let waiting = Task { await pool.send(call) }
        try await eventually("the call is at the server", within: 30) { server.requests == 1 }
        pool.close()
        guard case .failure = await waiting.value else { Issue.record("expected a failure"); return }
        guard case .failure = await pool.send(call) else { Issue.record("expected a failure after close"); return }
    }
}

/// https: the pool's TLS (OpenSSL, ALPN http/1.1 offered, none required) with the test CA, and the host check.
@Suite struct HTTPPoolTLSTests {
    func get(_ url: HTTPURL) -> HTTPCall {
        HTTPCall(method: "GET", url: url, path: "/api/health", headers: [], body: nil, timeoutSeconds: 5)
    }

    @Test func httpsConnectionsAreVerifiedAndKept() async throws {
        let server = try ScriptedHTTPServer(tls: true) { _, request in .answer("{\"n\":\(request)}") }
        defer { server.stop() }
        let pool = try HTTPPool(options: .init(caFile: APNsFixtures.path("ca.pem")))
        defer { pool.close() }
        for index in 0..<3 {
            let result = await pool.send(get(server.url))
            guard case .success(let reply) = result else { Issue.record("call \(index): \(result)"); return }
            #expect(String(decoding: reply.body, as: UTF8.self) == "{\"n\":\(index)}")
        }
        #expect(server.accepted == 1, "\(server.connectionHistory)")
        // By name too: the certificate names localhost.
        var byName = server.url
        byName.host = "localhost"
        guard case .success = await pool.send(get(byName)) else { Issue.record("localhost refused"); return }
    }

    /// A server that accepts TCP and never speaks TLS: the handshake has the connect deadline too.
    @Test func aSilentTLSServerFailsWithinTheConnectTimeout() async throws {
        let server = try ScriptedHTTPServer { _, _ in .stall }
        defer { server.stop() }
        var options = HTTPPool.Options(caFile: APNsFixtures.path("ca.pem"))
        options.connectTimeoutMs = 500
        let pool = try HTTPPool(options: options)
        defer { pool.close() }
        var url = server.url
        url.tls = true
        // The call itself may wait 60 s, so only the connect deadline can fail it with "connect to … timed out"
        // (the call's own deadline says "no connection free within 60 s"). The reason is the check, not a clock:
        // a loaded CI machine resumed this test 3.5 s after the 0.5 s deadline had fired.
        let call = HTTPCall(method: "GET", url: url, path: "/api/health", headers: [], body: nil, timeoutSeconds: 60)
        guard case .failure(let failure) = await pool.send(call) else { Issue.record("expected a failure"); return }
        #expect(failure.reason.contains("connect to \(url.authority) timed out"))
    }

    @Test func untrustedOrMisnamedCertificatesFail() async throws {
        let server = try ScriptedHTTPServer(tls: true) { _, _ in .answer("{}") }
        defer { server.stop() }
        let untrusting = try HTTPPool()
        defer { untrusting.close() }
        guard case .failure(let failure) = await untrusting.send(get(server.url)) else {
            Issue.record("a certificate from an unknown CA was accepted"); return
        }
        #expect(failure.reason.contains("certificate verify failed"))

        // The certificate is for 127.0.0.1 and localhost, not 127.0.0.2.
        let elsewhere = try ScriptedHTTPServer(tls: true, host: "127.0.0.2") { _, _ in .answer("{}") }
        defer { elsewhere.stop() }
        let pool = try HTTPPool(options: .init(caFile: APNsFixtures.path("ca.pem")))
        defer { pool.close() }
        guard case .failure(let misnamed) = await pool.send(get(elsewhere.url)) else {
            Issue.record("a certificate for another address was accepted"); return
        }
        #expect(misnamed.reason.contains("certificate verify failed"))
    }
}
