import CShims
import Glibc
import RelayCore
import Synchronization

/// One APNs host. A loop thread (started on first use) owns at most one live `APNsConnection` at a time: opened
/// when there is something to send, kept open, PINGed when quiet, and replaced when it dies or gets GOAWAY.
/// Requests wait in Swift until the link has a free stream, so nghttp2 never holds more than the limit.
///
/// A few requests for a live link that the loop is asleep on go out from the caller's thread (`sendDirectly`):
/// the loop would otherwise be woken only to write them, a wake-up and a thread switch on the path of every
/// alert (~20 µs on an idle core, 100 µs and more when the other core is busy). The loop still reads every answer.
///
/// `@unchecked Sendable`: `send(_:)`, `submit`, `recycle()` and `close()` may be called from any thread; they touch
/// the `inbox` lock and the eventfd, and the loop's state only while holding `turn` (`sendDirectly`). Every other
/// stored `var` belongs to the loop thread, which holds `turn` whenever it touches them (all but its poll()).
package final class APNsHostLoop: @unchecked Sendable {
    package struct Options: Sendable {
        /// Per-request deadline: a push with no answer by then finishes `.timedOut`.
        package var requestTimeoutMs = 10_000
        var connectTimeoutMs = 5_000
        /// PINGs, reconnect delay, stream cap: the link policy's (`APNsLinkPolicy`).
        package var link = APNsLinkPolicy.Options()

        init() {}
    }

    private struct Inbox: LoopInbox {
        var pushes: [PendingPush] = []
        var closing = false
        var recycle = false
        var thread: pthread_t?
    }

    let host: String
    let port: Int
    let authority: String
    let options: Options
    let tls: TLSContext
    /// The proxy whose CONNECT tunnel every link to this host goes through (`ProxyRule`), or nil: direct.
    let proxy: ProxyEndpoint?
    private let wakeSignal: WakeSignal
    private let inbox = Locked(Inbox())
    /// Held by the loop for its turn, released while it polls; see the type's comment. Taken before `inbox`.
    let turn = PthreadLock()
    /// At most this many requests at once go out from the caller's thread: a larger fan-out is encoded and written
    /// by the loop while the caller makes the rest (the two cores work side by side).
    static let directSendLimit = 8

    // Loop state, guarded by `turn`: reached only through the accessors below, which assert (debug builds) that the
    // caller holds it, so the loop's handlers and the link's nghttp2 callbacks are checked at every entry.
    private var turnLink: APNsConnection?
    private var turnWaiting = PushQueue()
    private var turnLinksOpened = 0
    private var turnMachine: APNsConnectionMachine

    /// The live HTTP/2 connection, if any. `turn` held.
    var link: APNsConnection? {
        get { assertInTurn(); return turnLink }
        set { assertInTurn(); turnLink = newValue }
    }
    /// Pushes waiting for a stream. `turn` held.
    var waiting: PushQueue {
        get { assertInTurn(); return turnWaiting }
        _modify { assertInTurn(); yield &turnWaiting }
    }
    /// Connections opened since start-up. `turn` held.
    var linksOpened: Int {
        get { assertInTurn(); return turnLinksOpened }
        set { assertInTurn(); turnLinksOpened = newValue }
    }
    /// Every decision about the link and its streams: when to connect, PING, retire; each stream's fate; how many
    /// streams; how long to sleep. `turn` held: the loop and the link's nghttp2 callbacks report to it and do what
    /// it answers.
    var machine: APNsConnectionMachine {
        get { assertInTurn(); return turnMachine }
        _modify { assertInTurn(); yield &turnMachine }
    }

    /// Loop state is touched only with `turn` held (checked in debug builds).
    @inline(__always) func assertInTurn() {
        assert(turn.isHeldByCurrentThread, "APNs loop state reached without its turn lock")
    }
    /// Answers for `submit`ted pushes, handed over once per loop turn.
    let answers = AnswerBatch()

    init(host: String, port: Int, authority: String, tls: TLSContext, options: Options = Options(),
         proxy: ProxyEndpoint? = nil) throws(IOError) {
        self.proxy = proxy
        self.host = host
        self.port = port
        self.authority = authority
        self.tls = tls
        self.options = options
        turnMachine = APNsConnectionMachine(options: options.link)
        wakeSignal = try WakeSignal()
        // OpenSSL writes with write(2), not send(MSG_NOSIGNAL): a peer that hung up would otherwise kill the
        // process with SIGPIPE instead of giving us EPIPE. Process-wide, which a network daemon wants anyway.
        signal(SIGPIPE, SIG_IGN)
    }

    /// TLS + HTTP/2 connections opened to this host since start-up (`/metrics`): this connection's own, as
    /// `reachability` is. Safe from any thread.
    package var linksOpenedTotal: Int { linksOpenedCount.load(ordering: .relaxed) }
    let linksOpenedCount = Atomic<Int>(0)
    /// Connection attempts to this host since the last success, nil before the first, for `/health`
    /// (`HealthVerdict`). This connection's own, so two clients in one process (tests) never mix. Safe from any thread.
    let reachability = Locked<FailureStreak?>(nil)

    /// Sends one request on this host and waits for its answer (or timeout). Safe from any task.
    func send(_ request: APNsRequest) async -> APNsExchange {
        await withCheckedContinuation { continuation in
            enqueue([PendingPush(request: request, deadline: deadline(), continuation: continuation)])
        }
    }

    /// Queues many requests at once (one lock, one wake-up) without a task per request: `sink` gets each
    /// request's index and answer, on the loop thread, with the others that finished in the same loop turn.
    /// Safe from any thread.
    func submit(_ requests: [(index: Int, request: APNsRequest)], to sink: any APNsAnswerSink) {
        let deadline = deadline()
        enqueue(requests.map { index, request in
            PendingPush(request: request, deadline: deadline, index: index, sink: sink, batch: answers)
        })
    }

    private func deadline() -> Int64 { monotonicMs() + Int64(options.requestTimeoutMs) }

    private func enqueue(_ pushes: sending [PendingPush]) {
        guard !pushes.isEmpty else { return }
        if sendDirectly(pushes) { return }
        // The pushes move into the inbox, or come back out refused; the caller keeps no other reference.
        let admission = inbox.withLock(handing: pushes) { inbox, pushes -> Admission in
            guard !inbox.closing else { return .refused(pushes) }
            if inbox.thread == nil { inbox.thread = startLoop() }
            guard inbox.thread != nil else { return .refused(pushes) }
            let wasEmpty = inbox.pushes.isEmpty
            inbox.pushes.append(contentsOf: pushes)
            return .queued(wakeLoop: wasEmpty)
        }
        // One eventfd write per batch, not per push: a non-empty inbox already has a wake-up on its way
        // (its first push's), and the loop always takes the inbox after draining the eventfd.
        switch admission {
        case .refused(let refused): refused.forEach { $0.finish(.notSent(.closed), batched: false) }
        case .queued(wakeLoop: true): wake()
        case .queued(wakeLoop: false): break
        }
    }

    /// What became of pushes handed to the inbox.
    private enum Admission {
        case queued(wakeLoop: Bool)
        case refused([PendingPush])
    }

    /// Sends `pushes` on the live link from this thread when the loop is not in a turn (asleep in poll(), or about
    /// to be), nothing queued is ahead of them and the link has streams free for all of them. The loop reads their
    /// answers; it is woken only when something is left for it (below), after the write, off the pushes' path.
    /// False when nothing was done: the caller queues them.
    private func sendDirectly(_ pushes: [PendingPush]) -> Bool {
        guard pushes.count <= Self.directSendLimit, turn.tryLock() else { return false }
        defer { turn.unlock() }
        guard let link, inbox.withLock({ !$0.closing && !$0.recycle && $0.pushes.isEmpty }),
              machine.maySendDirectly(pushes.count, queued: waiting.count, session: link.facts())
        else { return false }
        // The loop went to sleep on an idle link, until its long idle PING: it must learn of these streams' deadlines
        // and switch to the busy PING. On a busy link its sleep already ends at the soonest deadline check.
        let loopSleepsIdle = machine.openStreams == 0
        var refused = false
        for push in pushes {
            // A session that takes no more streams (ids ran out): the loop moves what is left to a fresh link.
            if refused || !link.submit(push, authority: authority) {
                refused = true
                waiting.append(push)
            }
        }
        link.transmit()
        // The loop takes over what the write left: bytes the socket didn't take, a failed link, streams nghttp2 did
        // not send (`resend`), answers a callback finished meanwhile.
        if loopSleepsIdle || refused || machine.failure != nil || link.wantsWrite || !link.resend.isEmpty
            || !answers.isEmpty {
            wake()
        }
        return true
    }

    /// Stops the loop thread: waiting pushes finish `.notSent`, in-flight ones `.lost`. Idempotent.
    func close() {
        inbox.closeLoop(wake: wake)
    }

    /// Stops opening streams on the current link and moves new ones to a fresh link; streams in flight
    /// finish where they are. For provider-token errors, after which APNs may "wedge" a connection.
    /// Safe from any thread.
    func recycle() {
        inbox.withLock { $0.recycle = true }
        wake()
    }

    /// Takes what other threads queued. Loop thread only.
    func takeInbox() -> (pushes: [PendingPush], closing: Bool, recycle: Bool) {
        inbox.withLock { inbox in
            defer {
                inbox.pushes.removeAll()
                inbox.recycle = false
            }
            return (inbox.pushes, inbox.closing, inbox.recycle)
        }
    }

    private func wake() { wakeSignal.wake() }

    /// Empties the wake-up after poll() said it is readable. Loop thread only.
    func drainWake() { wakeSignal.drain() }

    var wakeDescriptor: Int32 { wakeSignal.descriptor }

    private func startLoop() -> pthread_t? {
        // The thread holds the loop's owner until `run` returns; `close()` is what ends it.
        RelayThread.start("apns.thread", name: "apns " + host) { self.run() }
    }
}

