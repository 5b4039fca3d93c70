import Testing
@testable import Relay
@testable import RelayCore

@Suite struct AnswerBatchTests {
    /// Records what it is posted, in order.
    final class Sink: APNsAnswerSink, @unchecked Sendable {
        var posts: [[Int]] = []
        func post(_ answers: [(index: Int, answer: APNsExchange)]) { posts.append(answers.map(\.index)) }
    }

    @Test func eachSinkGetsItsOwnAnswersInOrderOncePerFlush() {
        let batch = AnswerBatch()
        let (a, b, c) = (Sink(), Sink(), Sink())
        // Interleaved, as answers of concurrent fan-outs come off one connection.
        for (index, sink) in [(0, a), (1, a), (0, b), (2, a), (0, c), (1, b), (3, a), (1, c)] {
            batch.add(.timedOut, index: index, for: sink)
        }
        batch.flush()
        #expect(a.posts == [[0, 1, 2, 3]])
        #expect(b.posts == [[0, 1]])
        #expect(c.posts == [[0, 1]])
        batch.flush()  // nothing new: nobody is posted an empty batch
        #expect(a.posts.count == 1 && b.posts.count == 1 && c.posts.count == 1)
        batch.add(.timedOut, index: 9, for: b)
        batch.flush()
        #expect(b.posts == [[0, 1], [9]])
        #expect(a.posts.count == 1)
    }
}
