/// Which APNs host a token belongs to: the app's `aps-environment`.
public enum APNsEnvironment: String, Sendable, Equatable, CaseIterable {
    case development, production

    public var other: APNsEnvironment { self == .development ? .production : .development }
}

/// A phone as registered through `POST /devices` (README "API"): validated, not yet stored.
public struct DeviceRegistration: Sendable, Equatable {
    public var id: String
    public var token: String
    public var startToken: String?
    public var environment: APNsEnvironment
    public var serverID: String

    public init(id: String, token: String, startToken: String?, environment: APNsEnvironment, serverID: String) {
        self.id = id
        self.token = token
        self.startToken = startToken
        self.environment = environment
        self.serverID = serverID
    }
}

/// A stored phone: the registration plus when it was first and last seen (unix seconds).
public struct Device: Sendable, Equatable {
    public var id: String
    public var token: String
    public var startToken: String?
    public var environment: APNsEnvironment
    public var serverID: String
    public var createdAt: Int64
    public var updatedAt: Int64

    public init(id: String, token: String, startToken: String?, environment: APNsEnvironment, serverID: String,
                createdAt: Int64, updatedAt: Int64) {
        self.id = id
        self.token = token
        self.startToken = startToken
        self.environment = environment
        self.serverID = serverID
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }

    /// The JSON the API answers with: the registration's field names, optional fields omitted.
    public var json: JSONValue {
        var members: [String: JSONValue] = [
            "id": .string(id), "token": .string(token), "environment": .string(environment.rawValue),
            "server_id": .string(serverID), "created_at": .int(createdAt), "updated_at": .int(updatedAt),
        ]
        if let startToken { members["start_token"] = .string(startToken) }
        return .object(members)
    }
}

/// One pause as the store keeps it (table `pauses`): keyed by the PAUSED state's id. Times are unix seconds.
public struct PauseRecord: Sendable, Equatable {
    public var stateID: String
    public var runID: String
    public var stateName: String
    public var pausedAt: Int64
    public var timeoutAt: Int64?
    public var announcedAt: Int64?
    public var remindedAt: Int64?
    public var endedAt: Int64?
    public var endedState: String?

    public init(stateID: String, runID: String, stateName: String, pausedAt: Int64, timeoutAt: Int64? = nil,
                announcedAt: Int64? = nil, remindedAt: Int64? = nil, endedAt: Int64? = nil, endedState: String? = nil) {
        self.stateID = stateID
        self.runID = runID
        self.stateName = stateName
        self.pausedAt = pausedAt
        self.timeoutAt = timeoutAt
        self.announcedAt = announcedAt
        self.remindedAt = remindedAt
        self.endedAt = endedAt
        self.endedState = endedState
    }

    public var isWaiting: Bool { endedAt == nil }
}
