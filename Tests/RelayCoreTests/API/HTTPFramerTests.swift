import Testing
@testable import RelayCore

/// The API's own HTTP/1.1 framing: every malformed request gets the relay's JSON and a status it chose.
@Suite struct HTTPFramerTests {
    static let token = String(repeating: "ab", count: 32)

    func frames(_ text: String, byteAtATime: Bool = false) -> [HTTPFramer.Frame] {
        frames(Array(text.utf8), byteAtATime: byteAtATime)
    }

    func frames(_ bytes: [UInt8], byteAtATime: Bool = false) -> [HTTPFramer.Frame] {
        var framer = HTTPFramer(router: Router(basePath: "/push"))
        var out: [HTTPFramer.Frame] = []
        let chunks = byteAtATime ? bytes.map { [$0] } : [bytes]
        for chunk in chunks {
            framer.append(chunk)
            while let frame = framer.next() {
                out.append(frame)
                if case .reject(_, true, _) = frame { return out }
            }
        }
        return out
    }

    func status(_ text: String) -> Int? {
        guard case .reject(let response, _, _)? = frames(text).first else { return nil }
        #expect(response.contentType == "application/json")
        #expect((try? JSONParser.parse(Array((response.body ?? "").utf8)))?["error"]?.string != nil)
        return response.status
    }

    @Test func simpleGet() {
        for byteAtATime in [false, true] {
            let got = frames("GET /push/health HTTP/1.1\r\nHost: x\r\n\r\n", byteAtATime: byteAtATime)
            guard case .request(let request)? = got.first else { Issue.record("\(got)"); continue }
            #expect(request.route == .health && request.keepAlive && request.authorization == nil)
        }
    }

    @Test func postWithBodyAndPipelining() {
        let body = #"{"id":"p"}"#
        let text = "POST /push/devices HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n"
            + "Authorization: Basic abc\r\n\r\n\(body)GET /push/health HTTP/1.0\r\n\r\n"
        for byteAtATime in [false, true] {
            let got = frames(text, byteAtATime: byteAtATime)
            #expect(got.count == 2)
            guard case .request(let post)? = got.first, case .request(let get)? = got.last else {
                Issue.record("\(got)")
                continue
            }
            #expect(post.route == .registerDevice && post.body == Array(body.utf8))
            #expect(post.authorization == "Basic abc")
            #expect(get.route == .health && !get.keepAlive)
        }
    }

