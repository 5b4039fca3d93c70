import Testing
@testable import RelayCore

/// The pool's response parser on bytes alone: every framing it reads, split at every read boundary, and the inputs
/// it must refuse.
@Suite struct HTTP1ResponseTests {
    /// Feeds `text` in pieces of `step` bytes, then closes when `eof`.
    func parse(_ text: String, step: Int = .max, eof: Bool = false, maxHeaderBytes: Int = 64 * 1024,
               maxBody: Int = 8 * 1024 * 1024) -> HTTP1ResponseParser.Progress {
        parse(Array(text.utf8), step: step, eof: eof, maxHeaderBytes: maxHeaderBytes, maxBody: maxBody)
    }

    func parse(_ bytes: [UInt8], step: Int = .max, eof: Bool = false, maxHeaderBytes: Int = 64 * 1024,
               maxBody: Int = 8 * 1024 * 1024) -> HTTP1ResponseParser.Progress {
        var parser = HTTP1ResponseParser(maxHeaderBytes: maxHeaderBytes, maxBody: maxBody)
        var progress = HTTP1ResponseParser.Progress.needMore
        var index = 0
        while index < bytes.count {
            let end = index + min(step, bytes.count - index)
            progress = parser.feed(Array(bytes[index..<end]))
            index = end
        }
        return eof ? parser.finishAtEOF() : progress
    }

    func response(_ progress: HTTP1ResponseParser.Progress) -> HTTP1Response? {
        if case .complete(let response) = progress { return response }
        return nil
    }

    func failed(_ progress: HTTP1ResponseParser.Progress) -> Bool {
        if case .failed = progress { return true }
        return false
    }

