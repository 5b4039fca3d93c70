import Glibc

/// Written once by `Signals.install()` before any handler can run; the handler only reads it. A plain global
/// because a signal handler can capture nothing.
nonisolated(unsafe) private var signalPipeWrite: Int32 = -1

/// SIGTERM / SIGINT turned into a byte on a pipe (the self-pipe trick), read by a thread of its own. Whatever
/// thread the kernel picks to take the signal (the runtime's pool threads mask most signals, the main thread
/// doesn't), the handler only does an async-signal-safe write(2).
enum Signals {
    nonisolated(unsafe) private static var readEnd: Int32 = -1  // set once in install(), before any reader

    /// Installs the handlers; call first thing at start-up.
    static func install() {
        var fds: [Int32] = [-1, -1]
        precondition(pipe(&fds) == 0, "pipe failed: \(errno)")
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        readEnd = fds[0]
        signalPipeWrite = fds[1]
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { signal in
            var byte = UInt8(truncatingIfNeeded: signal)
            _ = write(signalPipeWrite, &byte, 1)
        }
        sigemptyset(&action.sa_mask)
        action.sa_flags = SA_RESTART
        sigaction(SIGTERM, &action, nil)
        sigaction(SIGINT, &action, nil)
        signal(SIGPIPE, SIG_IGN)  // a peer hanging up must give EPIPE, not end the relay
    }

    /// Waits for SIGTERM or SIGINT and returns which.
    /// A relay that can't start the thread that waits for them could never be stopped in order: it exits 2 (a
    /// start-up failure) with the reason.
    static func next() async -> Int32 {
        let end = readEnd
        return await withCheckedContinuation { (continuation: CheckedContinuation<Int32, Never>) in
            do {
                try RelayThread.spawn("pp-signals", detached: true) {
                    var byte: UInt8 = 0
                    while read(end, &byte, 1) < 0 && errno == EINTR {}
                    continuation.resume(returning: Int32(byte))
                }
            } catch {
                Log.error("startup.failed", ["error": "\(error)"])
                exit(2)
            }
        }
    }
}