    @Test(arguments: [
        ("garbage\r\n\r\n", 400), ("GET /push/health\r\n\r\n", 400), ("GET  /push/health HTTP/1.1\r\n\r\n", 400),
        ("GET /push/health HTTP/9.9\r\n\r\n", 505), ("GET /push/health HTTP/2.0\r\n\r\n", 505),
        ("GET /push/health HTTP/1.1x\r\n\r\n", 400), ("GET http://x/push/health HTTP/1.1\r\n\r\n", 400),
        ("GET * HTTP/1.1\r\n\r\n", 400), ("get /push/health HTTP/1.1\r\n\r\n", 405),
        ("FOO /push/health HTTP/1.1\r\n\r\n", 405), ("BREW /nowhere HTTP/1.1\r\n\r\n", 405),
        ("GET /push/health HTTP/1.1\r\nBad Header: x\r\n\r\n", 400), ("GET /push/health HTTP/1.1\r\n folded\r\n\r\n", 400),
        ("GET /push/health HTTP/1.1\r\nX: a\u{0}b\r\n\r\n", 400), ("GET /push/health HTTP/1.1\r\n: x\r\n\r\n", 400),
        ("POST /push/devices HTTP/1.1\r\nContent-Type: application/json\r\n\r\n", 411),
        ("POST /push/devices HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 411),
        ("POST /push/devices HTTP/1.1\r\nContent-Length: 70000\r\nContent-Type: application/json\r\n\r\n", 413),
        ("POST /push/devices HTTP/1.1\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\n{}", 415),
        ("POST /push/devices HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 400),
        ("POST /push/devices HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400),
        ("POST /push/devices HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n", 400),
        ("DELETE /push/devices/p/ HTTP/1.1\r\n\r\n", 404), ("DELETE /push/devices/x/../p HTTP/1.1\r\n\r\n", 404),
        ("DELETE /push/devices/%2e/p HTTP/1.1\r\n\r\n", 404), ("POST /push/devices/p//test HTTP/1.1\r\n\r\n", 404),
        ("DELETE /push/devices/a%E2%80%AEb HTTP/1.1\r\n\r\n", 400), ("GET /push/he\u{E9}lth HTTP/1.1\r\n\r\n", 400),
    ])
    func refusals(_ request: String, _ expected: Int) {
        #expect(status(request) == expected, "\(request.debugDescription)")
    }

    @Test func oversizedHeads() {
        #expect(status("GET /push/health HTTP/1.1\r\nX: " + String(repeating: "a", count: 70_000) + "\r\n\r\n") == 431)
        #expect(status("GET /push/health HTTP/1.1\r\n" + String(repeating: "X: y\r\n", count: 600) + "\r\n") == 431)
        #expect(status("GET /push/" + String(repeating: "a", count: 9000) + " HTTP/1.1\r\n\r\n") == 414)
        // No end of head yet, but already too big: answered without waiting for more.
        #expect(status("GET /push/health HTTP/1.1\r\nX: " + String(repeating: "a", count: 20_000)) == 431)
        #expect(status(String(repeating: "G", count: 10_000)) == 414)
    }

    @Test func limitsHoldAtTheBoundary() {
        var framer = HTTPFramer(router: Router(basePath: "/push"))
        let body = "{\"id\":\"" + String(repeating: "x", count: Validation.maxBody - 9) + "\"}"
        #expect(body.utf8.count == Validation.maxBody)
        framer.append(Array(("POST /push/devices HTTP/1.1\r\nContent-Type: application/json\r\n"
            + "Content-Length: \(body.utf8.count)\r\n\r\n" + body).utf8))
        guard case .request(let request)? = framer.next() else { Issue.record("64 KiB exactly must pass"); return }
        #expect(request.body.count == Validation.maxBody)
        #expect(status("POST /push/devices HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: \(Validation.maxBody + 1)\r\n\r\n") == 413)
    }

    @Test func expectContinue() {
        var framer = HTTPFramer(router: Router(basePath: "/push"))
        framer.append(Array("PUT /push/devices/p/activities/r HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n".utf8))
        #expect(framer.next() == .proceed)
        #expect(framer.next() == nil)
        #expect(framer.isReadingBody)
        framer.append(Array("{}".utf8))
        guard case .request(let request)? = framer.next() else { Issue.record("no request"); return }
        #expect(request.body == Array("{}".utf8))
    }

    @Test func keepAliveAfterA404() {
        let got = frames("GET /push/nope HTTP/1.1\r\n\r\nGET /push/health HTTP/1.1\r\n\r\n")
        #expect(got.count == 2)
        guard case .reject(let response, false, _)? = got.first else { Issue.record("\(got)"); return }
        #expect(response.status == 404)
    }

    @Test func headIsAnsweredWithoutBody() {
        guard case .reject(let response, _, let head)? = frames("HEAD /push/nope HTTP/1.1\r\n\r\n").first else {
            Issue.record("expected a 404")
            return
        }
        #expect(head)
        let bytes = HTTPResponseWriter.render(response, head: head, close: false)
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 404 Not Found\r\n") && text.hasSuffix("\r\n\r\n"))
        #expect(text.contains("content-length: \(response.body!.utf8.count)"))
    }

    @Test func renderedAnswers() {
        let text = String(decoding: HTTPResponseWriter.render(.noContent, head: false, close: true), as: UTF8.self)
        #expect(text == "HTTP/1.1 204 No Content\r\ncache-control: no-store\r\nconnection: close\r\n\r\n")
        var bad = APIResponse(status: 200, json: ["ok": true])
        bad.headers = [("x-evil", "a\r\nb")]
        #expect(!String(decoding: HTTPResponseWriter.render(bad, head: false, close: false), as: UTF8.self).contains("x-evil"))
    }
}
