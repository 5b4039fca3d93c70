import Glibc

/// A value guarded by a pthread mutex: the inboxes other threads hand work to a loop thread through, and the few
/// values several threads share (the provider token, a loop's command queue).
///
/// Not `Synchronization.Mutex`: the toolchain ships that module without ThreadSanitizer instrumentation, so TSan
/// cannot see its futex lock and reports every access through it as a race; a pthread mutex it intercepts.
/// `@unchecked Sendable`: every access to `value` happens inside `withLock`.
package final class Locked<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    package init(_ value: Value) {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        self.value = value
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    package func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
