import Glibc
import RelayCore
import Synchronization
import Relay

/// A real APNs stand-in: HTTP/2 over TLS on 127.0.0.1, port 0, built on nghttp2's server API and OpenSSL
/// with the test CA's certificate. It records every request, checks the provider token's signature against
/// the test public key (403 InvalidProviderToken if it fails), and answers like Apple: status, `apns-id`,
/// and `{"reason":...}` (with `timestamp` for 410). Answers are scriptable per device token.
///
/// `@unchecked Sendable`: tests call the public methods from any task; they touch only `state` (a Mutex)
/// and the eventfd. The loop thread owns everything in `FakeAPNsServer`.
public final class FakeAPNs: @unchecked Sendable {
    /// How to answer one request.
    public indirect enum Answer: Sendable, Equatable {
        case accept
        case reject(Int, String)
        /// 410 Unregistered with a timestamp (ms).
        case gone(timestampMs: Int64)
        /// Answer later, after `ms`.
        case slow(ms: Int, Answer)
        /// Never answer.
        case silent
    }

    /// One request as received.
    public struct Request: Sendable {
        public var connection: Int
        public var stream: Int32
        public var method: String
        public var path: String
        public var headers: [String: String]
        public var body: String
        /// Streams open on this connection when the request completed (itself included).
        public var openStreams: Int
        /// How the fake answers it (set before it is recorded; `onRequest` sees it).
        public var answer: Answer?
        /// Monotonic ns (CLOCK_MONOTONIC) when the request completed; the benchmark compares it with the
        /// sender's clock.
        public var arrivedAtNs: Int64 = monotonicNanoseconds()
        /// Monotonic ms when the request completed.
        public var arrivedAt: Int64 { arrivedAtNs / 1_000_000 }
        /// The path's last segment (`/3/device/<token>`), found in its bytes: a Character split here cost the fake's
        /// loop more than parsing the request did.
        public var token: String {
            let bytes = path.utf8
            let slash = UInt8(ascii: "/")
            var end = bytes.endIndex
            while end > bytes.startIndex, bytes[bytes.index(before: end)] == slash { end = bytes.index(before: end) }
            var start = end
            while start > bytes.startIndex, bytes[bytes.index(before: start)] != slash { start = bytes.index(before: start) }
            return String(path[start..<end])
        }
        public var authorization: String? { headers["authorization"] }
    }

    public let name: String
    public let port: Int
    let ledger: FakeAPNsLedger
    private let server: FakeAPNsServer
    private var thread = pthread_t()

    /// Who the fake is: its TLS certificate and key, and the provider key it accepts tokens from.
    public struct Identity: Sendable {
        public var certificateChainPath: String
        public var privateKeyPath: String
        public var jwtPublicKeyPath: String
        public var keyID: String
        public var teamID: String

        public init(certificateChainPath: String, privateKeyPath: String, jwtPublicKeyPath: String, keyID: String,
                    teamID: String) {
            self.certificateChainPath = certificateChainPath
            self.privateKeyPath = privateKeyPath
            self.jwtPublicKeyPath = jwtPublicKeyPath
            self.keyID = keyID
            self.teamID = teamID
        }
    }

    /// Starts listening right away. `maxConcurrentStreams` is what SETTINGS announces.
    /// `onRequest` sees each request as it completes, on the fake's loop thread (keep it quick).
    /// `keepsRequests` false: `requests` stays empty, for a fake that runs long and only reports through
    /// `onRequest` (the `fake-apns` command), so its memory doesn't grow with every push.
    public init(name: String = "fake-apns", maxConcurrentStreams: UInt32 = 1000, identity: Identity, port: Int = 0,
                keepsRequests: Bool = true, onRequest: (@Sendable (Request) -> Void)? = nil) throws {
        self.name = name
        ledger = FakeAPNsLedger(keepsRequests: keepsRequests, onRequest: onRequest)
        server = try FakeAPNsServer(ledger: ledger, maxConcurrentStreams: maxConcurrentStreams, identity: identity,
                                    port: port)
        self.port = server.port
        let retained = Unmanaged.passRetained(server)
        guard pthread_create(&thread, nil, fakeAPNsMain, retained.toOpaque()) == 0 else {
            retained.release()
            throw TransportError("pthread_create failed")
        }
    }

    deinit { stop() }

    /// Stops the loop and closes every connection. Idempotent.
    public func stop() {
        let first = ledger.state.withLock { state -> Bool in
            defer { state.stopping = true }
            return !state.stopping
        }
        guard first else { return }
        server.wake()
        pthread_join(thread, nil)
    }

    // MARK: - Scripting

    /// Answers for `token`, used in order; the last one repeats.
    public func script(_ token: String, _ answers: Answer...) {
        ledger.state.withLock { $0.scripts[token.lowercased()] = answers }
    }

    /// Answers for the requests to `token` that `matches` picks, used in order (the last one repeats); the others
    /// get `token`'s plain script. For a test on a shared Prefect server, whose relay also pushes other tests' pauses.
    public func script(_ token: String, when matches: @escaping @Sendable (Request) -> Bool, _ answers: Answer...) {
        ledger.state.withLock { $0.pickedScripts[token.lowercased()] = (matches, answers) }
    }

    /// On every connection, answer this many streams, then send GOAWAY with that last stream id and leave
    /// later streams unprocessed (the client must resend them on a fresh connection).
    public func goAway(afterStreams count: Int?) {
        ledger.state.withLock { $0.goAwayAfterStreams = count }
    }

