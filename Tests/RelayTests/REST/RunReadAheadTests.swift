import Testing
@testable import Relay
@testable import RelayCore

/// The reads begun as a Paused event is parsed: the announce's gather takes them instead of reading again, the
/// input rows' read follows the run's answer on the pool's thread, a 503 or 429 answer is retried as the gather's
/// own would be, and only live pauses are read ahead.
@Suite struct RunReadAheadTests {
    /// A captured paused run, and the Paused event for it.
    struct Pause {
        let run: JSONValue
        var runID: String { run["id"]?.string ?? "" }
        var stateID: String { run["state"]?["id"]?.string ?? "" }
        var pausedAt: Double { run["state"]?["timestamp"]?.string.flatMap(Timestamp.parse) ?? 0 }

        init(_ fixture: String) { run = ContextFixtures.response(fixture) }

        /// The socket message for its Paused state, `age` seconds after it happened.
        func event(age: Double = 0, type: String = "PAUSED") -> SocketMessage {
            .event(["id": .string(stateID), "event": "prefect.flow-run.Paused",
                    "occurred": .string(Timestamp.format(SystemClock.unixNow() - age)),
                    "resource": ["prefect.resource.id": .string("prefect.flow-run." + runID),
                                 "prefect.state-type": .string(type), "prefect.state-name": "Paused"]])
        }

        func runReads(_ server: ScriptedHTTPServer) -> Int {
            server.requestTexts.count { $0.hasPrefix("GET /api/flow_runs/\(runID) ") }
        }
    }

    static let plain = Pause("rest-flow-run-paused-no-input")
    static let withInput = Pause("rest-flow-run-paused-with-input")
    static let rows = ContextFixtures.response("rest-input-filter-one-field")

    /// A pool, a client and a read-ahead on `server`, with a gatherer that takes from it.
    final class Reader: @unchecked Sendable {
        let http: HTTPPool
        let readAhead: RunReadAhead
        let gatherer: ContextGatherer

        init(_ server: ScriptedHTTPServer) throws {
            let config = try Config(environment: ["PREFECT_API_URL": "http://127.0.0.1:\(server.port)/api"])
            http = try HTTPPool()
            let prefect = PrefectClient(config: config, http: http)
            readAhead = RunReadAhead(prefect: prefect)
            gatherer = ContextGatherer(prefect: prefect, readAhead: readAhead)
        }

        deinit { http.close() }

        func gather(_ pause: Pause) async -> ContextGatherer.Gathered? {
            await gatherer.gather(runID: pause.runID, stateID: pause.stateID, pausedAt: pause.pausedAt, flowID: nil,
                                  flowName: "fixture", readHistory: false, onRun: { _ in })?.gathered
        }
    }

    @Test func aLivePauseIsReadOnceForItsAnnounce() async throws {
        let pause = Self.plain
        let server = try ScriptedHTTPServer { _, _ in .answer(pause.run.encoded()) }
        defer { server.stop() }
        let reader = try Reader(server)
        reader.readAhead.consider(pause.event())
        reader.readAhead.consider(pause.event())  // the same event again (a replay): still one read
        let gathered = try #require(await reader.gather(pause))
        #expect(gathered.context.run.state?.id == pause.stateID)
        #expect(gathered.movedOn == false)
        #expect(pause.runReads(server) == 1)
        #expect(server.requests == 1)
        // Taken once: a second take finds nothing and doesn't wait.
        #expect(await reader.readAhead.take(stateID: pause.stateID) == nil)
    }

    /// The pool's thread reads the run's answer to find its input rows; the gather takes that run rather than
    /// reading the answer again. An answer that isn't a 200 comes raw, for the gather's retries.
    @Test func theRunsAnswerIsTakenParsed() async throws {
        let pause = Self.plain
        let server = try ScriptedHTTPServer { _, request in
            request == 0 ? .answer(pause.run.encoded()) : .raw("HTTP/1.1 503 Service Unavailable\r\ncontent-length: 2\r\n\r\n{}")
        }
        defer { server.stop() }
        let reader = try Reader(server)
        reader.readAhead.consider(pause.event())
        let taken = try #require(await reader.readAhead.take(stateID: pause.stateID))
        #expect(taken.run?.id == pause.runID)
        #expect(taken.run?.state?.id == pause.stateID)

        let later = Pause("rest-flow-run-suspended")
        reader.readAhead.consider(later.event())
        let refused = try #require(await reader.readAhead.take(stateID: later.stateID))
        #expect(refused.run == nil)
        guard case .success(let reply) = refused.answer else { Issue.record("no answer"); return }
        #expect(reply.status == 503)
    }

