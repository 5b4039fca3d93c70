import CShims
import Glibc
import RelayCore
import Synchronization

/// HTTP/1.1 client with kept-alive connections: a small pool per origin (scheme, host, port), used for every REST
/// read from Prefect. Up to `maxConnectionsPerHost` connections each carry one request at a time and stay open
/// between requests, until `idleTimeoutMs` passes unused or the server answers `Connection: close`; calls beyond
/// that wait, first come first served. A request on a reused connection that sees no byte of an answer before the
/// connection fails (the server closed it while idle) is sent once more on a fresh connection: every call made
/// through here is a read (GET, POST …/filter, /flows/count).
///
/// Reads Prefect holds (a slow query, a locked table) must not hold up the others:
/// - A call past its deadline fails to its caller, but its request stays open on its connection, which stays busy
///   until the answer comes (or `abandonedHoldMs`): the server is still working on it. The same request asked again
///   meanwhile (the caller's re-read) waits for that copy's answer instead of being sent a second time.
/// - A request unanswered for `slowMs` no longer counts against `maxConnectionsPerHost`: a waiting call may open a
///   connection in its place, up to `extraConnectionsPerHost` on top. Connections beyond the normal size are closed
///   after `extraIdleMs` unused.
/// - At most `maxInFlightPerGroup` requests of one group (one run's reads) are open at once.
/// - A request unanswered for `stallMs` is stalled: logged (`prefect.reads_stalled`, at most one line per
///   `stallWarningEveryMs` while any is) and counted.
///
/// Every one of these decisions is `HTTPPoolStateMachine`'s (RelayCore, pure, tested without a socket): the loop
/// feeds it what the inbox and the sockets report and carries out the actions it answers.
///
/// Threads (the `APNsHostLoop` pattern): one loop thread, started on first use, owns every connection and polls
/// them plus an eventfd, and opens connections to IP addresses there too, without blocking (`HTTPPool+Connect`). A
/// host name is resolved and connected on a short-lived thread, since getaddrinfo blocks. No caller's thread ever
/// blocks.
///
/// `@unchecked Sendable`: only `send(_:)` and `close()` may be called from any thread; they touch nothing but the
/// `inbox` lock and the eventfd. Every other stored `var` belongs to the loop thread.
final class HTTPPool: @unchecked Sendable {
    /// The scheduling numbers (pool size, slow and stalled requests, holds, idle times) are the policy's
    /// (`HTTPPoolPolicy.Options`), read and set through here as if they were this struct's own.
    @dynamicMemberLookup
    struct Options: Sendable {
        var policy = HTTPPoolPolicy.Options()
        var connectTimeoutMs = 5_000
        /// Extra CA file for https origins (PREFECT_CA_FILE), on top of the system roots.
        var caFile: String?
        /// Which origins go through a proxy's CONNECT tunnel (HTTPS_PROXY, HTTP_PROXY, NO_PROXY).
        var proxy: ProxyRule
        /// The loop thread's name (`top -H`, gdb).
        var threadName = "pp-rest"

        init(caFile: String? = nil, proxy: ProxyRule = .none) {
            self.caFile = caFile
            self.proxy = proxy
        }

        subscript<Value>(dynamicMember keyPath: WritableKeyPath<HTTPPoolPolicy.Options, Value>) -> Value {
            get { policy[keyPath: keyPath] }
            set { policy[keyPath: keyPath] = newValue }
        }
    }

    /// Where a connection goes: one pool of connections each.
    struct Origin: Hashable, Sendable {
        var tls: Bool
        var host: String
        var port: Int

        init(_ url: HTTPURL) {
            tls = url.tls
            host = url.host
            port = url.port
        }

        var authority: String { HTTPURL(tls: tls, host: host, port: port, path: "").authority }
    }

    /// A connecting thread's result, handed to the loop. Not `Sendable`: the stream moves from the connecting
    /// thread to the loop thread through the inbox and is never touched by the sender again.
    struct Connected {
        let id: HTTPPoolStateMachine.ConnectionID
        let result: Result<ByteStream, TransportError>
    }

