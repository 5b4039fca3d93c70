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
