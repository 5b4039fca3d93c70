import CShims
import Glibc
import Synchronization

/// A value guarded by a pthread mutex: the inboxes other threads hand work to a loop thread through, and the few
/// values several threads share (the provider token, a loop's command queue).
///
/// Not `Synchronization.Mutex`: the toolchain ships that module without ThreadSanitizer instrumentation, so TSan
/// cannot see its futex lock and reports every access through it as a race; a pthread mutex it intercepts.
/// Sendable only when `Value` is (as swift-nio's `NIOLockedValueBox`). A box of values that are not (a loop's inbox of
/// `PooledCall`s or `PendingPush`es) is shared only as part of an object whose own `@unchecked Sendable` says why,
/// and what a thread puts in it goes through `withLock(handing:)`: a `sending` argument, so the compiler checks that
/// the thread keeps no other reference to it.
package final class Locked<Value> {
    private let lock = PthreadLock()
    private var value: Value

    package init(_ value: Value) {
        self.value = value
    }

    package func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }

    /// `withLock`, handing `item` over to the guarded value (or back out through the result): the caller gives it up,
    /// which `sending` makes the compiler check.
    package func withLock<Item, Result>(handing item: sending Item, _ body: (inout Value, consuming Item) -> Result) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return body(&value, item)
    }
}

extension Locked: @unchecked Sendable where Value: Sendable {}

/// A pthread mutex owned by this object (destroyed and freed in `deinit`), for TSan as `Locked` says. `Locked` guards
/// a value with it; a loop thread holds one for its whole turn except while it sleeps in poll(), so that another
/// thread that gets it (`tryLock`, never waiting) may work on the loop's state itself meanwhile (`APNsHostLoop`'s
/// direct send).
///
/// Not `Sendable` itself: it is shared only as part of an object that is (`Locked`, `APNsHostLoop`).
final class PthreadLock {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    #if DEBUG
    /// The kernel id of the thread holding the lock, 0 when free: what `isHeldByCurrentThread` reads. Debug builds
    /// only (it costs a gettid per lock); the release build's assertions are compiled out with it.
    private let holder = Atomic<Int32>(0)
    #endif

    init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func lock() {
        pthread_mutex_lock(mutex)
        noteHeld()
    }

    func unlock() {
        #if DEBUG
        holder.store(0, ordering: .relaxed)
        #endif
        pthread_mutex_unlock(mutex)
    }

    /// True when the lock was free and is now held by the caller.
    func tryLock() -> Bool {
        guard pthread_mutex_trylock(mutex) == 0 else { return false }
        noteHeld()
        return true
    }

    /// Whether the calling thread holds the lock: for `assert`s only (always false in a release build, where
    /// `assert` is not evaluated).
    var isHeldByCurrentThread: Bool {
        #if DEBUG
        holder.load(ordering: .relaxed) == CShims_thread_id()
        #else
        false
        #endif
    }

    @inline(__always) private func noteHeld() {
        #if DEBUG
        holder.store(CShims_thread_id(), ordering: .relaxed)
        #endif
    }
}