    private struct Inbox: LoopInbox {
        var calls: [PooledCall] = []
        var connected: [Connected] = []
        var closing = false
        var thread: pthread_t?
    }

    /// The largest answer body taken; a larger one fails the call.
    static let maxResponse = 8 * 1024 * 1024

    let options: Options
    let userAgent = "prefect-push/\(BuildInfo.version)"
    private let wakeSignal: WakeSignal
    private let inbox = Locked(Inbox())

    /// The loop thread's kernel id once it runs: every handler of the loop asserts it is on it (`assertOnLoop`).
    private let loopThreadID = Atomic<Int32>(0)

    /// The loop's handlers (`run`'s turn, `feed`, `perform`, `takeInbox`) run on its thread only (checked in debug
    /// builds): the state below is that thread's alone.
    @inline(__always) func assertOnLoop() {
        assert(loopThreadID.load(ordering: .relaxed) == CShims_thread_id(), "REST pool state reached off its loop's thread")
    }

    /// Marks the calling thread as the loop's. `run` only.
    func enterLoop() { loopThreadID.store(CShims_thread_id(), ordering: .relaxed) }

    // Loop-thread state.
    /// Every decision (which connection, when to open, close, retry, time out, warn): the loop feeds it what it
    /// sees and carries out what it answers.
    var machine: HTTPPoolStateMachine
    /// The machine's answers not yet carried out: one buffer, emptied every time, so a turn costs no array.
    var actions: [HTTPPoolStateMachine.Action] = []
    /// The callers the machine holds (waiting, on a connection, or joined to another's request), by id.
    var calls: [HTTPPoolStateMachine.CallID: PooledCall] = [:]
    var lastCallID = 0
    /// Origins by the machine's numbers, and back.
    var origins: [Origin] = []
    var originIDs: [Origin: HTTPPoolStateMachine.OriginID] = [:]
    var connections: [HTTPConnection] = []
    /// Connections being opened (inline or on a thread), by id; a result for one no longer here is dropped.
    var connecting: [HTTPPoolStateMachine.ConnectionID: Origin] = [:]
    /// The inline ones, polled with the rest.
    var opening: [PendingConnect] = []
    var tlsContext: TLSContext?

    init(options: Options = Options()) throws(IOError) {
        self.options = options
        machine = HTTPPoolStateMachine(policy: HTTPPoolPolicy(options: options.policy),
                                       connectTimeoutMs: options.connectTimeoutMs)
        wakeSignal = try WakeSignal()
        // OpenSSL writes with write(2): a peer that hung up must give EPIPE, not kill the process.
        signal(SIGPIPE, SIG_IGN)
    }

    /// This pool's counts for `/metrics` (`RelayStatus` adds up the relay's pools): its own, so two relays in one
    /// process (tests) never mix. Any thread.
    let counts = Counts()

    final class Counts: Sendable {
        /// TCP (and for https, TLS) connections opened since start-up.
        let connectionsOpened = Atomic<Int>(0)
        /// Requests that went `stallMs` without an answer, since start-up.
        let readsStalled = Atomic<Int>(0)
        /// Calls whose caller was answered with a timeout while the request stayed open, since start-up.
        let readsAbandoned = Atomic<Int>(0)
        /// Requests open at the server now (abandoned ones included). Written by the loop, once a turn.
        let readsInFlight = Atomic<Int>(0)

        var snapshot: (opened: Int, stalled: Int, abandoned: Int, inFlight: Int) {
            (connectionsOpened.load(ordering: .relaxed), readsStalled.load(ordering: .relaxed),
             readsAbandoned.load(ordering: .relaxed), readsInFlight.load(ordering: .relaxed))
        }
    }

    /// Sends one request and waits for its answer, a failure (no connection, timeout, malformed or oversized
    /// answer), or `call.timeoutSeconds`, counted from now. Safe from any task; resumes exactly once.
    func send(_ call: HTTPCall) async -> Result<HTTPReply, HTTPFailure> {
        await withCheckedContinuation { continuation in
            submit(call) { continuation.resume(returning: $0) }
        }
    }

