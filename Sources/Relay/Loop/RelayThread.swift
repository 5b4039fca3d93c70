import CShims
import Glibc

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
enum RelayThread {
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

/// The thread's entry point; `argument` is an owned reference to its `RelayThread.Box`.
private func loopThreadMain(_ argument: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    guard let argument else { preconditionFailure("a loop thread started without its body") }
    Unmanaged<RelayThread.Box>.fromOpaque(argument).takeRetainedValue().body()
    return nil
}
