import Glibc

/// SIGTERM / SIGINT, taken synchronously with sigwait on a thread of their own (never a pool thread).
enum Signals {
    static let handled: [Int32] = [SIGTERM, SIGINT]

    /// Blocks the signals for this thread and every thread started after it; call before starting any.
    static func block() {
        var set = signalSet()
        pthread_sigmask(SIG_BLOCK, &set, nil)
        signal(SIGPIPE, SIG_IGN)
    }

    /// Waits for one of the signals and returns it.
    static func next() async -> Int32 {
        await withCheckedContinuation { (continuation: CheckedContinuation<Int32, Never>) in
            let box = Unmanaged.passRetained(Box(continuation))  // owned by the thread
            var thread = pthread_t()
            let rc = pthread_create(&thread, nil, { raw in
                let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
                var set = Signals.signalSet()
                var received: Int32 = 0
                sigwait(&set, &received)
                box.continuation.resume(returning: received)
                return nil
            }, box.toOpaque())
            precondition(rc == 0, "pthread_create failed: \(rc)")
            pthread_detach(thread)
        }
    }

    private final class Box {
        let continuation: CheckedContinuation<Int32, Never>
        init(_ continuation: CheckedContinuation<Int32, Never>) { self.continuation = continuation }
    }

    static func signalSet() -> sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        for signal in handled { sigaddset(&set, signal) }
        return set
    }
}
