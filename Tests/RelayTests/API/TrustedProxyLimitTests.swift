import Glibc
import Testing
@testable import Relay
@testable import RelayCore

/// The API server's limits behind a trusted proxy (`HTTPServer`): the proxy's connections are outside the
/// per-address connection cap, and each client its `X-Forwarded-For` names has a cap of its own on requests being
/// answered. A real server on 127.0.0.1 (trusted as the "ingress"); its requests are held unanswered until the test
/// lets them go.
@Suite struct TrustedProxyLimitTests {
    /// The server under test, answering nothing until `release`.
    final class HeldServer: Sendable {
        let loop: WebSocketsLoop
        let port: Int
        private let held = Locked<[(APIRequest, HTTPServer.Reply)]>([])

        init(trusted: String?, maxPerAddress: Int) throws {
            var limits = HTTPServer.Limits()
            limits.maxConnections = 16
            limits.maxPerAddress = maxPerAddress
            let proxies = try trusted.map { try TrustedProxies(parsing: $0, variable: "TRUSTED_PROXIES") } ?? .none
            let held = self.held
            let server = HTTPServer(router: Router(basePath: ""), limits: limits, trustedProxies: proxies) { request, reply in
                held.withLock { $0.append((request, reply)) }
            }
            loop = try WebSocketsLoop(settings: .init(port: 0, clientTLS: false, maxConnections: 16,
                                                      bindAddress: "127.0.0.1"), handlers: [server])
            try loop.start()
            port = loop.listenPort ?? 0
        }

        var clients: [String] { held.withLock { $0.map { $0.0.client?.address.description ?? "?" } } }

        func waitForHeld(_ count: Int) throws {
            try waitUntil("\(count) requests held", timeout: 10) { held.withLock { $0.count } >= count }
        }

        /// Answers every held request 200.
        func release() {
            for (_, reply) in held.withLock({ list in defer { list.removeAll() }; return list }) {
                reply(APIResponse(status: 200, text: "{}", contentType: "application/json"))
            }
        }

        deinit { loop.stop() }
    }

    static func request(from client: String) -> [UInt8] {
        Array("GET /health HTTP/1.1\r\nHost: relay\r\nX-Forwarded-For: 192.0.2.66, \(client)\r\n\r\n".utf8)
    }

    @Test func aClientBehindTheProxyHasItsOwnRequestCap() throws {
        let server = try HeldServer(trusted: "127.0.0.1/32", maxPerAddress: 2)
        let sockets = try (0..<4).map { _ in try TestSocket.connect(port: server.port) }
        defer { sockets.forEach { close($0) } }
        try TestSocket.send(sockets[0], Self.request(from: "203.0.113.7"))
        try TestSocket.send(sockets[1], Self.request(from: "203.0.113.7"))
        try server.waitForHeld(2)
        #expect(server.clients == ["203.0.113.7", "203.0.113.7"])
        // A third request from the same client, through the same proxy: refused, the connection kept.
        try TestSocket.send(sockets[2], Self.request(from: "203.0.113.7"))
        let refused = try TestHTTP.parse(TestSocket.receiveAll(sockets[2], timeout: 10))
        #expect(refused.status == 429 && refused.headers["retry-after"] == "1", "\(refused)")
        #expect(refused.body.contains("requests being answered already"), "\(refused.body)")
        #expect(refused.headers["connection"] == nil)
        // Another client behind the same proxy, on that same connection and on a fresh one, is served.
        try TestSocket.send(sockets[2], Self.request(from: "203.0.113.8"))
        try TestSocket.send(sockets[3], Self.request(from: "2001:db8::8"))
        try server.waitForHeld(4)
        #expect(server.clients.sorted() == ["2001:db8::8", "203.0.113.7", "203.0.113.7", "203.0.113.8"])
        // Answered, the client may send again.
        server.release()
        #expect(try TestHTTP.parse(TestSocket.receiveAll(sockets[0], timeout: 10)).status == 200)
        try TestSocket.send(sockets[0], Self.request(from: "203.0.113.7"))
        try server.waitForHeld(1)
        server.release()
    }

    /// Connections from the trusted proxy are not evicted by the per-address connection cap; from an untrusted
    /// address they are (the oldest idle one goes to make room).
    @Test(arguments: [true, false])
    func theProxyIsOutsideThePerAddressConnectionCap(_ trusted: Bool) throws {
        let server = try HeldServer(trusted: trusted ? "127.0.0.1/32" : nil, maxPerAddress: 2)
        let sockets = try (0..<4).map { _ in try TestSocket.connect(port: server.port) }
        defer { sockets.forEach { close($0) } }
        // Accepted in order: once the last one's request is held, every connection has been taken in.
        try TestSocket.send(sockets[3], Self.request(from: "203.0.113.7"))
        try server.waitForHeld(1)
        try TestSocket.send(sockets[0], Self.request(from: "203.0.113.8"))
        if trusted {
            try server.waitForHeld(2)
        } else {
            // The oldest connection was closed to make room for the third.
            #expect(TestSocket.closedByPeer(sockets[0], timeout: 5))
            #expect(server.clients == ["127.0.0.1"])
        }
        server.release()
    }
}
