import Glibc
import Testing
@testable import Relay

/// An actor on the relay's executor, as the relay's owners (`PauseTracker`, `Ledger`, `OutboxSender`) are.
private actor OnRelayThread {
    nonisolated var unownedExecutor: UnownedSerialExecutor { RelayExecutor.shared.asUnownedSerialExecutor() }
    var order: [Int] = []

    func thread() -> pthread_t { pthread_self() }
    func isIsolated() -> Bool? { RelayExecutor.shared.isIsolatingCurrentContext() }
    func record(_ value: Int) { order.append(value) }
}

@Suite struct RelayExecutorTests {
    @Test func actorsTasksAndResumesShareOneThread() async {
        let actor = OnRelayThread()
        let actorThread = await actor.thread()
        #expect(await actor.isIsolated() == true)
        let taskThread = await Task(executorPreference: RelayExecutor.shared) { pthread_self() }.value
        #expect(pthread_equal(actorThread, taskThread) != 0)
        // A structured child of such a task, and a task resumed from a thread of its own, stay on it too.
        let (child, resumed) = await Task(executorPreference: RelayExecutor.shared) { () -> (pthread_t, pthread_t) in
            async let child = pthread_self()
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let thread = RelayThread.start("test.thread", name: "test") { continuation.resume() }
                if let thread { pthread_detach(thread) }
            }
            return (await child, pthread_self())
        }.value
        #expect(pthread_equal(child, actorThread) != 0)
        #expect(pthread_equal(resumed, actorThread) != 0)
        #expect(RelayExecutor.shared.isIsolatingCurrentContext() == false)
    }

    @Test func runsWorkInTheOrderItCame() async {
        let actor = OnRelayThread()
        await Task(executorPreference: RelayExecutor.shared) {
            // Each task is enqueued as it is made; one thread takes them first come, first run.
            let tasks = (0..<200).map { n in Task(executorPreference: RelayExecutor.shared) { await actor.record(n) } }
            for task in tasks { await task.value }
        }.value
        #expect(await actor.order == Array(0..<200))
    }
}