    /// `send` for a caller that is not a task (the events socket's thread starting a read the moment its event is
    /// parsed): `done` runs exactly once, on the pool's thread (or on the caller's, for a refusal).
    func submit(_ call: HTTPCall, done: @escaping @Sendable (Result<HTTPReply, HTTPFailure>) -> Void) {
        guard let request = HTTP1Request.serialize(method: call.method, path: call.path, authority: call.url.authority,
                                                   headers: call.headers, body: call.body, userAgent: userAgent) else {
            return done(.failure(HTTPFailure(.invalidRequest, "refused to send a request with a line break or NUL in it")))
        }
        let pending = PooledCall(call: call, request: request,
                                 deadline: monotonicMs() + Int64(max(1, call.timeoutSeconds)) * 1000, done: done)
        // The call moves into the inbox, or comes back out refused; the caller keeps no other reference.
        let admission = inbox.withLock(handing: pending) { inbox, pending -> Admission in
            guard !inbox.closing else { return .refused(pending, "the relay is shutting down") }
            if inbox.thread == nil { inbox.thread = startLoop() }
            guard inbox.thread != nil else {
                return .refused(pending, "could not start the thread that talks to Prefect; the next call tries again")
            }
            inbox.calls.append(pending)
            // The first call in an empty inbox wakes the loop; later ones find a wake-up on its way.
            return .queued(wakeLoop: inbox.calls.count == 1)
        }
        switch admission {
        case .refused(let call, let why): call.finish(.failure(HTTPFailure(.notAccepted, why)))
        case .queued(wakeLoop: true): wake()
        case .queued(wakeLoop: false): break
        }
    }

    /// What became of a call handed to the inbox.
    private enum Admission {
        case queued(wakeLoop: Bool)
        case refused(PooledCall, String)
    }

    /// Stops the loop thread: waiting and in-flight calls fail, connections close. Idempotent; any thread but
    /// the loop's.
    func close() {
        inbox.closeLoop(wake: wake)
    }

    /// Takes what other threads queued. Loop thread only.
    func takeInbox() -> (calls: [PooledCall], connected: [Connected], closing: Bool) {
        assertOnLoop()
        return inbox.withLock { inbox in
            defer {
                inbox.calls.removeAll()
                inbox.connected.removeAll()
            }
            return (inbox.calls, inbox.connected, inbox.closing)
        }
    }

    /// A connecting thread reports. Any thread. After `close()` nobody will take it: dropped here, so its
    /// connection closes at once instead of waiting in the inbox for the pool's end.
    func deliver(_ connected: Connected) {
        let taken = inbox.withLock { inbox -> Bool in
            guard !inbox.closing else { return false }
            inbox.connected.append(connected)
            return true
        }
        if taken { wake() }
    }

    private func wake() { wakeSignal.wake() }

    /// Empties the wake-up after poll() said it is readable. Loop thread only.
    func drainWake() { wakeSignal.drain() }

    var wakeDescriptor: Int32 { wakeSignal.descriptor }

    private func startLoop() -> pthread_t? {
        // The thread holds the loop's owner until `run` returns; `close()` is what ends it.
        RelayThread.start("prefect.http_thread", name: options.threadName) { self.run() }
    }
}


/// One call in the pool: the request bytes, the deadline, and what to do with the answer.
///
/// Not `Sendable`: built on the caller's thread and handed over through the pool's locked inbox; from then on only
/// the loop thread touches it.
final class PooledCall {
    let call: HTTPCall
    let origin: HTTPPool.Origin
    let request: [UInt8]
    /// Monotonic ms after which the caller gets a timeout failure.
    let deadline: Int64
    private var done: (@Sendable (Result<HTTPReply, HTTPFailure>) -> Void)?

    init(call: HTTPCall, request: [UInt8], deadline: Int64,
         done: @escaping @Sendable (Result<HTTPReply, HTTPFailure>) -> Void) {
        self.call = call
        origin = HTTPPool.Origin(call.url)
        self.request = request
        self.deadline = deadline
        self.done = done
    }

    /// Hands the caller its answer. Later calls are ignored, so it is handed over exactly once.
    func finish(_ result: Result<HTTPReply, HTTPFailure>) {
        guard let done else { return }
        self.done = nil
        done(result)
    }
}
