import Synchronization
import Testing
@testable import Relay
@testable import RelayCore

@Suite struct AuthorizerTests {
    final class Script: Sendable {
        let answers = Mutex<[Result<Int, HTTPFailure>]>([])
        let seen = Mutex<[String?]>([])
        let clock = Mutex<Double>(1_000)
    }

    func authorizer(_ script: Script) -> Authorizer {
        Authorizer(check: { header in
            script.seen.withLock { $0.append(header) }
            return script.answers.withLock { $0.isEmpty ? .success(200) : $0.removeFirst() }
        }, now: { script.clock.withLock { $0 } })
    }

    @Test func cachesAnAdmissionForFiveMinutes() async {
        let script = Script()
        let auth = authorizer(script)
        #expect(await auth.verdict(for: "Basic a") == .admitted)
        #expect(await auth.verdict(for: "Basic a") == .admitted)
        #expect(script.seen.withLock { $0.count } == 1)
        script.clock.withLock { $0 += 299 }
        #expect(await auth.verdict(for: "Basic a") == .admitted)
        #expect(script.seen.withLock { $0.count } == 1)
        script.clock.withLock { $0 += 2 }
        #expect(await auth.verdict(for: "Basic a") == .admitted)
        #expect(script.seen.withLock { $0.count } == 2)
    }

    @Test func keyedByHeader() async {
        let script = Script()
        script.answers.withLock { $0 = [.success(200), .success(401)] }
        let auth = authorizer(script)
        #expect(await auth.verdict(for: "Basic good") == .admitted)
        #expect(await auth.verdict(for: "Basic bad") == .refused)
        #expect(await auth.verdict(for: "Basic bad") == .refused)  // cached refusal
        #expect(await auth.verdict(for: "Basic good") == .admitted)
        #expect(script.seen.withLock { $0 } == ["Basic good", "Basic bad"])
    }

    @Test func unreachableIsNotCached() async {
        let script = Script()
        script.answers.withLock { $0 = [.failure(HTTPFailure(.connectFailed, "refused")), .success(500), .success(200)] }
        let auth = authorizer(script)
        guard case .unavailable = await auth.verdict(for: "x") else { Issue.record("expected 503"); return }
        guard case .unavailable = await auth.verdict(for: "x") else { Issue.record("expected 503"); return }
        #expect(await auth.verdict(for: "x") == .admitted)
        #expect(script.seen.withLock { $0.count } == 3)
    }

    @Test func hashNeverHoldsTheHeader() {
        let h = Authorizer.hash("Basic YWRtaW46cGFzcw==")
        #expect(h.count == 64)
        #expect(!h.contains("YWRtaW46cGFzcw"))
        #expect(Authorizer.hash("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test func boundedCache() {
        var cache = AuthCache(capacity: 3)
        for i in 0..<10 { cache.store("k\(i)", admitted: true, now: Double(i)) }
        #expect(cache.count == 3)
        #expect(cache.lookup("k9", now: 10) == true)
        #expect(cache.lookup("k0", now: 10) == nil)
    }

    // MARK: - Hardening (issue 11)

    /// A check that waits until released, counting calls.
    final class Gate: Sendable {
        let calls = Mutex<Int>(0)
        let open = Atomic<Bool>(false)
    }

    func gated(_ gate: Gate, status: Int = 401) -> Authorizer {
        Authorizer(check: { _ in
            gate.calls.withLock { $0 += 1 }
            await poll(within: 30, every: 0.005) { gate.open.load(ordering: .acquiring) }
            return .success(status)
        })
    }

