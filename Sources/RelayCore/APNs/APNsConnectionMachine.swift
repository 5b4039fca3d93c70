/// One APNs host's connection as a state machine: the HTTP/2 link's life (none, open, going away, failed) and the
/// fate of every stream on it. The loop (`APNsHostLoop`) and the nghttp2 plumbing (`APNsConnection`) report what
/// happened (a stream submitted, its HEADERS sent or dropped, its answer, a reset, GOAWAY, a PING ack, a read, a
/// failure, the time) and do what the machine answers; they decide nothing themselves. Timing (deadline checks,
/// PINGs, the stream limit, how long to sleep) is `APNsLinkPolicy`'s, which the machine holds.
///
/// A stream's fate follows `DeliveryTable`: APNs never saw it (REFUSED_STREAM, above a GOAWAY's last-stream-id,
/// HEADERS never sent) → `resendNow` on a fresh link, whatever its purpose; it went out and its answer never came
/// (deadline, link lost) → reported as such, and the caller's table row says whether it may go again. The machine
/// itself never resends a stream that went out. Tested without a socket or a clock (`APNsConnectionMachineTests`,
/// and the `APNs` fuzz harness).
public struct APNsConnectionMachine: Sendable {
    public typealias StreamID = Int32

    /// How a stream ended, for the loop to hand on.
    public enum StreamEnd: Sendable, Equatable {
        /// APNs answered (any status): the caller gets the response.
        case answered
        /// APNs never processed it: send it again at once on a fresh link (`DeliveryTable`'s `resendNow`).
        case resend
        /// It went out and the stream was reset or its link died before an answer: delivery unknown.
        case lost(String)
        /// It went out and no answer came by its deadline: delivery unknown. The loop also resets the stream.
        case timedOut
        /// Its deadline passed before its HEADERS went out: APNs never saw it, so its caller may send it again. The
        /// loop also resets the stream.
        case expiredUnsent
    }

    /// A stream the machine is tracking.
    struct Stream: Sendable, Equatable {
        var deadline: Int64
        /// When it was submitted (µs, monotonic): its answer's round trip sizes the window.
        var submittedAt: Int64 = 0
        /// Its HEADERS went out: from here on a lost answer means "delivery unknown".
        var sent = false
    }

    /// The open link, as far as decisions need it.
    struct Link: Sendable, Equatable {
        var lastReadAt: Int64
        var pingSentAt: Int64?
        /// A 200 arrived on it, so APNs accepts the provider token.
        var confirmed = false
        /// GOAWAY arrived, stream ids ran out, or the link was recycled: no new streams here.
        var goingAway = false
        /// The highest stream id APNs said it may have processed (GOAWAY's last-stream-id).
        var lastProcessable: StreamID = .max
        /// Why the link is broken; it is retired at the end of the turn.
        var failure: String?
        var streams: [StreamID: Stream] = [:]
        /// How many streams to keep open (`StreamWindow`), learned on this link.
        var window: StreamWindow
    }

    public private(set) var policy: APNsLinkPolicy
    private let reconnect: Backoff
    private(set) var link: Link?
    /// Connect attempts that failed in a row (the backoff's count); 0 after a link opens.
    public private(set) var connectFailures = 0

    public init(options: APNsLinkPolicy.Options = .init()) {
        policy = APNsLinkPolicy(options: options)
        // APNs treats connection churn as an attack: `reconnectDelayMs` (1 s) after a failure, doubling to four
        // times that while failures go on in a row.
        let base = Double(options.reconnectDelayMs) / 1000
        reconnect = Backoff(initial: max(base, 0.001), maximum: max(base, 0.001) * 4, jitter: 0.2)
    }

    // MARK: - The link's life

    public var hasLink: Bool { link != nil }
    public var openStreams: Int { link?.streams.count ?? 0 }

