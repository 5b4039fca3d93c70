/// The `reason` string of an APNs error answer (Apple: "Handling notification responses from APNs").
/// Reasons Apple adds later are kept as `.unknown(...)` rather than dropped, so logs still show them.
public enum APNsReason: Sendable, Hashable, RawRepresentable, CustomStringConvertible {
    case badCollapseID, badDeviceToken, badExpirationDate, badMessageID, badPriority, badTopic
    case deviceTokenNotForTopic, duplicateHeaders, idleTimeout, invalidPushType, missingDeviceToken
    case missingTopic, payloadEmpty, topicDisallowed
    case badCertificate, badCertificateEnvironment, expiredProviderToken, forbidden, invalidProviderToken
    case missingProviderToken, unrelatedKeyIDInToken, badEnvironmentKeyInToken
    case badPath, methodNotAllowed, expiredToken, unregistered, payloadTooLarge
    case tooManyProviderTokenUpdates, tooManyRequests, internalServerError, serviceUnavailable, shutdown
    case unknown(String)

    /// Every reason Apple documents, for tests and for callers that enumerate.
    public static let known: [APNsReason] = [
        .badCollapseID,
        .badDeviceToken,
        .badExpirationDate,
        .badMessageID,
        .badPriority,
        .badTopic,
        .deviceTokenNotForTopic,
        .duplicateHeaders,
        .idleTimeout,
        .invalidPushType,
        .missingDeviceToken,
        .missingTopic,
        .payloadEmpty,
        .topicDisallowed,
        .badCertificate,
        .badCertificateEnvironment,
        .expiredProviderToken,
        .forbidden,
        .invalidProviderToken,
        .missingProviderToken,
        .unrelatedKeyIDInToken,
        .badEnvironmentKeyInToken,
        .badPath,
        .methodNotAllowed,
        .expiredToken,
        .unregistered,
        .payloadTooLarge,
        .tooManyProviderTokenUpdates,
        .tooManyRequests,
        .internalServerError,
        .serviceUnavailable,
        .shutdown,
    ]

    private static let byName: [String: APNsReason] = Dictionary(uniqueKeysWithValues: known.map { ($0.rawValue, $0) })

    public init(rawValue: String) {
        self = Self.byName[rawValue] ?? .unknown(rawValue)
    }

    // A switch, not a table lookup: RawRepresentable's default == compares rawValue, so using == here recurses.
    public var rawValue: String {
        switch self {
        case .badCollapseID: return "BadCollapseId"
        case .badDeviceToken: return "BadDeviceToken"
        case .badExpirationDate: return "BadExpirationDate"
        case .badMessageID: return "BadMessageId"
        case .badPriority: return "BadPriority"
        case .badTopic: return "BadTopic"
        case .deviceTokenNotForTopic: return "DeviceTokenNotForTopic"
        case .duplicateHeaders: return "DuplicateHeaders"
        case .idleTimeout: return "IdleTimeout"
        case .invalidPushType: return "InvalidPushType"
        case .missingDeviceToken: return "MissingDeviceToken"
        case .missingTopic: return "MissingTopic"
        case .payloadEmpty: return "PayloadEmpty"
        case .topicDisallowed: return "TopicDisallowed"
        case .badCertificate: return "BadCertificate"
        case .badCertificateEnvironment: return "BadCertificateEnvironment"
        case .expiredProviderToken: return "ExpiredProviderToken"
        case .forbidden: return "Forbidden"
        case .invalidProviderToken: return "InvalidProviderToken"
        case .missingProviderToken: return "MissingProviderToken"
        case .unrelatedKeyIDInToken: return "UnrelatedKeyIdInToken"
        case .badEnvironmentKeyInToken: return "BadEnvironmentKeyInToken"
        case .badPath: return "BadPath"
        case .methodNotAllowed: return "MethodNotAllowed"
        case .expiredToken: return "ExpiredToken"
        case .unregistered: return "Unregistered"
        case .payloadTooLarge: return "PayloadTooLarge"
        case .tooManyProviderTokenUpdates: return "TooManyProviderTokenUpdates"
        case .tooManyRequests: return "TooManyRequests"
        case .internalServerError: return "InternalServerError"
        case .serviceUnavailable: return "ServiceUnavailable"
        case .shutdown: return "Shutdown"
        case .unknown(let raw): return raw
        }
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
