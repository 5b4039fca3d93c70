import RelayCore

/// The durable outbox, sent: a job's pushes are written before they are sent (`enqueue`, through the `Ledger`),
/// sent over the shared APNs connections (`send`), and each answer is settled in batches (one transaction per
/// `settleBatch` answers or per `settleDelay`: not per push, nor held until the fan-out ends). Stored pushes that
/// are due (after a restart, a lost connection, a 429/5xx) are sent again (`drain`). It owns what is being sent
/// now, so no push is picked up twice.
actor OutboxSender {
    /// On the relay's one executor thread, with the other owners (`RelayExecutor`).
    nonisolated var unownedExecutor: UnownedSerialExecutor { RelayExecutor.shared.asUnownedSerialExecutor() }

    /// Answers written per transaction at most; fewer when `settleDelay` passes first.
    static let settleBatch = 64

    /// How long an answer may wait in memory for others to share its transaction. A kill loses the answers not yet
    /// written, and their pushes are sent again after the restart: this bounds them to the ones APNs answered in
    /// the last few ms (or still in flight), not a fan-out's worth.
    static let settleDelay: Duration = .milliseconds(4)

    /// How often pushes past their expiry (and message rows nothing refers to) are pruned.
    static let pruneInterval: Double = 300

    let ledger: Ledger
    /// nil: no APNs key; pushes are stored for nobody and nothing is sent.
    nonisolated let apns: APNsClient?
    let tally: MetricsTally
    /// The clock of the outbox's schedule (`SystemClock.steadyNow`, which a step of the wall clock does not move):
    /// every `due_ms`, the drain, the prune interval, and the give-up at a push's expiry (a deadline like the rest;
    /// the `apns-expiration` APNs sees was set from the wall clock when the push was built).
    let now: @Sendable () -> Double
    let backoff = Backoff.outbox

    /// Outbox rows being sent now (never picked up twice), answers waiting to be written, and when the soonest
    /// stored push is due (unix ms; nil: nothing stored).
    var sending: Set<Int64> = []
    var settling: [OutboxSettlement] = []
    /// Fan-outs written as their audience and being answered now: how many members' answers are not yet written.
    /// The one whose last answer is written is closed in that transaction (`Store.settle`).
    var openFanOuts: [Int64: Int] = [:]
    /// APNs' answers to keep for `prefect-push status`, written with `settling`.
    var answersKept: [PushAnswer] = []
    /// A flush of `settling` is due within `settleDelay` (`flushSoon`).
    var settleTimerArmed = false
    var nextDueMs: Int64?
    var lastPrune = 0.0
    /// Resends running now, counted so shutdown can wait for them (bounded).
    var backgroundWork = 0

    /// `nextDueMs`: when the soonest push stored before this start is due (`Ledger.Startup`).
    init(ledger: Ledger, apns: APNsClient?, nextDueMs: Int64?, tally: MetricsTally,
         now: @escaping @Sendable () -> Double = SystemClock.steadyNow) {
        self.ledger = ledger
        self.apns = apns
        self.tally = tally
        self.now = now
        self.nextDueMs = nextDueMs
    }

    func nowMs() -> Int64 { Int64(now() * 1000) }

    /// Writes a job's pushes with what goes alongside them (`Ledger.enqueue`); what was queued is marked as being
    /// sent, for `send`.
    func enqueue(_ batches: [OutboxBatch], alongside: Ledger.Alongside) -> Ledger.Enqueued {
        let dueMs = nowMs()
        let enqueued = ledger.inOrder { $0.enqueue(batches, alongside: alongside, dueMs: dueMs) }
        // Under way now; their answers reschedule what needs another try (`settled`). Without APNs nothing answers a
        // fan-out's members: it stays open, and expires like rows (`prune`).
        if case .queued(let items) = enqueued {
            for item in items {
                if item.id != 0 {
                    sending.insert(item.id)
                } else if apns != nil {
                    openFanOuts[item.messageID, default: 0] += 1
                }
            }
        }
        return enqueued
    }

    /// A job's pushes written (`enqueue`), then sent, in one call: the pause path's one hop into this actor. Returns
    /// once the fan-out is answered.
    func enqueueAndSend(_ batches: [OutboxBatch], alongside: Ledger.Alongside, receivedAt: Double, runID: String,
                        purpose: String) async -> Ledger.Enqueued {
        let enqueued = enqueue(batches, alongside: alongside)
        if case .queued(let items) = enqueued {
            await send(items, receivedAt: receivedAt, runID: runID, purpose: purpose)
        }
        return enqueued
    }

    /// Every tick: answers not yet written, stored pushes that are due, and now and then the prune.
    func tick() {
        flushSettled()
        drain()
        if now() - lastPrune >= OutboxSender.pruneInterval { prune() }
    }

    /// The push pending in the outbox and the oldest one's age, for `/metrics`; nil when the store can't say.
    func pending() -> (count: Int, oldestSeconds: Double)? {
        let time = now()
        return ledger.inOrder { ledger in
            ledger.attempt("metrics") { store in
                let pending = try store.pendingSummary()
                return (pending.count, pending.oldestMs.map { max(0, time - Double($0) / 1000) } ?? 0)
            }
        }
    }
}
