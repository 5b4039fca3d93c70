/// The `reason` string of an APNs error answer (apns.md §3). Reasons Apple adds later are kept as
/// `.unknown(...)` rather than dropped, so logs still show them.
public enum APNsReason: Sendable, Hashable, RawRepresentable, CustomStringConvertible {
    case badCollapseID, badDeviceToken, badExpirationDate, badMessageID, badPriority, badTopic
    case deviceTokenNotForTopic, duplicateHeaders, idleTimeout, invalidPushType, missingDeviceToken
    case missingTopic, payloadEmpty, topicDisallowed
    case badCertificate, badCertificateEnvironment, expiredProviderToken, forbidden, invalidProviderToken
    case missingProviderToken, unrelatedKeyIDInToken, badEnvironmentKeyInToken
    case badPath, methodNotAllowed, expiredToken, unregistered, payloadTooLarge
    case tooManyProviderTokenUpdates, tooManyRequests, internalServerError, serviceUnavailable, shutdown
    case unknown(String)

    private static let table: [(APNsReason, String)] = [
        (.badCollapseID, "BadCollapseId"), (.badDeviceToken, "BadDeviceToken"),
        (.badExpirationDate, "BadExpirationDate"), (.badMessageID, "BadMessageId"), (.badPriority, "BadPriority"),
        (.badTopic, "BadTopic"), (.deviceTokenNotForTopic, "DeviceTokenNotForTopic"),
        (.duplicateHeaders, "DuplicateHeaders"), (.idleTimeout, "IdleTimeout"), (.invalidPushType, "InvalidPushType"),
        (.missingDeviceToken, "MissingDeviceToken"), (.missingTopic, "MissingTopic"), (.payloadEmpty, "PayloadEmpty"),
        (.topicDisallowed, "TopicDisallowed"), (.badCertificate, "BadCertificate"),
        (.badCertificateEnvironment, "BadCertificateEnvironment"), (.expiredProviderToken, "ExpiredProviderToken"),
        (.forbidden, "Forbidden"), (.invalidProviderToken, "InvalidProviderToken"),
        (.missingProviderToken, "MissingProviderToken"), (.unrelatedKeyIDInToken, "UnrelatedKeyIdInToken"),
        (.badEnvironmentKeyInToken, "BadEnvironmentKeyInToken"), (.badPath, "BadPath"),
        (.methodNotAllowed, "MethodNotAllowed"), (.expiredToken, "ExpiredToken"), (.unregistered, "Unregistered"),
        (.payloadTooLarge, "PayloadTooLarge"), (.tooManyProviderTokenUpdates, "TooManyProviderTokenUpdates"),
        (.tooManyRequests, "TooManyRequests"), (.internalServerError, "InternalServerError"),
        (.serviceUnavailable, "ServiceUnavailable"), (.shutdown, "Shutdown"),
    ]

    /// Every reason Apple documents, for tests and for callers that enumerate.
    public static var known: [APNsReason] { table.map(\.0) }

    public init(rawValue: String) {
        self = Self.table.first(where: { $0.1 == rawValue })?.0 ?? .unknown(rawValue)
    }

    public var rawValue: String {
        if case .unknown(let raw) = self { return raw }
        return Self.table.first(where: { $0.0 == self })!.1
    }

    public var description: String { rawValue }

    /// 403 reasons that a freshly signed provider token can cure.
    public var isProviderTokenError: Bool {
        self == .expiredProviderToken || self == .invalidProviderToken || self == .missingProviderToken
    }

    /// The token is dead for this topic: Apple says never retry these.
    public var meansTokenGone: Bool {
        self == .unregistered || self == .expiredToken || self == .deviceTokenNotForTopic
    }
}