    /// A link opened.
    public mutating func connected(now: Int64) {
        precondition(link == nil, "a second link opened while one is open")
        link = Link(lastReadAt: now, window: StreamWindow(ceiling: policy.options.maxConcurrentStreams))
        connectFailures = 0
    }

    /// A connect failed: the next attempt waits per the reconnect backoff; returns that wait (ms). Nothing was sent,
    /// so the caller fails every waiting push as never sent: its row of `DeliveryTable` decides its retry (the
    /// outbox's backoff), rather than each waiting here through reconnects it can't see.
    @discardableResult
    public mutating func connectFailed(now: Int64, random: Double) -> Int64 {
        precondition(link == nil, "a connect failed while a link is open")
        connectFailures += 1
        // Jitter only shortens (`Backoff`); never below the configured gap.
        let delay = max(Int64(policy.options.reconnectDelayMs),
                        Int64(reconnect.delay(failures: connectFailures, random: random) * 1000))
        policy.connectFailed(now: now, delayMs: delay)
        return delay
    }

    /// The link is dropped (its socket closed by the loop). Every stream still open ends here: those that went out
    /// are lost, the others go again on the next link. Returns each with its end, in stream order.
    public mutating func linkClosed(reason: String, now: Int64) -> [(StreamID, StreamEnd)] {
        guard let closing = link else { return [] }
        link = nil
        policy.retired(failed: closing.failure != nil, now: now)
        return closing.streams.sorted { $0.key < $1.key }.map { id, stream in
            (id, stream.sent && id <= closing.lastProcessable ? .lost(reason) : .resend)
        }
    }

    /// GOAWAY: no new streams here; streams above `lastStreamID` were never processed (nghttp2 closes them as
    /// refused, and `streamClosed` resends them).
    public mutating func goaway(lastStreamID: StreamID) {
        guard link != nil else { return }
        link!.goingAway = true
        link!.lastProcessable = min(link!.lastProcessable, lastStreamID)
    }

    /// No new streams on this link (a provider-token renewal, after which APNs may wedge it; or stream ids ran out).
    public mutating func stopNewStreams() { link?.goingAway = true }

    public mutating func failed(_ reason: String) {
        if link != nil, link!.failure == nil { link!.failure = reason }
    }

    public var failure: String? { link?.failure }

    public mutating func read(now: Int64) { link?.lastReadAt = now }
    public mutating func pingSent(now: Int64) { link?.pingSentAt = now }
    public mutating func pingAcknowledged() { link?.pingSentAt = nil }

    // MARK: - Streams

    /// A request was handed to nghttp2 as `id`.
    public mutating func submitted(_ id: StreamID, deadline: Int64, atMicros: Int64 = 0) {
        precondition(link != nil, "a stream submitted with no link")
        let earlier = link!.streams.updateValue(Stream(deadline: deadline, submittedAt: atMicros), forKey: id)
        precondition(earlier == nil, "stream \(id) submitted twice")
    }

    /// Its HEADERS went out.
    public mutating func headersSent(_ id: StreamID) { link?.streams[id]?.sent = true }

    /// nghttp2 dropped its HEADERS before sending them (GOAWAY arrived meanwhile): APNs never saw it. Nil when the
    /// machine no longer tracks it.
    public mutating func headersNotSent(_ id: StreamID) -> StreamEnd? {
        guard link?.streams.removeValue(forKey: id) != nil else { return nil }
        return .resend
    }

    /// The stream closed. `status` is the answer's `:status` if one came; `refused` that it was reset with
    /// REFUSED_STREAM; `error` names the reset otherwise. Nil for a stream already ended (timed out).
    /// `nowMicros`: when (µs, the clock `submitted` was given), for the window.
    public mutating func streamClosed(_ id: StreamID, status: Int?, refused: Bool, nowMicros: Int64 = 0,
                                      error: @autoclosure () -> String) -> StreamEnd? {
        guard let stream = link?.streams.removeValue(forKey: id) else { return nil }
        if let status {
            if status == 200 { link!.confirmed = true }
            if nowMicros > 0 { link!.window.answered(roundTrip: nowMicros - stream.submittedAt, now: nowMicros) }
            return .answered
        }
        if refused || !stream.sent || id > link!.lastProcessable { return .resend }
        return .lost("stream reset: " + error())
    }

