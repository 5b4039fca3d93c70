import Glibc
import Testing
@testable import Relay
@testable import RelayCore

/// `TLSSocket.connectTunnel` against a scripted proxy: what each refusal reads like, that the answer's head is taken
/// off the socket and nothing after it, and that the proxy's credentials never appear in an error.
@Suite struct ProxyTunnelTests {
    func tunnel(answer: ScriptedHTTPServer.Action, password: String? = nil,
                timeoutMs: Int = 2_000) throws -> Result<Int32, TransportError> {
        let proxy = try ScriptedHTTPServer { _, _ in answer }
        defer { proxy.stop() }
        let endpoint = ProxyEndpoint(host: "127.0.0.1", port: proxy.port, username: password.map { _ in "relay" },
                                     password: password)
        do {
            return .success(try TLSSocket.connectTunnel(through: endpoint, to: "apns.example", port: 443,
                                                        deadline: monotonicMs() + Int64(timeoutMs)))
        } catch {
            return .failure(error)
        }
    }

    func failure(_ answer: ScriptedHTTPServer.Action, password: String? = nil) throws -> String {
        guard case .failure(let error) = try tunnel(answer: answer, password: password, timeoutMs: 500) else {
            throw TestFailure("the tunnel opened")
        }
        return error.description
    }

    @Test func openTunnelLeavesTheTargetsBytes() throws {
        let result = try tunnel(answer: .raw("HTTP/1.0 200 Connection established\r\nVia: test\r\n\r\nHELLO"))
        guard case .success(let fd) = result else { throw TestFailure("\(result)") }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 16)
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        _ = poll(&entry, 1, 1_000)
        let n = recv(fd, &buffer, buffer.count, 0)
        #expect(n == 5 && String(decoding: buffer[..<5], as: UTF8.self) == "HELLO")
    }

    @Test func refusalsNameTheProxyAndTheTarget() throws {
        let wantsAuth = try failure(.raw("HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic\r\n"
                                         + "Content-Length: 0\r\n\r\n"))
        #expect(wantsAuth.hasPrefix("proxy http://127.0.0.1:"))
        #expect(wantsAuth.contains("refused CONNECT to apns.example:443: HTTP/1.1 407 Proxy Authentication Required; "
                                   + "it wants credentials"))
        #expect(!wantsAuth.contains("\n") && !wantsAuth.contains("Proxy-Authenticate"))
        let badAuth = try failure(.raw("HTTP/1.1 407 Proxy Authentication Required\r\n\r\n"), password: "pw-S3cret")
        #expect(badAuth.contains("refused the credentials") && !badAuth.contains("pw-S3cret") && !badAuth.contains("relay"))
        #expect(try failure(.raw("HTTP/1.1 403 Forbidden\r\n\r\n")).contains("403 Forbidden; it does not allow this target"))
        #expect(try failure(.raw("HTTP/1.1 502 Bad Gateway\r\n\r\n")).contains("502 Bad Gateway; check that the proxy can reach"))
    }

    @Test func brokenProxies() throws {
        #expect(try failure(.raw("SSH-2.0-OpenSSH_9.2\r\n\r\n")).contains("not HTTP; is it an HTTP proxy?"))
        #expect(try failure(.hangUp).contains("closed the connection before answering CONNECT"))
        #expect(try failure(.stall).contains("timed out"))
        #expect(try failure(.raw(String(repeating: "x", count: 9_000))).contains("over 8 KiB"))
    }

    @Test func unreachableProxyIsNamed() throws {
        let endpoint = ProxyEndpoint(host: "127.0.0.1", port: TestSocket.freePort(), username: "u", password: "pw-S3cret")
        do {
            _ = try TLSSocket.connectTunnel(through: endpoint, to: "apns.example", port: 443, deadline: monotonicMs() + 1_000)
            Issue.record("connected")
        } catch {
            #expect(error.description.hasPrefix("proxy http://127.0.0.1:\(endpoint.port) for apns.example:443: connect to"))
            #expect(!error.description.contains("pw-S3cret"))
        }
    }
}