    /// Stops reading and writing every connection open now, as a peer that silently died: PINGs go unanswered.
    /// Returns once the loop has begun a turn after the freeze (at most 2 s): a turn that chose its connections just
    /// before it could otherwise still read a request sent after this returns (a test once saw one delivered).
    public func freezeConnections() {
        let turn = ledger.state.withLock { state -> Int in
            state.frozenUpTo = state.connections
            return state.turns
        }
        server.wake()
        for _ in 0..<2_000 where ledger.state.withLock({ $0.turns }) <= turn && !ledger.isStopping { usleep(1_000) }
    }

    /// Answer every request with `answer` instead of the per-token scripts, until called with nil (an outage).
    public func answerEveryone(_ answer: Answer?) {
        ledger.state.withLock { $0.answerEveryone = answer }
    }

    /// While on, every connection that has finished its TLS handshake (open now or accepted later) is neither
    /// read nor written: a link that went silent. Off resumes them all, as a network that healed.
    public func silence(_ on: Bool) {
        ledger.state.withLock { $0.silenced = on }
        server.wake()
    }

    /// Closes every connection open now without GOAWAY, as a peer that hung up.
    public func dropConnections() {
        ledger.state.withLock { $0.dropRequested = true }
        server.wake()
    }

    // MARK: - Reading what happened

    public var requests: [Request] { ledger.state.withLock { $0.requests } }

    public var connectionCount: Int { ledger.state.withLock { $0.connections } }
    public func requests(for token: String) -> [Request] { requests.filter { $0.token == token.lowercased() } }
}

/// What the fake was told and what it saw, shared by the test's thread and the loop thread.
final class FakeAPNsLedger: Sendable {
    struct State {
        var scripts: [String: [FakeAPNs.Answer]] = [:]
        /// Scripts for only some of a token's requests (`FakeAPNs.script(_:when:_:)`), ahead of `scripts`.
        var pickedScripts: [String: (matches: @Sendable (FakeAPNs.Request) -> Bool, answers: [FakeAPNs.Answer])] = [:]
        var requests: [FakeAPNs.Request] = []
        var goAwayAfterStreams: Int?
        /// Connections with an id up to this one are neither read nor written (a silently dead peer).
        var frozenUpTo = 0
        /// Overrides `scripts` for every request while set.
        var answerEveryone: FakeAPNs.Answer?
        /// Established connections are neither read nor written (see `FakeAPNs.silence`).
        var silenced = false
        /// Close every open connection at the next loop turn (a peer that hangs up).
        var dropRequested = false
        var connections = 0
        /// Loop turns begun (`freezeConnections` waits for the next one).
        var turns = 0
        var stopping = false
        var nextID = 0
    }

    let state = Locked(State())
    private let onRequest: (@Sendable (FakeAPNs.Request) -> Void)?
    private let keepsRequests: Bool

    init(keepsRequests: Bool, onRequest: (@Sendable (FakeAPNs.Request) -> Void)?) {
        self.keepsRequests = keepsRequests
        self.onRequest = onRequest
    }

    /// The next answer for `request` (called by the loop thread).
    func nextAnswer(for request: FakeAPNs.Request) -> FakeAPNs.Answer {
        state.withLock { state in
            if let everyone = state.answerEveryone { return everyone }
            // Unscripted (the benchmark): no token to cut out and look up.
            if state.scripts.isEmpty && state.pickedScripts.isEmpty { return .accept }
            let token = request.token
            if state.pickedScripts[token]?.matches(request) == true,
               let answer = Self.next(&state.pickedScripts[token]!.answers) {
                return answer
            }
            if state.scripts[token] != nil, let answer = Self.next(&state.scripts[token]!) { return answer }
            return .accept
        }
    }

    /// A script's next answer; the last one repeats.
    private static func next(_ answers: inout [FakeAPNs.Answer]) -> FakeAPNs.Answer? {
        guard let first = answers.first else { return nil }
        if answers.count > 1 { answers.removeFirst() }
        return first
    }

    func record(_ request: FakeAPNs.Request) {
        if keepsRequests { state.withLock { $0.requests.append(request) } }
        onRequest?(request)
    }

    func newConnectionID() -> Int {
        state.withLock { state in
            state.connections += 1
            return state.connections
        }
    }

    func newAPNsID() -> String {
        let id = state.withLock { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        let digits = String(id)
        return "00000000-0000-4000-8000-" + String(repeating: "0", count: max(0, 12 - digits.count)) + digits
    }

    var goAwayAfterStreams: Int? { state.withLock { $0.goAwayAfterStreams } }
    var frozenUpTo: Int { state.withLock { $0.frozenUpTo } }
    var silenced: Bool { state.withLock { $0.silenced } }

    /// Whether a drop was requested since the last call.
    func takeDropRequest() -> Bool {
        state.withLock { state in
            defer { state.dropRequested = false }
            return state.dropRequested
        }
    }
    var isStopping: Bool { state.withLock { $0.stopping } }
}

/// The fake's loop thread entry; `argument` is an owned reference to the server.
private func fakeAPNsMain(_ argument: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    guard let argument else { preconditionFailure("fake APNs loop without its server") }
    Unmanaged<FakeAPNsServer>.fromOpaque(argument).takeRetainedValue().run()
    return nil
}