    static let contentLength = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{\"id\":\"abc\"}\n"
    static let chunked = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
        + "5;name=value\r\n{\"a\":\r\n3\r\n1}\n\r\n0 ; last\r\nX-Trailer: yes\r\nOther: 1\r\n\r\n"

    @Test func contentLengthBodyAtEveryReadBoundary() {
        let total = Self.contentLength.utf8.count
        for step in 1...total {
            let parsed = response(parse(Self.contentLength, step: step))
            #expect(parsed?.status == 200, "step \(step)")
            #expect(parsed?.body == Array("{\"id\":\"abc\"}\n".utf8), "step \(step)")
            #expect(parsed?.reusable == true, "step \(step)")
            #expect(parsed?.header("CONTENT-TYPE") == "application/json")
        }
        // One byte short is not an answer yet; the close makes it a failure.
        #expect(parse(String(Self.contentLength.dropLast())) == .needMore)
        #expect(failed(parse(String(Self.contentLength.dropLast()), eof: true)))
    }

    @Test func chunkedBodyWithExtensionsAndTrailersAtEveryReadBoundary() {
        for step in 1...Self.chunked.utf8.count {
            let parsed = response(parse(Self.chunked, step: step))
            #expect(parsed?.body == Array("{\"a\":1}\n".utf8), "step \(step)")
            #expect(parsed?.reusable == true, "step \(step)")
        }
        let plain = "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\nA\r\n0123456789\r\n0\r\n\r\n"
        #expect(response(parse(plain, step: 3))?.body == Array("0123456789".utf8))
        // Bare LF line ends are read too.
        let lf = "HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n2\nok\n0\n\n"
        #expect(response(parse(lf, step: 1))?.body == Array("ok".utf8))
    }

    @Test func bodyUntilClose() {
        let text = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nall of it"
        #expect(parse(text) == .needMore)
        let parsed = response(parse(text, step: 4, eof: true))
        #expect(parsed?.body == Array("all of it".utf8))
        #expect(parsed?.reusable == false)
        // A transfer coding that isn't chunked also runs to the close, even beside a Content-Length.
        let gzip = response(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 2\r\n\r\nabcd", eof: true))
        #expect(gzip?.body == Array("abcd".utf8))
    }

    @Test func connectionReuseRules() {
        #expect(response(parse("HTTP/1.1 204 No Content\r\n\r\n"))?.reusable == true)
        #expect(response(parse("HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 0\r\n\r\n"))?
            .reusable == false)
        #expect(response(parse("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"))?.reusable == false)
        // Bytes past the end of the answer: something is off, don't reuse.
        #expect(response(parse("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1"))?.reusable == false)
        // Chunked beside Content-Length: chunked wins, the connection is not trusted after.
        let both = response(parse("HTTP/1.1 200 OK\r\nContent-Length: 99\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n"))
        #expect(both?.body == [UInt8(ascii: "x")])
        #expect(both?.reusable == false)
    }

    @Test func interimResponsesAreSkipped() {
        let text = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
            + "HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\n\r\nnope"
        let parsed = response(parse(text, step: 7))
        #expect(parsed?.status == 404)
        #expect(parsed?.body == Array("nop".utf8))
        #expect(parsed?.reusable == false)  // the extra "e"
    }

    @Test func retryAfterAndFoldedHeaders() {
        let text = "HTTP/1.1 503 Service Unavailable\r\nretry-after:  7 \r\nX-Long: a\r\n  b\r\nContent-Length: 0\r\n\r\n"
        let parsed = response(parse(text))
        #expect(parsed?.header("Retry-After") == "7")
        #expect(parsed?.header("x-long") == "a b")
    }

    @Test func oversizedAnswersFail() {
        let huge = "HTTP/1.1 200 OK\r\n" + String(repeating: "X-Pad: " + String(repeating: "p", count: 1000) + "\r\n", count: 70)
        #expect(failed(parse(huge, step: 4096)))
        #expect(failed(parse(huge)))
        #expect(failed(parse("HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n", maxBody: 10)))
        let chunks = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nabcdef\r\n6\r\nabcdef\r\n0\r\n\r\n"
        #expect(failed(parse(chunks, maxBody: 10)))
        #expect(response(parse(chunks, maxBody: 12))?.body.count == 12)
        #expect(failed(parse("HTTP/1.1 200 OK\r\n\r\n" + String(repeating: "z", count: 11), maxBody: 10)))
        #expect(failed(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + String(repeating: "0", count: 5000))))
        let trailers = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n" + String(repeating: "T: x\r\n", count: 200)
        #expect(failed(parse(trailers, maxHeaderBytes: 1024)))
    }

    @Test(arguments: [
        "HTTP/2 200 OK\r\n\r\n",
        "HTTP/1.1 2OO OK\r\n\r\n",
        "HTTP/1.1 200OK\r\n\r\n",
        "ICY 200 OK\r\n\r\n",
        "HTTP/1.1 099 Low\r\n\r\n",
        "HTTP/1.1 101 Switching Protocols\r\n\r\n",
        "HTTP/1.1 200 OK\r\nNo colon here\r\n\r\n",
        "HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
        "HTTP/1.1 200 OK\r\n : x\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\nab",
        "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffff\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\rX",
    ])
    func malformedAnswersFail(_ text: String) {
        #expect(failed(parse(text)), "\(text.debugDescription)")
        #expect(failed(parse(text, step: 1, eof: true)), "\(text.debugDescription)")
    }

    @Test func closedEarly() {
        var parser = HTTP1ResponseParser()
        #expect(failed(parser.finishAtEOF()))
        #expect(parser.receivedAny == false)
        var half = HTTP1ResponseParser()
        _ = half.feed(Array("HTTP/1.1 200".utf8))
        #expect(half.receivedAny)
        #expect(failed(half.finishAtEOF()))
        #expect(failed(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nab", eof: true)))
    }

    /// Real responses with random bytes damaged, fed in reads of 1…256 bytes, then closed: the parser ends without
    /// trapping and within its limits (`Fuzz/ResponseHarness.swift` does the same with libFuzzer's inputs).
    @Test func damagedResponsesStayWithinTheLimits() {
        var generator = SystemRandomNumberGenerator()
        let seeds = [Self.contentLength, Self.chunked, "HTTP/1.1 200 OK\r\n\r\nbody"].map { Array($0.utf8) }
        for round in 0..<2000 {
            var bytes = seeds[round % seeds.count]
            for _ in 0..<Int.random(in: 1...8, using: &generator) {
                let at = Int.random(in: 0..<bytes.count, using: &generator)
                bytes[at] = UInt8.random(in: 0...255, using: &generator)
            }
            var parser = HTTP1ResponseParser(maxHeaderBytes: 4096, maxBody: 65_536)
            var progress = HTTP1ResponseParser.Progress.needMore
            let step = Int.random(in: 1...256, using: &generator)
            for start in stride(from: 0, to: bytes.count, by: step) {
                progress = parser.feed(Array(bytes[start..<min(start + step, bytes.count)]))
            }
            if case .needMore = progress { progress = parser.finishAtEOF() }
            if let response = response(progress) {
                #expect(response.body.count <= 65_536)
                #expect((200...999).contains(response.status), "\(response.status)")
            }
        }
    }

    @Test func requestHead() throws {
        let bytes = try #require(HTTP1Request.serialize(
            method: "POST", path: "/api/flows/count", authority: "127.0.0.1:4200",
            headers: [("accept", "application/json"), ("authorization", "Basic eA=="), ("Content-Length", "999"),
                      ("content-type", "application/json")],
            body: Array("{}".utf8), userAgent: "prefect-push/0.1.0"))
        #expect(String(decoding: bytes, as: UTF8.self) == "POST /api/flows/count HTTP/1.1\r\nHost: 127.0.0.1:4200\r\n"
            + "User-Agent: prefect-push/0.1.0\r\naccept: application/json\r\nauthorization: Basic eA==\r\n"
            + "content-type: application/json\r\nContent-Length: 2\r\n\r\n{}")
        let get = try #require(HTTP1Request.serialize(method: "GET", path: "/api/flows/x", authority: "h", headers: [],
                                                      body: nil, userAgent: "u"))
        #expect(!String(decoding: get, as: UTF8.self).contains("Content-Length"))
        #expect(HTTP1Request.serialize(method: "GET", path: "/a\r\nX: y", authority: "h", headers: [], body: nil,
                                       userAgent: "u") == nil)
        #expect(HTTP1Request.serialize(method: "GET", path: "/", authority: "h", headers: [("x", "1\r\nEvil: 1")],
                                       body: nil, userAgent: "u") == nil)
    }
}
