/// The four pushes about a waiting run, built from one `WaitingProps` (DESIGN.md §5, `docs/payloads.md`).
///
/// Every payload fits in `PushMessage.maxBytes`: when it would not, the body is cut on a grapheme boundary and
/// ends in "…" (then, only if that is not enough, the title). Ids, the server id and the url are never cut.
public enum Payloads {
    /// The Live Activity content state's `name`: the layout the app registered with expo-widgets.
    public static let activityName = "WaitingRun"
    /// The app's `ActivityAttributes` type, unqualified.
    public static let attributesType = "LiveActivityAttributes"
    /// An ended activity stays on the Lock Screen this long (seconds).
    public static let dismissalDelay: Int64 = 60

    // MARK: - Alerts

    /// The alert a pause is announced with, to a device's `token`.
    public static func alert(_ props: WaitingProps, stateID: String) -> PushMessage {
        fitted(props, metadata: alertMetadata(props, stateID: stateID)) { props in
            alertPayload(props)
        }
    }

    /// The alert sent once more when a pause nears its timeout: the same alert with the body prefixed by
    /// `"Times out in N min. "`. It collapses onto the first alert (same collapse id).
    public static func reminder(_ props: WaitingProps, stateID: String, minutesLeft: Int) -> PushMessage {
        var reminded = props
        reminded.body = "Times out in \(max(0, minutesLeft)) min. " + props.body
        return alert(reminded, stateID: stateID)
    }

    /// Whole minutes left before `timeoutAt` (rounded down, never negative): the N of a reminder.
    public static func minutesLeft(timeoutAt: Int64, now: Int64) -> Int {
        Int(max(0, timeoutAt - now) / 60)
    }

    static func alertMetadata(_ props: WaitingProps, stateID: String) -> PushMessage.Metadata {
        PushMessage.Metadata(pushType: .alert, topicSuffix: "", priority: 10, collapseID: stateID, threadID: props.runId)
    }

    static func alertPayload(_ props: WaitingProps) -> JSONValue {
        [
            "aps": [
                "alert": ["title": .string(props.title), "subtitle": .string(subtitle(props)),
                          "body": .string(props.body)],
                "category": .string(props.category),
                "sound": "default",
                "thread-id": .string(props.runId),
            ],
            "body": ["runId": .string(props.runId), "serverId": .string(props.serverId), "url": .string(props.url)],
        ]
    }

    static func subtitle(_ props: WaitingProps) -> String {
        props.flowName.isEmpty ? props.runName : props.flowName
    }

    // MARK: - Live Activities

    static let activityMetadata = PushMessage.Metadata(pushType: .liveactivity, topicSuffix: ".push-type.liveactivity",
                                                priority: 10, collapseID: nil, threadID: nil)

    /// Starts the "waiting on you" activity, to a device's push-to-start token.
    public static func liveActivityStart(_ props: WaitingProps, now: Int64) -> PushMessage {
        fitted(props, metadata: activityMetadata) { props in
            [
                "aps": [
                    "event": "start",
                    "timestamp": .int(now),
                    "attributes-type": .string(attributesType),
                    "attributes": ["url": .string(props.url)],
                    "content-state": contentState(props),
                    "alert": ["title": .string(props.title), "body": .string(props.body)],
                    "input-push-token": 1,
                ],
            ]
        }
    }

    /// Ends the activity, to its own push token: the same props with `ended` = the new state's name,
    /// dismissed `dismissalDelay` seconds after `now`.
    public static func liveActivityEnd(_ props: WaitingProps, endedState: String, now: Int64) -> PushMessage {
        var ended = props
        ended.ended = AlertText.line(endedState, AlertText.maxSubtitleCharacters) ?? "Ended"
        return fitted(ended, metadata: activityMetadata) { props in
            [
                "aps": [
                    "event": "end",
                    "timestamp": .int(now),
                    "content-state": contentState(props),
                    "dismissal-date": .int(now + dismissalDelay),
                ],
            ]
        }
    }

    static func contentState(_ props: WaitingProps) -> JSONValue {
        ["name": .string(activityName), "props": .string(props.encoded())]
    }

    // MARK: - Fitting

    /// Builds the payload; while it is over `PushMessage.maxBytes`, keeps the longest body (then title) prefix
    /// that fits, found by bisection over whole characters.
    static func fitted(_ props: WaitingProps, metadata: PushMessage.Metadata,
                       build: (WaitingProps) -> JSONValue) -> PushMessage {
        func size(_ candidate: WaitingProps) -> Int { build(candidate).encoded().utf8.count }
        var props = props
        if size(props) <= PushMessage.maxBytes { return PushMessage(payload: build(props), metadata: metadata) }
        props = shortened(props, \.body, fits: { size($0) <= PushMessage.maxBytes })
        if size(props) > PushMessage.maxBytes {
            props = shortened(props, \.title, fits: { size($0) <= PushMessage.maxBytes })
        }
        return PushMessage(payload: build(props), metadata: metadata)
    }

    /// `props` with `field` cut to the longest `prefix + "…"` for which `fits` holds (empty if none does).
    static func shortened(_ props: WaitingProps, _ field: WritableKeyPath<WaitingProps, String>,
                          fits: (WaitingProps) -> Bool) -> WaitingProps {
        let characters = Array(props[keyPath: field])
        func candidate(_ count: Int) -> WaitingProps {
            var copy = props
            copy[keyPath: field] = count == 0 ? "" : String(characters[0..<count]).trimmingSpaces() + "…"
            return copy
        }
        var low = 0  // fits (an empty field is the last resort)
        var high = characters.count - 1  // the largest cut worth trying
        while low < high {
            let middle = (low + high + 1) / 2
            if fits(candidate(middle)) { low = middle } else { high = middle - 1 }
        }
        return candidate(low)
    }
}