    @Test func oneCheckPerCredentialAtATime() async {
        let gate = Gate()
        let auth = gated(gate, status: 200)
        await withTaskGroup(of: Authorizer.Verdict.self) { group in
            for _ in 0..<50 { group.addTask { await auth.verdict(for: "Basic same") } }
            // The first asks Prefect; the other 49 wait on its answer rather than asking too.
            // Recorded, not thrown: the gate must open either way, or the group would wait out every check.
            await #expect(throws: Never.self) {
                try await eventually("the first check started", within: 30) { gate.calls.withLock { $0 } == 1 }
                try await holds("one check for one credential", during: 0.1) { gate.calls.withLock { $0 } == 1 }
            }
            gate.open.store(true, ordering: .releasing)
            for await verdict in group { #expect(verdict == .admitted) }
        }
        #expect(gate.calls.withLock { $0 } == 1)
        // Done, and remembered: the next request with it asks Prefect nothing.
        #expect(await auth.verdict(for: "Basic same") == .admitted)
        #expect(gate.calls.withLock { $0 } == 1)
    }

    @Test func concurrentChecksAreCapped() async {
        let gate = Gate()
        let auth = gated(gate)
        let verdicts = await withTaskGroup(of: Authorizer.Verdict.self, returning: [Authorizer.Verdict].self) { group in
            for i in 0..<100 { group.addTask { await auth.verdict(for: "Basic junk\(i)") } }
            // Recorded, not thrown, as above.
            await #expect(throws: Never.self) {
                try await eventually("the cap's checks started", within: 30) {
                    gate.calls.withLock { $0 } == Authorizer.maxConcurrentChecks
                }
                try await holds("no check past the cap", during: 0.2) {
                    gate.calls.withLock { $0 } <= Authorizer.maxConcurrentChecks
                }
            }
            gate.open.store(true, ordering: .releasing)
            var all: [Authorizer.Verdict] = []
            for await verdict in group { all.append(verdict) }
            return all
        }
        #expect(gate.calls.withLock { $0 } == Authorizer.maxConcurrentChecks)
        #expect(verdicts.filter { $0 == .busy }.count == 100 - Authorizer.maxConcurrentChecks)
        #expect(verdicts.filter { $0 == .refused }.count == Authorizer.maxConcurrentChecks)
    }

    @Test(arguments: ["Basic a\u{1}b", "Basic \r\nX-Evil: 1", "Basic é", String(repeating: "A", count: 5000), "",
                      " Basic x", "Bas(ic x", "Basic \u{7F}"])
    func malformedNeverReachesPrefect(_ header: String) async {
        let script = Script()
        let auth = authorizer(script)
        guard case .malformed = await auth.verdict(for: header) else { Issue.record("\(header.prefix(20))"); return }
        #expect(script.seen.withLock { $0.isEmpty })
    }

    @Test func refusalsAreRememberedBriefly() async {
        let script = Script()
        script.answers.withLock { $0 = [.success(401), .success(401)] }
        let auth = authorizer(script)
        #expect(await auth.verdict(for: "Basic bad") == .refused)
        script.clock.withLock { $0 += Authorizer.refusalLifetime - 1 }
        #expect(await auth.verdict(for: "Basic bad") == .refused)
        #expect(script.seen.withLock { $0.count } == 1)
        script.clock.withLock { $0 += 2 }
        #expect(await auth.verdict(for: "Basic bad") == .refused)
        #expect(script.seen.withLock { $0.count } == 2)
    }

    /// 5,000 refused junk credentials can't push an admitted one out of the cache.
    @Test func junkCannotEvictAGoodEntry() async {
        let script = Script()
        script.answers.withLock { $0 = [.success(200)] + Array(repeating: .success(401), count: 5000) }
        let auth = authorizer(script)
        #expect(await auth.verdict(for: "Basic good") == .admitted)
        for i in 0..<5000 { _ = await auth.verdict(for: "Basic junk\(i)") }
        #expect(await auth.verdict(for: "Basic good") == .admitted)
        #expect(script.seen.withLock { $0.count } == 5001)
    }

    @Test func credentialShape() {
        #expect(CredentialShape.problem("Basic YWRtaW46cGFzcw==") == nil)
        #expect(CredentialShape.problem("Bearer abc.def-ghi") == nil)
        #expect(CredentialShape.problem("x") == nil)
        #expect(CredentialShape.problem("Basic \u{0}") != nil)
        #expect(CredentialShape.problem(String(repeating: "a", count: 4097)) != nil)
    }
}
