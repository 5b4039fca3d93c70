import Glibc

/// The one thread the relay's Swift concurrency work runs on: its owners (`PauseTracker`, `Ledger`, `OutboxSender`)
/// and every task they start (`Task(executorPreference: RelayExecutor.shared)`), with what those await. The API
/// has a second one of its own (`api`).
///
/// Why one thread: on the default pool an actor hop, a detached task or a continuation resumed from a loop thread
/// woke another worker thread (about 12 wake-ups per pause, half of them between the pool's own two workers), and a
/// wake-up on the small VMs the relay runs on costs tens of microseconds of the waker's CPU and up to ~150 µs
/// before the woken thread runs. Here, an actor hop or a task started from this thread is a queue append; only work
/// handed over from another thread (a loop's answer, an API request) wakes it, and only when it sleeps.
///
/// Nothing the relay runs on it blocks for long: SQLite waits at most its busy timeout (`Store.busyTimeoutMs`), and
/// the one network write made from here (`APNsHostLoop.sendDirectly`: nghttp2 and `SSL_write` on an idle link, with
/// the link's `turn` lock taken without waiting) never waits on its non-blocking socket; every read, connect and
/// timer stays on the loop threads. The owners share it, so a call
/// between them runs at once on the same thread (no job is queued); each still sees only its own state.
final class RelayExecutor: SerialExecutor, TaskExecutor, @unchecked Sendable {
    // @unchecked Sendable: `jobs` and `sleeping` are only touched with `mutex` held; `thread` is written once, in
    // `init`, before any job can be enqueued (the executor's own thread reads it only while running a job, and each
    // job comes through `mutex`).
    static let shared = RelayExecutor(name: "pp-executor")
    /// The API's own: its handlers and credential checks (`API`, `Authorizer`), so a flood of requests never queues
    /// in front of a pause's work. Started on first use.
    static let api = RelayExecutor(name: "pp-api-work")

    // Owned by the instance, which lives as long as the process (`shared`, `api`; the initializer is private) and its
    // thread never returns: the mutex and the condition are never destroyed, by design, so there is no deinit.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    private var jobs: [UnownedJob] = []
    /// The thread waits on `condition`: the next enqueue must signal it.
    private var sleeping = false
    private var thread = pthread_t()

    /// The thread's name (`top -H`, gdb).
    private let name: String

    private init(name: String) {
        self.name = name
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        condition = .allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        pthread_cond_init(condition, nil)
        jobs.reserveCapacity(64)
        // The thread holds the executor for the life of the process (it is `shared`, never released). Without it
        // nothing of the pause path can run: the relay exits 2 (a start-up failure) with the reason.
        do {
            thread = try RelayThread.spawn(name) { self.run() }
        } catch {
            Log.error("startup.failed", ["error": error.description])
            exit(2)
        }
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        pthread_mutex_lock(mutex)
        jobs.append(job)
        let wake = sleeping
        sleeping = false
        pthread_mutex_unlock(mutex)
        if wake { pthread_cond_signal(condition) }
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor { UnownedSerialExecutor(ordinary: self) }

    func asUnownedTaskExecutor() -> UnownedTaskExecutor { UnownedTaskExecutor(ordinary: self) }

    func isIsolatingCurrentContext() -> Bool? { pthread_equal(pthread_self(), thread) != 0 }

    func checkIsolated() {
        precondition(pthread_equal(pthread_self(), thread) != 0, "not on the relay's executor thread")
    }

    /// Runs jobs in the order they came, taking every waiting one at each lock.
    private func run() {
        var batch: [UnownedJob] = []
        batch.reserveCapacity(64)
        let serial = asUnownedSerialExecutor()
        let preferred = asUnownedTaskExecutor()
        while true {
            pthread_mutex_lock(mutex)
            while jobs.isEmpty {
                sleeping = true
                pthread_cond_wait(condition, mutex)
            }
            sleeping = false
            swap(&batch, &jobs)
            pthread_mutex_unlock(mutex)
            for job in batch { job.runSynchronously(isolatedTo: serial, taskExecutor: preferred) }
            batch.removeAll(keepingCapacity: true)
        }
    }
}