    @Test func theInputRowsAreReadOnTheRunsAnswer() async throws {
        let pause = Self.withInput
        let server = try ScriptedHTTPServer { _, request in
            .answer(request == 0 ? pause.run.encoded() : Self.rows.encoded())
        }
        defer { server.stop() }
        let reader = try Reader(server)
        reader.readAhead.consider(pause.event())
        // Both reads go out before anyone gathers: the rows' read follows the run's answer on the pool's thread.
        try waitUntil("the run and its input rows read", timeout: 10) { server.requests == 2 }
        #expect(server.requestTexts.last?.hasPrefix("POST /api/flow_runs/\(pause.runID)/input/filter ") == true)
        #expect(server.requestTexts.last?.contains("\"prefix\":\"paused-1-\"") == true)
        let gathered = try #require(await reader.gather(pause))
        #expect(Set(gathered.context.inputRows.map(\.key)) == ["paused-1-schema", "paused-1-description"])
        #expect(server.requests == 2)
    }

    /// The read ahead is answered `first`, then the run: how long the gather took, and the run reads made.
    func gather(afterFirstAnswer first: String) async throws -> (seconds: Double, reads: Int) {
        let pause = Self.plain
        let server = try ScriptedHTTPServer { _, request in request == 0 ? .raw(first) : .answer(pause.run.encoded()) }
        defer { server.stop() }
        let reader = try Reader(server)
        reader.readAhead.consider(pause.event())
        let started = SystemClock.monotonic()
        let gathered = try #require(await reader.gather(pause))
        #expect(gathered.context.run.state?.id == pause.stateID)
        return (SystemClock.monotonic() - started, pause.runReads(server))
    }

    @Test func aFailedReadAheadIsReadAgainWithRetries() async throws {
        let (_, reads) = try await gather(afterFirstAnswer: "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 2\r\n\r\n{}")
        #expect(reads == 2)
    }

    @Test func aRateLimitedReadAheadIsWaitedOut() async throws {
        let (seconds, reads) = try await gather(
            afterFirstAnswer: "HTTP/1.1 429 Too Many Requests\r\nretry-after: 1\r\ncontent-length: 2\r\n\r\n{}")
        #expect(seconds >= 0.9)  // Retry-After: 1, not the 0.2 s backoff
        #expect(reads == 2)
    }

    @Test func withoutAReadAheadTheGatherReadsTheRun() async throws {
        let pause = Self.plain
        let server = try ScriptedHTTPServer { _, _ in .answer(pause.run.encoded()) }
        defer { server.stop() }
        let reader = try Reader(server)
        reader.readAhead.consider(pause.event(age: 60))  // history from a backfill: not read ahead
        #expect(await reader.readAhead.take(stateID: pause.stateID) == nil)
        #expect(server.requests == 0)
        _ = try #require(await reader.gather(pause))
        #expect(pause.runReads(server) == 1)
    }

    @Test func onlyLivePausesAreReadAhead() {
        let pause = Self.plain
        let now = SystemClock.unixNow()
        let live = RunReadAhead.livePause(pause.event(), now: now)
        #expect(live?.runID == pause.runID)
        #expect(live?.stateID == pause.stateID)
        #expect(RunReadAhead.livePause(pause.event(age: RunReadAhead.maxEventAge + 1), now: now) == nil)
        #expect(RunReadAhead.livePause(pause.event(type: "RUNNING"), now: now) == nil)
        #expect(RunReadAhead.livePause(.subscribed, now: now) == nil)
        #expect(RunReadAhead.livePause(.disconnected(.lost, reason: "x", retryIn: 1), now: now) == nil)
    }
}
