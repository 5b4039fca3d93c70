/// A reference to an object that belongs to one loop's thread (a handler), carried through other threads and opened
/// only on that loop's thread, which `value` asserts (as swift-nio's `NIOLoopBound`).
///
/// `@unchecked Sendable`: the reference crosses threads, but the object is only reached through `value`, and
/// `value` traps off the loop's thread, so the object is only ever used on one thread.
struct LoopBound<Owner: AnyObject>: @unchecked Sendable {
    private let owner: Owner
    private unowned let loop: WebSocketsLoop

    /// Made by `WebSocketsLoop.perform(on:)` only.
    init(_ owner: Owner, loop: WebSocketsLoop) {
        self.owner = owner
        self.loop = loop
    }

    /// The object. Its loop's thread only (checked).
    var value: Owner {
        precondition(loop.isLoopThread, "a loop-bound object was opened off its loop's thread")
        return owner
    }
}
