import Glibc

/// A value guarded by a pthread mutex: the inboxes other threads hand work to a loop thread through, and the few
/// values several threads share (the provider token, a loop's command queue).
///
/// Not `Synchronization.Mutex`: the toolchain ships that module without ThreadSanitizer instrumentation, so TSan
/// cannot see its futex lock and reports every access through it as a race; a pthread mutex it intercepts.
/// `@unchecked Sendable`, whatever `Value` is (as the standard library's `Mutex`): every access to `value` happens
/// inside `withLock`, and what a thread puts in it (a `PooledCall`, a `PendingPush`, a connected stream) is handed
/// over: the thread keeps no other reference, so those types need not be, and are not, `Sendable` themselves. (The
/// 6.3 compiler's region checks can't yet take a captured value into an `inout sending` parameter, or this would say
/// so in its signature.)
package final class Locked<Value>: @unchecked Sendable {
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
}

/// A pthread mutex owned by this object (destroyed and freed in `deinit`), for TSan as `Locked` says. `Locked` guards
/// a value with it; a loop thread holds one for its whole turn except while it sleeps in poll(), so that another
/// thread that gets it (`tryLock`, never waiting) may work on the loop's state itself meanwhile (`APNsHostLoop`'s
/// direct send).
///
/// Not `Sendable` itself: it is shared only as part of an object that is (`Locked`, `APNsHostLoop`).
final class PthreadLock {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func lock() { pthread_mutex_lock(mutex) }
    func unlock() { pthread_mutex_unlock(mutex) }
    /// True when the lock was free and is now held by the caller.
    func tryLock() -> Bool { pthread_mutex_trylock(mutex) == 0 }
}
