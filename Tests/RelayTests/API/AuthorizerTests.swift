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
        script.answers.withLock { $0 = [.failure(HTTPFailure(reason: "refused")), .success(500), .success(200)] }
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
}
