/// One APNs request's content: the JSON body and the headers that go with it (`docs/payloads.md`).
public struct PushMessage: Sendable, Equatable {
    /// How APNs is told what the body is.
    public struct Metadata: Sendable, Equatable {
        /// `apns-push-type`.
        public var pushType: Push.Kind
        /// Appended to `APNS_TOPIC` for `apns-topic`: empty for alerts, `.push-type.liveactivity` for activities.
        public var topicSuffix: String
        /// `apns-priority`.
        public var priority: Int
        /// `apns-collapse-id`: the pause's state id for alerts (a reminder replaces its alert); nil otherwise.
        public var collapseID: String?
        /// The `aps.thread-id` the alert groups under (the run id); nil for activities.
        public var threadID: String?

        public init(pushType: Push.Kind, topicSuffix: String, priority: Int, collapseID: String?, threadID: String?) {
            self.pushType = pushType
            self.topicSuffix = topicSuffix
            self.priority = priority
            self.collapseID = collapseID
            self.threadID = threadID
        }

        /// `apns-topic` for the app whose bundle id is `bundleTopic` (`Config.apnsTopic`).
        public func topic(_ bundleTopic: String) -> String { bundleTopic + topicSuffix }
    }

    /// The payload as a value (for tests and logs).
    public var payload: JSONValue
    /// The payload as sent: compact JSON, at most `PushMessage.maxBytes` UTF-8 bytes.
    public var json: String
    public var metadata: Metadata

    public init(payload: JSONValue, metadata: Metadata) {
        self.init(payload: payload, json: payload.encoded(), metadata: metadata)
    }

    /// `json` must be `payload.encoded()`: for a caller that has just encoded it (to measure it).
    init(payload: JSONValue, json: String, metadata: Metadata) {
        self.payload = payload
        self.json = json
        self.metadata = metadata
    }

    /// APNs refuses bigger payloads (`PayloadTooLarge`) for alerts and Live Activities alike.
    public static let maxBytes = 4096
}
