import Glibc

/// Copies the write-ahead log back into the database file on a thread and a connection of its own, so no commit on
/// the relay's path pays for it.
///
/// SQLite's automatic checkpoint runs inside whichever commit takes the log past 1,000 pages, fsyncs included: that
/// commit (an announce's outbox write, say) took several ms instead of ~0.1, and these were the relay's worst push
/// latencies (p99 4.5 ms; 2.0 ms without them). `Store` turns the automatic one off; this runs a PASSIVE checkpoint
/// every `intervalMs`, which never waits for the relay's reads and writes nor holds them up. The log is reused from
/// its start once it has all been copied, and `Store` caps what the file keeps (`journal_size_limit`), so it stays
/// as small as the busiest interval's writes.
final class WALCheckpointer: Sendable {
    static let intervalMs: Int32 = 1_000

    private struct Inbox: LoopInbox {
        var thread: pthread_t?
        var closing = false
    }

    private let inbox = Locked(Inbox())
    private let wakeSignal: WakeSignal

    /// Opens the second connection and starts the thread that owns it now: a file it can't open, or a thread that
    /// can't start, fails the store's start rather than leaving a log that is never checkpointed.
    init(path: String) throws {
        wakeSignal = try WakeSignal()
        let connection = Connection(try Database(path: path))
        let wake = wakeSignal
        let inbox = self.inbox
        guard let thread = LoopThread.start("store.checkpointer", {
            WALCheckpointer.run(connection.database, wake: wake, inbox: inbox)
        }) else {
            throw StartupError("DB_PATH", "could not start the thread that checkpoints the database; check the node's thread limit")
        }
        inbox.withLock { $0.thread = thread }
    }

    /// Stops and joins the thread. Idempotent.
    func stop() { inbox.closeLoop(wake: wakeSignal.wake) }

    deinit { stop() }

    private static func run(_ database: Database, wake: WakeSignal, inbox: Locked<Inbox>) {
        var failing = false
        while !inbox.withLock({ $0.closing }) {
            var ready = pollfd(fd: wake.descriptor, events: Int16(POLLIN), revents: 0)
            if poll(&ready, 1, intervalMs) > 0 {
                wake.drain()
                continue
            }
            do {
                try database.execute("PRAGMA wal_checkpoint(PASSIVE)")
                if failing { Log.info("store.checkpoint_recovered") }
                failing = false
            } catch {
                // The log just grows until a checkpoint succeeds again (or the relay's stop does one); said once.
                if !failing { Log.warn("store.checkpoint_failed", ["error": "\(error)"]) }
                failing = true
            }
        }
    }

    /// Hands the connection to the thread that will own it. `@unchecked Sendable`: nothing else ever touches it.
    private final class Connection: @unchecked Sendable {
        let database: Database
        init(_ database: Database) { self.database = database }
    }
}
