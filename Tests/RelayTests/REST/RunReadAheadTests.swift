import Testing
@testable import Relay
@testable import RelayCore

/// The run read begun as a Paused event is parsed: the announce's gather takes it instead of reading the run
/// again, a 503 or 429 answer to it is retried as the gather's own would be, and only live pauses are read ahead.
@Suite struct RunReadAheadTests {
    static let run = ContextFixtures.response("rest-flow-run-paused-no-input")
    static let runID = run["id"]?.string ?? ""
    static let stateID = run["state"]?["id"]?.string ?? ""
    static let pausedAt = run["state"]?["timestamp"]?.string.flatMap(Timestamp.parse) ?? 0

    /// A socket message for the fixture run's Paused state, `age` seconds after it happened.
    static func paused(age: Double = 0, type: String = "PAUSED") -> SocketMessage {
        .event(["id": .string(stateID), "event": "prefect.flow-run.Paused",
                "occurred": .string(Timestamp.format(SystemClock.unixNow() - age)),
                "resource": ["prefect.resource.id": .string("prefect.flow-run." + runID),
                             "prefect.state-type": .string(type), "prefect.state-name": "Paused"]])
    }

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

        func gather() async -> ContextGatherer.Gathered? {
            await gatherer.gather(runID: RunReadAheadTests.runID, stateID: RunReadAheadTests.stateID,
                                  pausedAt: RunReadAheadTests.pausedAt, flowID: nil, flowName: "fixture-plain",
                                  readHistory: false)
        }
    }

    static func runReads(_ server: ScriptedHTTPServer) -> Int {
        server.requestTexts.count { $0.hasPrefix("GET /api/flow_runs/\(runID) ") }
    }

    @Test func aLivePauseIsReadOnceForItsAnnounce() async throws {
        let server = try ScriptedHTTPServer { _, _ in .answer(Self.run.encoded()) }
        defer { server.stop() }
        let reader = try Reader(server)
        reader.readAhead.consider(Self.paused())
        reader.readAhead.consider(Self.paused())  // the same event again (a replay): still one read
        let gathered = try #require(await reader.gather())
        #expect(gathered.context.run.state?.id == Self.stateID)
        #expect(gathered.movedOn == false)
        #expect(Self.runReads(server) == 1)
        // Taken once: a second take finds nothing and doesn't wait.
        #expect(await reader.readAhead.take(stateID: Self.stateID) == nil)
    }

    /// The read ahead is answered `first`, then the run: how long the gather took, and the run reads made.
    func gather(afterFirstAnswer first: String) async throws -> (seconds: Double, reads: Int) {
        let server = try ScriptedHTTPServer { _, request in request == 0 ? .raw(first) : .answer(Self.run.encoded()) }
        defer { server.stop() }
        let reader = try Reader(server)
        reader.readAhead.consider(Self.paused())
        let started = SystemClock.monotonic()
        let gathered = try #require(await reader.gather())
        #expect(gathered.context.run.state?.id == Self.stateID)
        return (SystemClock.monotonic() - started, Self.runReads(server))
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
        let server = try ScriptedHTTPServer { _, _ in .answer(Self.run.encoded()) }
        defer { server.stop() }
        let reader = try Reader(server)
        reader.readAhead.consider(Self.paused(age: 60))  // history from a backfill: not read ahead
        #expect(await reader.readAhead.take(stateID: Self.stateID) == nil)
        #expect(server.requests == 0)
        _ = try #require(await reader.gather())
        #expect(Self.runReads(server) == 1)
    }

    @Test func onlyLivePausesAreReadAhead() {
        let now = SystemClock.unixNow()
        let live = RunReadAhead.livePause(Self.paused(), now: now)
        #expect(live?.runID == Self.runID)
        #expect(live?.stateID == Self.stateID)
        #expect(RunReadAhead.livePause(Self.paused(age: RunReadAhead.maxEventAge + 1), now: now) == nil)
        #expect(RunReadAhead.livePause(Self.paused(type: "RUNNING"), now: now) == nil)
        #expect(RunReadAhead.livePause(.subscribed, now: now) == nil)
        #expect(RunReadAhead.livePause(.disconnected(reason: "x", retryIn: 1), now: now) == nil)
    }
}
