/// A reference to an object that belongs to one loop's thread (a handler), carried through other threads and opened
/// only on that loop's thread, as swift-nio's `NIOLoopBound`: made on the loop's thread (checked) and holding the loop
/// strongly, so the loop it checks against is always there.
///
/// `@unchecked Sendable`: the reference crosses threads, but the object is only reached through `value`, and
/// `value` traps off the loop's thread, so the object is only ever used on one thread.
struct LoopBound<Owner: AnyObject>: @unchecked Sendable {
    private let owner: Owner
    private let loop: WebSocketsLoop

    /// Made by `WebSocketsLoop.bind(_:)`, on the loop's thread only (checked): off it, the object is not the
    /// caller's to hand out.
    init(_ owner: Owner, loop: WebSocketsLoop) {
        precondition(loop.isLoopThread, "a loop-bound object was made off its loop's thread")
        self.owner = owner
        self.loop = loop
    }

    /// The object. Its loop's thread only (checked).
    var value: Owner {
        precondition(loop.isLoopThread, "a loop-bound object was opened off its loop's thread")
        return owner
    }
}
