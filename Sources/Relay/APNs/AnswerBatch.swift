import RelayCore

/// Where the answers of `APNsHostLoop.submit`ted pushes go (a fan-out's mailbox). `post` runs on a connection's
/// loop thread with every answer that finished in one turn of the loop, so it must only hand them over.
protocol APNsAnswerSink: AnyObject, Sendable {
    func post(_ answers: [(index: Int, answer: APNsExchange)])
}

/// Answers of submitted pushes that finished during one turn of a connection's loop, handed to their sinks together
/// when the turn ends: the answers one read brings cost each fan-out one lock and at most one wake-up, not one of
/// each per answer.
///
/// Not `Sendable`: created with its connection and used only with that connection's `turn` held (by its loop
/// thread, or by a caller sending directly, whose nghttp2 callbacks may finish a push).
final class AnswerBatch {
    /// One entry per sink with answers this turn: as many as fan-outs under way at once, so a few, found by a scan
    /// rather than by hashing per answer.
    private var pending: [(sink: any APNsAnswerSink, answers: [(index: Int, answer: APNsExchange)])] = []

    var isEmpty: Bool { pending.isEmpty }

    func add(_ answer: APNsExchange, index: Int, for sink: any APNsAnswerSink) {
        if let entry = pending.firstIndex(where: { $0.sink === sink }) {
            pending[entry].answers.append((index, answer))
        } else {
            pending.append((sink, [(index, answer)]))
        }
    }

    /// Hands every collected answer over. Loop thread: at the start of each turn, before it sleeps, and when the loop
    /// ends.
    func flush() {
        guard !pending.isEmpty else { return }
        let batches = pending
        pending.removeAll(keepingCapacity: true)
        for batch in batches { batch.sink.post(batch.answers) }
    }
}
