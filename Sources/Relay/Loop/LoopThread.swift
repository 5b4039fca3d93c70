import CShims
import Glibc

/// The wake-up of a poll() loop: an eventfd that any thread writes and the loop drains. Owns the descriptor.
final class WakeSignal: Sendable {
    let descriptor: Int32

    init() throws(IOError) {
        descriptor = try IOError.check("eventfd") { eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC)) }
    }

    deinit { close(descriptor) }

    /// Any thread.
    func wake() {
        var one: UInt64 = 1
        _ = write(descriptor, &one, 8)
    }

    /// Empties it after poll() said it is readable. Loop thread only.
    func drain() {
        var count: UInt64 = 0
        _ = read(descriptor, &count, 8)
    }
}

/// Names the calling thread (`top -H`, gdb, a stack dump), cut to the 15 bytes Linux keeps: every thread the relay
/// starts calls it first, so they don't all read `prefect-push`.
func nameThisThread(_ name: String) {
    _ = CShims_name_this_thread(String(decoding: Array(name.utf8.prefix(15)), as: UTF8.self))
}

/// A loop's own thread (APNs connections, the Prefect pool): `body` runs on it and holds what it captures until it
/// returns; whoever started it joins it.
enum LoopThread {
    /// The started thread, named `name`, or nil (logged as `event`) when it could not be created.
    static func start(_ event: String, name: String, _ body: @escaping @Sendable () -> Void) -> pthread_t? {
        var thread = pthread_t()
        // The thread owns one reference to the box until `body` returns.
        let box = Unmanaged.passRetained(Box({
            nameThisThread(name)
            body()
        }))
        guard pthread_create(&thread, nil, loopThreadMain, box.toOpaque()) == 0 else {
            box.release()
            Log.error(event, ["error": "pthread_create failed"])
            return nil
        }
        return thread
    }

    fileprivate final class Box: Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
}

/// The thread's entry point; `argument` is an owned reference to its `LoopThread.Box`.
private func loopThreadMain(_ argument: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    guard let argument else { preconditionFailure("a loop thread started without its body") }
    Unmanaged<LoopThread.Box>.fromOpaque(argument).takeRetainedValue().body()
    return nil
}

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
