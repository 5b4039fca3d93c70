import Glibc
import RelayCore

/// The one provider token the process shares across both APNs hosts (sharing one token avoids
/// `TooManyProviderTokenUpdates`). Safe from any thread; signing happens under the lock, which also keeps
/// concurrent 403s from re-signing more than once.
final class JWTSigner: Sendable {
    private struct Current {
        var token: String
        var issuedAt: Int64
    }

    private let key: ProviderKey
    private let keyID: String
    private let teamID: String
    private let policy: ProviderTokenPolicy
    private let now: @Sendable () -> Int64
    private let current = Locked<Current?>(nil)

    /// `now` returns unix seconds; tests inject their own clock.
    init(key: ProviderKey, keyID: String, teamID: String, policy: ProviderTokenPolicy = ProviderTokenPolicy(),
         now: @escaping @Sendable () -> Int64 = { Int64(time(nil)) }) {
        self.key = key
        self.keyID = keyID
        self.teamID = teamID
        self.policy = policy
        self.now = now
    }

    /// The token to put after `bearer `, signed anew when the policy says it is too old.
    func token() throws(TLSError) -> String {
        try current.withLock { (current: inout Current?) throws(TLSError) -> String in
            let time = now()
            if let existing = current, !policy.needsNewToken(issuedAt: existing.issuedAt, now: time) {
                return existing.token
            }
            let fresh = try sign(at: time)
            current = fresh
            return fresh.token
        }
    }

    /// After APNs rejected `rejected` with `reason`: a token worth retrying with, or nil when the policy
    /// forbids signing again so soon. If another request already replaced that token, the newer one is
    /// returned with `isNew` false.
    func renew(rejected: String, reason: APNsReason) -> (token: String, isNew: Bool)? {
        current.withLock { (current: inout Current?) -> (token: String, isNew: Bool)? in
            let time = now()
            if let existing = current, existing.token != rejected { return (existing.token, false) }
            guard let existing = current, policy.mayReplace(issuedAt: existing.issuedAt, after: reason, now: time)
            else { return nil }
            guard let fresh = try? sign(at: time) else { return nil }
            current = fresh
            return (fresh.token, true)
        }
    }

    private func sign(at time: Int64) throws(TLSError) -> Current {
        let claims = ProviderTokenClaims(keyID: keyID, teamID: teamID, issuedAt: time)
        let signature = try key.sign(Array(claims.signingInput.utf8))
        return Current(token: claims.token(signature: signature), issuedAt: time)
    }
}
