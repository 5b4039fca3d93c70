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

/// Why one of the relay's threads could not be started: `pthread_create`'s error, with the fix.
struct ThreadStartError: Error, CustomStringConvertible {
    let name: String
    let code: Int32

    var description: String {
        "could not start thread \(name) (pthread_create: \(String(cString: strerror(code)))); raise the node's "
            + "thread or process limit (ulimit -u, the container's pids limit)"
    }
}

/// Starting the relay's own threads (loops, the executors, the signal reader), one way for each: `body` runs on
/// the new thread and holds what it captures until it returns; a failure to start is a value, never a trap.
enum LoopThread {
    /// Starts `body` on a thread named `name`: joinable (its starter joins it), or detached.
    @discardableResult
    static func spawn(_ name: String, detached: Bool = false,
                      _ body: sending @escaping () -> Void) throws(ThreadStartError) -> pthread_t {
        var thread = pthread_t()
        // The thread owns one reference to the box until `body` returns.
        let box = Unmanaged.passRetained(Box({
            nameThisThread(name)
            body()
        }))
        let code = pthread_create(&thread, nil, loopThreadMain, box.toOpaque())
        guard code == 0 else {
            box.release()
            throw ThreadStartError(name: name, code: code)
        }
        if detached { pthread_detach(thread) }
        return thread
    }

    /// As `spawn`, joinable; a failure is logged as `event` and gives nil (the caller goes on without the thread:
    /// its work fails as a connection that could not be opened would).
    static func start(_ event: String, name: String, _ body: sending @escaping () -> Void) -> pthread_t? {
        do {
            return try spawn(name, body)
        } catch {
            Log.error(event, ["error": error.description])
            return nil
        }
    }

    /// Not `Sendable`: what `body` captures was sent to the new thread (`sending`), which alone runs it.
    fileprivate final class Box {
        let body: () -> Void
        init(_ body: @escaping () -> Void) { self.body = body }
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
