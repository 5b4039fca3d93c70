/// The five pushes about a waiting run, built from one `WaitingProps` (`docs/payloads.md`).
///
/// Every payload fits in `PushMessage.maxBytes`: when it would not, the free-text fields (body, run and flow
/// names, title, end state) are cut on grapheme boundaries and end in "…". Ids, the server id and the url are never
/// cut.
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
                // Through Focus and the summary where the app has the Time Sensitive capability; Apple treats it as
                // `active` (the default) where it hasn't, so it is safe to send either way.
                "interruption-level": "time-sensitive",
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

    /// Starts the "waiting on you" activity, to a device's push-to-start token. It carries the pause's state id as
    /// its collapse id, as the alert does; Apple does not say that a second start folds into the first, so a start
    /// that may have arrived is not sent again (`DeliveryTable`).
    public static func liveActivityStart(_ props: WaitingProps, stateID: String, now: Int64) -> PushMessage {
        var metadata = activityMetadata
        metadata.collapseID = stateID
        return fitted(props, metadata: metadata) { props in
            var aps: [String: JSONValue] = [
                "event": "start",
                "timestamp": .int(now),
                "attributes-type": .string(attributesType),
                "attributes": ["url": .string(props.url)],
                "content-state": contentState(props),
                "alert": ["title": .string(props.title), "body": .string(props.body)],
                "input-push-token": 1,
            ]
            aps["stale-date"] = staleDate(props)
            aps["relevance-score"] = .int(relevanceScore(props, now: now))
            return ["aps": .object(aps)]
        }
    }

    /// `aps.relevance-score` for a start or update: which of several waiting runs' activities the phone shows first
    /// (the Dynamic Island, the top of the Lock Screen). The nearer a pause is to its timeout, the higher: 100 at the
    /// timeout, 75 an hour before, just over 50 a day before; a suspend without a timeout, which can wait, 25. A whole
    /// number (Apple takes any number; the scale is the sender's), so the payload reads back as it was built.
    static func relevanceScore(_ props: WaitingProps, now: Int64) -> Int64 {
        guard let timeoutAt = props.timeoutAt else { return 25 }
        let remaining = Double(max(0, timeoutAt - now))
        return Int64((50 + 50 * 3600 / (3600 + remaining)).rounded())
    }

    /// `aps.stale-date` for a start or update: the pause's timeout, so the phone shows the activity as stale once
    /// nobody can answer any more, even when the end push never reaches it (offline then). Nil (the key omitted)
    /// for a suspend without a timeout. The end carries `dismissal-date` instead.
    static func staleDate(_ props: WaitingProps) -> JSONValue? {
        props.timeoutAt.map { .int($0) }
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

    /// The activity's new content, to its own push token, when the pause's text changed after the start (a late
    /// context event): no alert and low priority, so it is silent and spends none of the app's update budget.
    public static func liveActivityUpdate(_ props: WaitingProps, now: Int64) -> PushMessage {
        var metadata = activityMetadata
        metadata.priority = 5
        return fitted(props, metadata: metadata) { props in
            var aps: [String: JSONValue] = ["event": "update", "timestamp": .int(now),
                                            "content-state": contentState(props),
                                            "relevance-score": .int(relevanceScore(props, now: now))]
            aps["stale-date"] = staleDate(props)
            return ["aps": .object(aps)]
        }
    }

    static func contentState(_ props: WaitingProps) -> JSONValue {
        ["name": .string(activityName), "props": .string(props.encoded())]
    }

    // MARK: - Fitting

    /// The free-text fields, in the order they are cut when a payload is too big: the body first, then the names,
    /// then the title, then the end state. The data (`runId`, `serverId`, `url`, the `body` object) is never cut.
    /// The first pass cuts each field only down to its floor (UTF-8 bytes), so a long body can't push the names
    /// out entirely; the second pass cuts down to nothing if it must.
    static var cuttable: [(field: WritableKeyPath<WaitingProps, String>, floor: Int)] {
        [(\.body, 240), (\.runName, 96), (\.flowName, 96), (\.title, 160)]
    }

    /// Builds the payload within `PushMessage.maxBytes`, whatever the texts are: each free-text field first has
    /// every grapheme bounded (`String.boundingGraphemes`, so one `e` with 2,000 accents can't fill the payload),
    /// then, while the payload is over the limit, fields are cut on grapheme boundaries, in `cuttable` order.
    static func fitted(_ props: WaitingProps, metadata: PushMessage.Metadata,
                       build: (WaitingProps) -> JSONValue) -> PushMessage {
        func size(_ candidate: WaitingProps) -> Int { build(candidate).encoded().utf8.count }
        // The message when `candidate` fits, built and encoded once (the encoding that measured it is the one sent).
        func message(ifFitting candidate: WaitingProps) -> PushMessage? {
            let payload = build(candidate)
            let json = payload.encoded()
            guard json.utf8.count <= PushMessage.maxBytes else { return nil }
            return PushMessage(payload: payload, json: json, metadata: metadata)
        }
        var props = props
        for (field, _) in cuttable {
            // No field can bring more than the whole limit; cut on a scalar boundary first so the grapheme work
            // below is bounded (the fitting then cuts on a grapheme boundary well before this point).
            props[keyPath: field] = props[keyPath: field].prefixScalars(utf8Bytes: PushMessage.maxBytes)
                .boundingGraphemes()
        }
        props.ended = props.ended?.prefixScalars(utf8Bytes: 256).boundingGraphemes()
        if let message = message(ifFitting: props) { return message }
        for pass in 0..<2 {
            for (field, floor) in cuttable {
                props = shortened(props, field, floorBytes: pass == 0 ? floor : 0, size: size)
                if let message = message(ifFitting: props) { return message }
            }
        }
        // Only the end state is left; then the data alone must fit (ids and url are bounded well below the limit).
        if let ended = props.ended {
            props.ended = ended.prefix(utf8Bytes: 64)
            if let message = message(ifFitting: props) { return message }
            props.ended = "Ended"
        }
        return PushMessage(payload: build(props), metadata: metadata)
    }

    /// `props` with `field` cut to the longest `prefix + "…"` that fits, but never below the longest prefix within
    /// `floorBytes` (which is kept even when it does not fit: the next field is cut then).
    ///
    /// A field adds the same bytes for each of its characters wherever it appears: its escaped width once per
    /// plain occurrence (`n1`) and its twice-escaped width once per occurrence inside the props string (`n2`).
    /// Three probes give `n1`, `n2` and the rest of the payload, so the longest fitting prefix comes from running
    /// sums, checked with one real encoding; a bisection with real encodings covers anything the model misses.
    static func shortened(_ props: WaitingProps, _ field: WritableKeyPath<WaitingProps, String>, floorBytes: Int,
                          size: (WaitingProps) -> Int) -> WaitingProps {
        let text = props[keyPath: field]
        if text.utf8.count <= floorBytes { return props }
        var ends: [String.Index] = [text.startIndex]  // ends[k]: end of the first k characters
        var bytes: [Int] = [0], plain: [Int] = [0], nested: [Int] = [0]
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(after: index)
            var b = 0, w1 = 0, w2 = 0
            for scalar in text.unicodeScalars[index..<next] {
                let widths = escapedWidths(scalar)
                b += UTF8.width(scalar)
                w1 += widths.plain
                w2 += widths.nested
            }
            ends.append(next)
            bytes.append(bytes.last! + b)
            plain.append(plain.last! + w1)
            nested.append(nested.last! + w2)
            index = next
        }
        let count = ends.count - 1
        func candidate(_ k: Int) -> WaitingProps {
            var copy = props
            copy[keyPath: field] = k == 0 ? "" : String(text[..<ends[k]]).trimmingSpaces() + "…"
            return copy
        }
        func with(_ value: String) -> WaitingProps {
            var copy = props
            copy[keyPath: field] = value
            return copy
        }
        var floor = 0
        while floor < count && bytes[floor + 1] + 3 <= floorBytes { floor += 1 }
        if floor >= count - 1 { return candidate(floor) }

        let limit = PushMessage.maxBytes
        let p1 = size(with("a")), p2 = size(with("aa")), p3 = size(with("a\""))
        let n2 = ((p3 - p1) - 2 * (p2 - p1)) / 2
        let n1 = (p2 - p1) - n2
        let base = p1 - n1 - n2
        var high = count - 1  // the largest cut worth trying
        if n1 >= 0 && n2 >= 0 && n1 + n2 > 0 {
            // The model: base + n1 * plain + n2 * nested, plus the ellipsis (3 bytes, never escaped).
            func modelled(_ k: Int) -> Int { base + n1 * (plain[k] + 3) + n2 * (nested[k] + 3) }
            var k = count - 1
            while k > floor && modelled(k) > limit { k -= 1 }
            let guess = candidate(k)
            if size(guess) <= limit { return guess }
            high = k - 1
        }
        var low = floor  // kept whether or not it fits
        while low < high {
            let middle = (low + high + 1) / 2
            if size(candidate(middle)) <= limit { low = middle } else { high = middle - 1 }
        }
        return candidate(low)
    }

    /// The bytes one scalar takes in a JSON string (`JSONValue.encodeString`), and inside a JSON string that is
    /// itself in a JSON string (the Live Activity props).
    static func escapedWidths(_ scalar: Unicode.Scalar) -> (plain: Int, nested: Int) {
        switch scalar {
        case "\"", "\\": return (2, 4)
        case "\n", "\r", "\t": return (2, 3)
        case _ where scalar.value < 0x20 || scalar.value == 0x2028 || scalar.value == 0x2029: return (6, 7)
        default:
            let width = UTF8.width(scalar)
            return (width, width)
        }
    }
}
