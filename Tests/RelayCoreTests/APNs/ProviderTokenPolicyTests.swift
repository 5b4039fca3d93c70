import Testing
@testable import RelayCore

/// When the relay signs a new provider token. The token itself (signing with the key, reading it back) is
/// RelayTests' `ProviderTokenTests`: it needs OpenSSL and the fake's decoder.
@Suite struct ProviderTokenPolicyTests {
    @Test func policyRefreshesEvery50MinutesAndAtMostEvery20() {
        let policy = ProviderTokenPolicy()
        #expect(policy.needsNewToken(issuedAt: nil, now: 0))
        #expect(!policy.needsNewToken(issuedAt: 1000, now: 1000 + 49 * 60))
        #expect(policy.needsNewToken(issuedAt: 1000, now: 1000 + 50 * 60))
        #expect(policy.needsNewToken(issuedAt: 1000, now: 999))  // clock stepped back
        #expect(!policy.mayReplace(issuedAt: 1000, after: .invalidProviderToken, now: 1000 + 19 * 60))
        #expect(policy.mayReplace(issuedAt: 1000, after: .invalidProviderToken, now: 1000 + 20 * 60))
        #expect(policy.mayReplace(issuedAt: 1000, after: .expiredProviderToken, now: 1001))
        #expect(!policy.mayReplace(issuedAt: 1000, after: .tooManyProviderTokenUpdates, now: 1000 + 3600))
        #expect(!policy.mayReplace(issuedAt: 1000, after: .badDeviceToken, now: 1000 + 3600))
    }
}
