import Glibc

/// What other threads share with a loop thread: its thread, once started, and whether it was told to close.
protocol LoopInbox {
    var thread: pthread_t? { get set }
    var closing: Bool { get set }
}

extension Locked where Value: LoopInbox {
    /// Tells the loop to close, wakes it and joins its thread. Idempotent; any thread but the loop's.
    func closeLoop(wake: () -> Void) {
        let thread = withLock { inbox -> pthread_t? in
            inbox.closing = true
            defer { inbox.thread = nil }
            return inbox.thread
        }
        guard let thread else { return }
        wake()
        pthread_join(thread, nil)
    }
}
