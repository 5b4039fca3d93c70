/// One notification for one token on one host: headers and the already-encoded JSON payload.
public struct Push: Sendable, Equatable {
    public enum Kind: String, Sendable {
        case alert, liveactivity
    }

    public var kind: Kind
    /// Lowercase hex, as the app reported it.
    public var deviceToken: String
    public var environment: APNsEnvironment
    public var topic: String
    public var priority: Int
    public var collapseID: String?
    /// Unix seconds; nil leaves the `apns-expiration` header out.
    public var expiration: Int64?
    public var payload: String
    /// Why it is sent: the delivery table's row (`DeliveryTable`). A push made outside the outbox (the test push,
    /// `check`'s probe) is `.test`.
    public var purpose: PushPurpose

    public init(kind: Kind, deviceToken: String, environment: APNsEnvironment, topic: String, priority: Int = 10,
                collapseID: String? = nil, expiration: Int64? = nil, payload: String, purpose: PushPurpose = .test) {
        self.kind = kind
        self.deviceToken = deviceToken
        self.environment = environment
        self.topic = topic
        self.priority = priority
        self.collapseID = collapseID
        self.expiration = expiration
        self.payload = payload
        self.purpose = purpose
    }

    /// `:path` of the request (tokens are stored lowercase; an uppercase one is lowered here).
    /// One pass over the token's bytes into one allocation: a fan-out makes one path per phone.
    public var path: String {
        let prefix: StaticString = "/3/device/"
        let token = deviceToken.utf8
        return String(unsafeUninitializedCapacity: prefix.utf8CodeUnitCount + token.count) { buffer in
            let head = UnsafeBufferPointer(start: prefix.utf8Start, count: prefix.utf8CodeUnitCount)
            var end = buffer.initialize(fromContentsOf: head)
            for byte in token {
                buffer[end] = byte >= 0x41 && byte <= 0x5A ? byte + 0x20 : byte
                end += 1
            }
            return end
        }
    }

    /// Whether `other` carries the same message (headers and payload), whatever its token and host: a fan-out
    /// encodes such pushes' headers and body once.
    public func sameMessage(as other: Push) -> Bool {
        kind == other.kind && purpose == other.purpose && priority == other.priority && expiration == other.expiration
            && collapseID == other.collapseID && topic == other.topic && payload == other.payload
    }

    /// The apns-* request headers in a fixed order (pseudo-headers and authorization are added at the edge).
    public var headers: [(name: String, value: String)] {
        var out: [(String, String)] = [
            ("apns-push-type", kind.rawValue), ("apns-topic", topic), ("apns-priority", String(priority)),
        ]
        if let collapseID { out.append(("apns-collapse-id", collapseID)) }
        if let expiration { out.append(("apns-expiration", String(expiration))) }
        out.append(("content-type", "application/json"))
        return out
    }

    /// The same push aimed at the other host (the BadDeviceToken rule).
    public func on(_ environment: APNsEnvironment) -> Push {
        var copy = self
        copy.environment = environment
        return copy
    }
}
