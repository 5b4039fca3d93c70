import Testing
@testable import RelayCore

/// The start-up bound of /health (`HEALTH_STARTUP_SECONDS`): a relay that has never subscribed to Prefect's events
/// socket since it started is not ready once the bound has passed, though the grace for a dropped socket is longer.
/// A wrong PREFECT_API_URL must fail a rollout's readiness, not pass it for five minutes.
@Suite struct HealthStartupTests {
    let bounds = HealthBounds(grace: 300, startup: 60)

    /// Started at 1,000; the events socket down since then, never subscribed.
    func neverSubscribed(at seconds: Double) -> HealthSnapshot {
        var s = HealthSnapshot(now: 1_000 + seconds, socketDownSince: 1_000)
        s.neverSubscribedSince = 1_000
        return s
    }

    @Test func neverSubscribedIsJudgedAsBeforeUntilTheBound() {
        #expect(HealthVerdict(neverSubscribed(at: 0), bounds: bounds).ok)
        #expect(HealthVerdict(neverSubscribed(at: 59), bounds: bounds).ok)
    }

    @Test func neverSubscribedPastTheBoundIs503AndSaysWhatToCheck() {
        let verdict = HealthVerdict(neverSubscribed(at: 61), bounds: bounds)
        #expect(!verdict.ok && verdict.status == 503)
        #expect(verdict.problems.map(\.check) == [.events])
        let reason = verdict.problems[0].reason
        #expect(reason.hasPrefix("never subscribed to Prefect's events socket in the 61 s since start (bound 60 s)"))
        for named in ["PREFECT_API_URL", "PREFECT_API_AUTH_STRING", "PREFECT_API_KEY"] { #expect(reason.contains(named)) }
        #expect(!HealthVerdict(neverSubscribed(at: 60), bounds: bounds).ok)  // the bound itself counts, as the others
    }

    @Test func pastTheGraceItIsStillOneProblem() {
        let verdict = HealthVerdict(neverSubscribed(at: 400), bounds: bounds)
        #expect(verdict.problems.count == 1 && verdict.problems[0].reason.hasPrefix("never subscribed"))
    }

    @Test func aShorterGraceStillCountsBeforeTheStartupBound() {
        // As before: the socket has been down since start for longer than the grace.
        let verdict = HealthVerdict(neverSubscribed(at: 5), bounds: HealthBounds(grace: 3, startup: 60))
        #expect(verdict.problems.map(\.reason) == ["events socket down for 5 s (bound 3 s)"])
    }

    @Test func subscribedOnceThenDownKeepsTheGraceRule() {
        // Subscribed at some point, down since 1,010: the start-up bound no longer applies, only the grace.
        let once = HealthSnapshot(now: 1_000 + 200, socketDownSince: 1_010)
        #expect(HealthVerdict(once, bounds: bounds).ok)
        let long = HealthSnapshot(now: 1_010 + 300, socketDownSince: 1_010)
        #expect(HealthVerdict(long, bounds: bounds).problems.map(\.reason) == ["events socket down for 300 s (bound 300 s)"])
        let up = HealthSnapshot(now: 5_000, socketDownSince: nil)
        #expect(HealthVerdict(up, bounds: bounds).ok)
    }

    @Test func aRefusedCredentialIsNamedInsteadOfTheSocket() {
        var s = neverSubscribed(at: 120)
        s.credentialRefused = true
        #expect(HealthVerdict(s, bounds: bounds).problems.map(\.check) == [.credential])
    }

    @Test func configReadsTheStartupBound() throws {
        let base = ["PREFECT_API_URL": "http://127.0.0.1:4200/api"]
        #expect(try Config(environment: base).healthStartup == 60)
        #expect(HealthBounds().startup == 60)
        #expect(try Config(environment: base.merging(["HEALTH_STARTUP_SECONDS": "5"]) { $1 }).healthStartup == 5)
        #expect(try Config(environment: base.merging(["HEALTH_STARTUP_SECONDS": "86400"]) { $1 }).healthStartup == 86_400)
        for value in ["4", "86401", "0", "-1", "1m", "6.5"] {
            #expect(throws: ConfigError.self, "HEALTH_STARTUP_SECONDS=\(value)") {
                _ = try Config(environment: base.merging(["HEALTH_STARTUP_SECONDS": value]) { $1 })
            }
        }
        #expect(Settings.all.contains { $0.name == "HEALTH_STARTUP_SECONDS" && $0.defaultValue == "60" })
    }
}
