/// The unsigned half of an APNs provider token (a JWT): `base64url(header).base64url(claims)`.
/// Signing happens at the edge; this only assembles what gets signed and joins the signature on.
public struct ProviderTokenClaims: Sendable, Equatable {
    public var keyID: String
    public var teamID: String
    /// Unix seconds. APNs wants a JSON number here, not a string.
    public var issuedAt: Int64

    public init(keyID: String, teamID: String, issuedAt: Int64) {
        self.keyID = keyID
        self.teamID = teamID
        self.issuedAt = issuedAt
    }

    // No "typ": Apple's own validator has rejected it at times, and APNs does not need it.
    public var headerJSON: JSONValue { ["alg": "ES256", "kid": .string(keyID)] }
    public var claimsJSON: JSONValue { ["iss": .string(teamID), "iat": .int(issuedAt)] }

    /// The JWS signing input.
    public var signingInput: String {
        Base64.encode(headerJSON.encoded(), .url) + "." + Base64.encode(claimsJSON.encoded(), .url)
    }

    /// The complete token from a raw 64-byte r‖s signature.
    public func token(signature: [UInt8]) -> String {
        signingInput + "." + Base64.encode(signature, .url)
    }
}

/// When to re-sign the shared provider token, as Apple asks: at most once per 20 minutes and at least once
/// per 60; we re-sign at 50 to stay clear of the hour. A 403 asks for a fresh token, but only
/// `ExpiredProviderToken` may break the 20-minute floor, since re-signing faster earns
/// `TooManyProviderTokenUpdates`.
public struct ProviderTokenPolicy: Sendable, Equatable {
    public var lifetime: Int64
    public var minimumAge: Int64

    public init(lifetime: Int64 = 50 * 60, minimumAge: Int64 = 20 * 60) {
        self.lifetime = lifetime
        self.minimumAge = minimumAge
    }

    /// Whether a token issued at `issuedAt` (nil: none yet) must be replaced before the next request.
    public func needsNewToken(issuedAt: Int64?, now: Int64) -> Bool {
        guard let issuedAt else { return true }
        // A clock that stepped backwards also earns a new token rather than one dated in the future.
        return now - issuedAt >= lifetime || now < issuedAt
    }

    /// Whether APNs rejecting the token issued at `issuedAt` with `reason` allows signing a new one now.
    public func mayReplace(issuedAt: Int64, after reason: APNsReason, now: Int64) -> Bool {
        guard reason.isProviderTokenError else { return false }
        if reason == .expiredProviderToken { return true }
        return now - issuedAt >= minimumAge || now < issuedAt
    }
}