    /// Streams whose deadline passed, in ascending ids: `.timedOut` if they went out, `.expiredUnsent` if not (the
    /// loop resets each).
    public mutating func expire(now: Int64) -> [(StreamID, StreamEnd)] {
        guard let streams = link?.streams, streams.values.contains(where: { $0.deadline <= now }) else { return [] }
        let due = streams.filter { $0.value.deadline <= now }.sorted { $0.key < $1.key }
        for (id, _) in due { link!.streams[id] = nil }
        return due.map { id, stream in (id, stream.sent ? .timedOut : .expiredUnsent) }
    }

    // MARK: - Turns

    /// What the nghttp2 session says of itself, which the machine can't see: whether it takes another stream, how
    /// many the peer allows, and whether it has anything left to read or write.
    public struct Session: Sendable, Equatable {
        public var requestAllowed: Bool
        public var peerStreamLimit: Int
        public var finished: Bool

        public init(requestAllowed: Bool = true, peerStreamLimit: Int = 100, finished: Bool = false) {
            self.requestAllowed = requestAllowed
            self.peerStreamLimit = peerStreamLimit
            self.finished = finished
        }
    }

    /// The policy's view of the open link.
    func facts(_ session: Session) -> APNsLinkPolicy.Link? {
        link.map {
            APNsLinkPolicy.Link(lastReadAt: $0.lastReadAt, pingSentAt: $0.pingSentAt, openStreams: $0.streams.count,
                                confirmed: $0.confirmed, peerStreamLimit: session.peerStreamLimit)
        }
    }

    /// How many more streams may start on the link now (0 without a usable link).
    public func room(_ session: Session) -> Int {
        guard let link, let facts = facts(session), !link.goingAway, link.failure == nil, session.requestAllowed
        else { return 0 }
        return max(0, min(policy.streamLimit(of: facts), link.window.limit(peer: session.peerStreamLimit))
                   - link.streams.count)
    }

    /// Whether a caller's thread may put `count` requests straight on the link while the loop sleeps: only when
    /// nothing queued is ahead of them, the link is open and healthy, and it has room for all of them.
    public func maySendDirectly(_ count: Int, queued: Int, session: Session) -> Bool {
        queued == 0 && room(session) >= count
    }

    /// What the loop does this turn, before it sends.
    public struct Turn: Sendable, Equatable {
        public var expireDeadlines = false
        public var connect = false
    }

    public mutating func turn(now: Int64, waiting: Bool) -> Turn {
        let turn = policy.turn(now: now, waiting: waiting, linkOpen: link != nil)
        return Turn(expireDeadlines: turn.expireDeadlines, connect: turn.connect)
    }

    /// After sending: PING a quiet link, condemn one whose PING went unanswered, and whether to retire it now.
    public enum Upkeep: Sendable, Equatable {
        case none
        case ping
        /// Retire the link with this reason.
        case retire(String)
    }

    public mutating func upkeep(now: Int64, session: Session) -> Upkeep {
        guard let link, let facts = facts(session) else { return .none }
        // `.ping` only comes while no PING is out; `.failed` is an unanswered one.
        let health = policy.health(of: facts, now: now)
        if case .failed(let reason) = health { failed(reason) }
        if let failure = self.link?.failure { return .retire(failure) }
        if session.finished || (link.goingAway && link.streams.isEmpty) { return .retire("connection finished") }
        return health == .ping ? .ping : .none
    }

    /// How long the loop may sleep (ms; -1: until woken).
    public func pollTimeout(now: Int64, waiting: Bool, session: Session) -> Int64 {
        policy.pollTimeout(now: now, waiting: waiting, link: facts(session))
    }
}
