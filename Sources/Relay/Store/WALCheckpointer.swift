import CSQLite
import Glibc
import Synchronization

/// Copies the write-ahead log back into the database file on a thread and a connection of its own, so no commit on
/// the relay's path pays for it.
///
/// SQLite's automatic checkpoint runs inside whichever commit takes the log past 1,000 pages, fsyncs included: that
/// commit (an announce's outbox write, say) took several ms instead of ~0.1, and these were the relay's worst push
/// latencies (p99 4.5 ms; 2.0 ms without them). `Store` turns the automatic one off; this runs a PASSIVE checkpoint,
/// which never waits for the relay's reads and writes nor holds them up, once the log holds `Policy.frames` pages or
/// `Policy.maxAge` after the last one, whichever comes first; it looks every `intervalMs`.
///
/// Not every second: once a checkpoint has copied the whole log, the relay's next commit starts the log over and,
/// with `synchronous = NORMAL`, syncs its header first: a 0.3-0.5 ms `fdatasync` on the relay's own thread. At one
/// checkpoint a second, one pause in twenty paid it on the way to its push. The log is reused from its start and
/// `Store` caps what the file keeps (`journal_size_limit`), so it stays near `Policy.frames` pages.
final class WALCheckpointer: Sendable {
    static let intervalMs: Int32 = 1_000

    /// When a checkpoint is due.
    struct Policy: Sendable {
        /// Pages in the log (4 KiB each) that call for a checkpoint: SQLite's own automatic threshold.
        var frames = 1_000
        /// Seconds after the last checkpoint that a log with anything new in it is checkpointed anyway, so a quiet
        /// relay's file is up to date within this long.
        var maxAge: Double = 30
        /// Pages past which the log has run away: under writes that never pause (thousands of pauses a minute), a
        /// PASSIVE checkpoint never catches up with the log's end, so the log is never started over and grew by
        /// ~75 KB a pause (235 MB after 3,000). Past this a TRUNCATE checkpoint holds writers back for the copy
        /// (a few ms) and empties the file.
        var runawayFrames = 4_000

        /// Whether to checkpoint now, given the log's pages, those it held at the last checkpoint and that one's age.
        func isDue(frames: Int, atLast: Int, secondsSince: Double) -> Bool {
            frames != atLast && (frames >= self.frames || secondsSince >= maxAge)
        }
    }

    private struct Inbox: LoopInbox {
        var thread: pthread_t?
        var closing = false
    }

    private let inbox = Locked(Inbox())
    private let wakeSignal: WakeSignal
    /// The log's pages, as the relay's writing connection reports them; `Store` has it watch that connection.
    let progress: WALProgress

    /// Opens the second connection and starts the thread that owns it now: a file it can't open, or a thread that
    /// can't start, fails the store's start rather than leaving a log that is never checkpointed.
    init(path: String, policy: Policy = Policy()) throws {
        wakeSignal = try WakeSignal()
        progress = WALProgress(policy: policy, wake: wakeSignal)
        // Sent to the checkpointer's thread (`RelayThread.start` takes a `sending` closure): the compiler checks that
        // nothing else touches this connection.
        let database = try Database(path: path)
        let (wake, inbox, progress) = (wakeSignal, self.inbox, progress)
        guard let thread = RelayThread.start("store.checkpointer", name: "pp-checkpoint", {
            WALCheckpointer.run(database, progress: progress, policy: policy, wake: wake, inbox: inbox)
        }) else {
            throw StartupError("DB_PATH", "could not start the thread that checkpoints the database; check the node's thread limit")
        }
        inbox.withLock { $0.thread = thread }
    }

    /// Stops and joins the thread. Idempotent.
    func stop() { inbox.closeLoop(wake: wakeSignal.wake) }

    deinit { stop() }

    private static func run(_ database: Database, progress: WALProgress, policy: Policy, wake: WakeSignal,
                            inbox: Locked<Inbox>) {
        var failing = false
        // A TRUNCATE checkpoint waits this long for the relay's write under way (they take well under a millisecond).
        try? database.execute("PRAGMA busy_timeout = 250")
        // What a previous run (or the migration) left in the log is copied at once.
        var atLast = -1
        var lastAt = -Double.infinity
        while !inbox.withLock({ $0.closing }) {
            let frames = progress.frames.load(ordering: .relaxed)
            let now = SystemClock.monotonic()
            var wait = intervalMs
            if policy.isDue(frames: frames, atLast: atLast, secondsSince: now - lastAt) {
                let truncate = frames >= policy.runawayFrames
                do {
                    // The answer's first column is 1 when readers or a writer held the log past the busy timeout
                    // (a TRUNCATE only: a PASSIVE one copies what it can and never waits).
                    let blocked = try database.scalarInt("PRAGMA wal_checkpoint(\(truncate ? "TRUNCATE" : "PASSIVE"))") == 1
                    if failing { Log.info("store.checkpoint_recovered") }
                    failing = false
                    if blocked {
                        // A runaway log grows ~16 MB a second under a flood of pauses: try again soon, not in a second.
                        wait = runawayRetryMs
                    } else {
                        (atLast, lastAt) = (frames, now)
                    }
                } catch {
                    // The log just grows until a checkpoint succeeds again (or the relay's stop does one); said once.
                    if !failing { Log.warn("store.checkpoint_failed", ["error": "\(error)"]) }
                    failing = true
                }
            }
            var ready = pollfd(fd: wake.descriptor, events: Int16(POLLIN), revents: 0)
            if poll(&ready, 1, wait) > 0 { wake.drain() }
        }
    }

    /// How soon a TRUNCATE checkpoint that could not get the log is tried again.
    static let runawayRetryMs: Int32 = 20
}

/// How many pages the write-ahead log holds, as the writing connection last said (`sqlite3_wal_hook`, after each
/// commit); read by the checkpointer's thread, which the commit that takes the log past a threshold wakes: polled
/// once a second, a log written at thousands of pauses a minute ran past 32 MB between two looks.
final class WALProgress: Sendable {
    let frames = Atomic<Int>(0)
    private let thresholds: (due: Int, runaway: Int)
    private let wake: WakeSignal

    fileprivate init(policy: WALCheckpointer.Policy, wake: WakeSignal) {
        thresholds = (policy.frames, policy.runawayFrames)
        self.wake = wake
    }

    /// Reports the log's pages after each commit on `database` (the hook SQLite's automatic checkpoint would use;
    /// `Store` turned that off). `stopWatching` must run before this object goes.
    func watch(_ database: Database) {
        sqlite3_wal_hook(database.handle, { context, _, _, frames in
            Unmanaged<WALProgress>.fromOpaque(context!).takeUnretainedValue().committed(frames: Int(frames))
            return SQLITE_OK
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    func stopWatching(_ database: Database) { sqlite3_wal_hook(database.handle, nil, nil) }

    /// One eventfd write per threshold crossed, not one per commit.
    private func committed(frames now: Int) {
        let before = frames.exchange(now, ordering: .relaxed)
        if (before < thresholds.due && now >= thresholds.due) || (before < thresholds.runaway && now >= thresholds.runaway) {
            wake.wake()
        }
    }
}
