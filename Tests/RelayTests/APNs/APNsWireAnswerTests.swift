import Testing
@testable import Relay
@testable import RelayCore

/// The APNs answers as they come off the HTTP/2 stream (`HeaderValue`, `APNsClient.outcome`), which live in
/// `Relay`; the outcomes' rules themselves are in RelayCoreTests' `APNsOutcomeTests`.
@Suite struct APNsWireAnswerTests {
    @Test func statusHeaderValuesAreReadAsDigitsOnly() {
        func integer(_ text: String) -> Int? {
            Array(text.utf8).withUnsafeBufferPointer { HeaderValue.integer($0) }
        }
        #expect(integer("200") == 200)
        #expect(integer("0410") == 410)
        #expect(integer("") == nil)
        #expect(integer("20 0") == nil)
        #expect(integer("+200") == nil)
        #expect(integer("-1") == nil)
        #expect(integer("1234567890") == nil)  // longer than any status: refused, not overflowed
    }

    @Test func wireAnswersBecomeOutcomes() {
        let gone = APNsClient.outcome(of: .response(status: 410, apnsID: "id-1",
                                                    body: Array(#"{"reason":"Unregistered","timestamp":1700000000123}"#.utf8)))
        #expect(gone == .rejected(APNsRejection(status: 410, reason: .unregistered, timestamp: 1_700_000_000_123, apnsID: "id-1")))
        #expect(APNsClient.outcome(of: .response(status: 200, apnsID: "id-2", body: [])) == .delivered(apnsID: "id-2"))
        #expect(APNsClient.outcome(of: .response(status: 500, apnsID: nil, body: Array("oops".utf8)))
            == .rejected(APNsRejection(status: 500, reason: nil)))
        #expect(APNsClient.outcome(of: .notSent(.connectFailed("x"))) == .unreachable("x"))
        #expect(APNsClient.outcome(of: .lost("y")) == .connectionLost("y"))
    }
}
