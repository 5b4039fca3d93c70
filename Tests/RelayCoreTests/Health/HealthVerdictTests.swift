import Testing
@testable import RelayCore

/// The /health verdict from snapshots, without a relay: each dependency's bound, and what does not count.
@Suite struct HealthVerdictTests {
    let bounds = HealthBounds(grace: 300)

    func snapshot(at now: Double = 1_000, downSince: Double? = nil) -> HealthSnapshot {
        HealthSnapshot(now: now, socketDownSince: downSince)
    }

    @Test func subscribedAndQuietIsOK() {
        let verdict = HealthVerdict(snapshot(), bounds: bounds)
        #expect(verdict.ok && verdict.status == 200 && verdict.problems.isEmpty)
    }

    @Test func socketDownCountsOnlyPastTheBound() {
        #expect(HealthVerdict(snapshot(at: 1_299, downSince: 1_000), bounds: bounds).ok)
        let verdict = HealthVerdict(snapshot(at: 1_300, downSince: 1_000), bounds: bounds)
        #expect(!verdict.ok && verdict.status == 503)
        #expect(verdict.failing(.events))
        #expect(verdict.problems.first?.reason == "events socket down for 300 s (bound 300 s)")
    }

    @Test func refusedCredentialIsImmediateAndNamedOnce() {
        var s = snapshot(at: 5_000, downSince: 1_000)  // the socket is down too, because of the credential
        s.credentialRefused = true
        let verdict = HealthVerdict(s, bounds: bounds)
        #expect(verdict.problems.map(\.check) == [.credential])
        #expect(verdict.problems[0].reason.contains("PREFECT_API_KEY"))
    }

    @Test func storeFailuresNeedTheirOwnShorterBound() {
        #expect(bounds.storeFailing == 30)
        #expect(HealthBounds(grace: 2).storeFailing == 2)
        var s = snapshot(at: 1_029)
        s.store.failed(at: 1_000, error: "database is locked")
        #expect(HealthVerdict(s, bounds: bounds).ok)  // a backup's brief lock
        s.now = 1_030
        let verdict = HealthVerdict(s, bounds: bounds)
        #expect(verdict.failing(.store))
        #expect(verdict.problems[0].reason == "store writes failing for 30 s: database is locked")
        s.store.succeeded()
        #expect(HealthVerdict(s, bounds: bounds).ok)
    }

    @Test func lostStoreIsImmediate() {
        var s = snapshot()
        s.storeLost = true
        #expect(HealthVerdict(s, bounds: bounds).failing(.store))
    }

    @Test func apnsCountsOnlyWhenConfiguredAndStillFailing() {
        var s = snapshot(at: 2_000)
        var streak = FailureStreak()
        streak.failed(at: 1_600, error: "connection refused")
        streak.failed(at: 1_950, error: "connection refused")
        s.apns = ["api.push.apple.com": streak]
        #expect(HealthVerdict(s, bounds: bounds).ok)  // no key: APNs is not this relay's job
        s.apnsConfigured = true
        let verdict = HealthVerdict(s, bounds: bounds)
        #expect(verdict.failing(.apns))
        #expect(verdict.problems[0].reason == "APNs api.push.apple.com unreachable for 350 s: connection refused")
        s.now = 2_300  // nothing tried for a bound: an idle relay's old failure is no outage
        #expect(HealthVerdict(s, bounds: bounds).ok)
    }

    @Test func oneOldApnsFailureNeverAgesIntoAnOutage() {
        var s = snapshot(at: 10_000)
        s.apnsConfigured = true
        var streak = FailureStreak()
        streak.failed(at: 9_990, error: "timeout")
        s.apns = ["api.sandbox.push.apple.com": streak]
        #expect(HealthVerdict(s, bounds: bounds).ok)
        #expect(streak.span == 0)
    }

    @Test func everyProblemIsListed() {
        var s = snapshot(at: 1_000, downSince: 0)
        s.storeLost = true
        s.apnsConfigured = true
        var streak = FailureStreak()
        streak.failed(at: 0, error: "x")
        streak.failed(at: 999, error: "y")
        s.apns = ["h": streak]
        #expect(HealthVerdict(s, bounds: bounds).problems.map(\.check) == [.store, .events, .apns])
    }

    @Test func streakKeepsItsFirstFailure() {
        var streak = FailureStreak()
        #expect(!streak.isFailing)
        streak.failed(at: 5, error: "a")
        streak.failed(at: 9, error: String(repeating: "b", count: 500))
        #expect(streak.since == 5 && streak.latest == 9 && streak.count == 2 && streak.span == 4)
        #expect(streak.lastError.count == 200)
        streak.succeeded()
        #expect(streak == FailureStreak())
    }
}
