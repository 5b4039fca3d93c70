@testable import FakeAPNs
import Testing

/// The fake's reading of a request's device token (its scripts and `requests(for:)` go by it).
@Suite struct FakeAPNsRequestTests {
    private func request(path: String) -> FakeAPNs.Request {
        FakeAPNs.Request(connection: 1, stream: 1, method: "POST", path: path, headers: [:], body: "", openStreams: 1)
    }

    @Test func theTokenIsThePathsLastSegment() {
        #expect(request(path: "/3/device/" + String(repeating: "ab", count: 32)).token == String(repeating: "ab", count: 32))
        #expect(request(path: "/3/device/abc/").token == "abc")  // a trailing slash is no segment
        #expect(request(path: "abc").token == "abc")
        #expect(request(path: "/3/device/").token == "device")
        #expect(request(path: "").token == "")
        #expect(request(path: "///").token == "")
    }
}
