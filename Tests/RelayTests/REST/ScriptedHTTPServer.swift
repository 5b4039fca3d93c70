import COpenSSL
import Glibc
import Synchronization
import FakeAPNs
@testable import Relay
@testable import RelayCore

/// A loopback HTTP/1.1 server that does what each test scripts, per connection and per request on it: answer
/// (kept alive or not), hang up without answering (as a server closing an idle connection races a new request),
/// or never answer. One thread polls the listener and every connection; requests are read up to the end of their
/// head plus Content-Length. With `tls`, it speaks TLS with the test CA's server certificate (127.0.0.1 and
/// localhost), offering no ALPN, as a plain HTTP/1.1 server behind TLS would.
final class ScriptedHTTPServer: @unchecked Sendable {
    enum Action: Sendable {
        /// A 200 with this body; `close` adds `Connection: close` and closes after writing.
        case answer(String, close: Bool = false)
        /// A 200 that says nothing of closing, then a close (as a server's idle timeout would, a moment later).
        case answerThenHangUp(String)
        /// Raw bytes as the answer, written as given (the connection stays open).
        case raw(String)
        /// Close the connection without a byte of answer.
        case hangUp
        /// Keep the connection open and never answer.
        case stall
        /// A 200 with this body once `release()` is called (as a server holds a slow query); kept alive.
        case hold(String)
    }

    private struct Client {
        var fd: Int32
        var tls: TLSSocket?
        var index: Int
        var requests = 0
        var buffer: [UInt8] = []
    }

    let port: Int
    private let listenFD: Int32
    private let host: String
    private let sslContext: OpaquePointer?
    private let script: @Sendable (_ connection: Int, _ request: Int) -> Action
    private let stopping = Atomic<Bool>(false)
    private let acceptedCount = Atomic<Int>(0)
    private let requestCount = Atomic<Int>(0)
    private let received = Mutex<[String]>([])
    private let history = Mutex<[String]>([])
    private let releasing = Atomic<Bool>(false)
    private let heldCount = Atomic<Int>(0)
    /// Requests held (`Action.hold`) and not answered yet: by the client's fd, with their bodies. Server thread only.
    private var held: [(fd: Int32, body: String)] = []
    private var thread = pthread_t()

    /// Connections accepted so far.
    var accepted: Int { acceptedCount.load(ordering: .relaxed) }
    /// What became of each connection (accepted, handshake failed, closed and why), in order: what a failed count
    /// of connections prints, so a rare failure under load says which side closed what.
    var connectionHistory: [String] { history.withLock { $0 } }
    /// Requests read so far (on all connections).
    var requests: Int { requestCount.load(ordering: .relaxed) }
    /// Every request read, head and body, as text, in order.
    var requestTexts: [String] { received.withLock { $0 } }
    /// Requests held now (`Action.hold`), on connections still open.
    var holding: Int { heldCount.load(ordering: .relaxed) }

    /// Answers every held request, and from now on answers `hold` at once.
    func release() { releasing.store(true, ordering: .relaxed) }

    init(tls: Bool = false, host: String = "127.0.0.1",
         script: @escaping @Sendable (_ connection: Int, _ request: Int) -> Action) throws {
        self.script = script
        self.host = host
        if tls {
            let context = SSL_CTX_new(TLS_server_method())
            guard let context,
                  SSL_CTX_use_certificate_chain_file(context, APNsFixtures.path("server.pem")) == 1,
                  SSL_CTX_use_PrivateKey_file(context, APNsFixtures.path("server.key"), SSL_FILETYPE_PEM) == 1 else {
                SSL_CTX_free(context)
                throw TestFailure("the scripted server's TLS context")
            }
            sslContext = context
        } else {
            sslContext = nil
        }
        guard let (fd, port) = TestSocket.listen(host: host) else {
            SSL_CTX_free(sslContext)
            throw TestFailure("the scripted server could not listen")
        }
        (listenFD, self.port) = (fd, port)
        let retained = Unmanaged.passRetained(self)
        guard pthread_create(&thread, nil, { raw in
            Unmanaged<ScriptedHTTPServer>.fromOpaque(raw!).takeRetainedValue().run()
            return nil
        }, retained.toOpaque()) == 0 else {
            retained.release()
            close(fd)
            SSL_CTX_free(sslContext)
            throw TestFailure("pthread_create failed")
        }
    }

    var url: HTTPURL { HTTPURL(tls: sslContext != nil, host: host, port: port, path: "") }

    func stop() {
        guard !stopping.exchange(true, ordering: .relaxed) else { return }
        pthread_join(thread, nil)
        close(listenFD)
        SSL_CTX_free(sslContext)
    }

    private func run() {
        var clients: [Client] = []
        defer { clients.forEach { if $0.tls == nil { close($0.fd) } } }
        while !stopping.load(ordering: .relaxed) {
            var fds = [pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0)]
            fds += clients.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
            if releasing.load(ordering: .relaxed), !held.isEmpty {
                for (fd, body) in held {
                    if let client = clients.first(where: { $0.fd == fd }) { _ = perform(.answer(body), on: client) }
                }
                held.removeAll()
                heldCount.store(0, ordering: .relaxed)
            }
            guard poll(&fds, nfds_t(fds.count), 20) > 0 else { continue }
            if fds[0].revents != 0 {
                // Close-on-exec from the start: a child process another test spawns must not inherit the socket,
                // or closing it here would not hang up on the client.
                let fd = acceptCloseOnExec(listenFD, nonBlocking: false)
                if fd >= 0 {
                    let index = acceptedCount.add(1, ordering: .relaxed).oldValue
                    note("\(index): accepted")
                    if let sslContext {
                        // Handshake right here (bounded): the client connects from a thread of its own.
                        let started = monotonicMs()
                        if let socket = handshake(fd, sslContext) {
                            clients.append(Client(fd: fd, tls: socket, index: index))
                        } else {
                            note("\(index): handshake failed after \(monotonicMs() - started) ms")
                        }
                    } else {
                        clients.append(Client(fd: fd, index: index))
                    }
                }
            }
            var closed: [Int32] = []
            for index in clients.indices where fds.count > index + 1 && fds[index + 1].revents != 0 {
                guard receive(&clients[index]) else {
                    note("\(clients[index].index): the client closed it, or reading it failed")
                    closed.append(clients[index].fd)
                    continue
                }
                while let length = ScriptedHTTPServer.requestLength(clients[index].buffer) {
                    let text = String(decoding: clients[index].buffer[..<length], as: UTF8.self)
                    received.withLock { $0.append(text) }
                    clients[index].buffer.removeFirst(length)
                    let action = script(clients[index].index, clients[index].requests)
                    clients[index].requests += 1
                    requestCount.add(1, ordering: .relaxed)
                    if case .hold(let body) = action, !releasing.load(ordering: .relaxed) {
                        held.append((clients[index].fd, body))
                        heldCount.store(held.count, ordering: .relaxed)
                        continue
                    }
                    if !perform(action, on: clients[index]) {
                        note("\(clients[index].index): closed by the script")
                        closed.append(clients[index].fd)
                        break
                    }
                }
            }
            held.removeAll { closed.contains($0.fd) }
            heldCount.store(held.count, ordering: .relaxed)
            for client in clients where closed.contains(client.fd) && client.tls == nil { close(client.fd) }
            clients.removeAll { closed.contains($0.fd) }  // a TLSSocket closes its own fd
        }
    }

    private func note(_ event: String) {
        history.withLock { $0.append("\(monotonicMs() % 100_000) ms \(event)") }
    }

    /// Returns false when the connection is to be closed.
    private func perform(_ action: Action, on client: Client) -> Bool {
        switch action {
        case .answer(let body, let closing):
            let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n"
                + (closing ? "Connection: close\r\n" : "") + "\r\n"
            write(client, head + body)
            return !closing
        case .answerThenHangUp(let body):
            write(client, "HTTP/1.1 200 OK\r\nContent-Length: \(body.utf8.count)\r\n\r\n" + body)
            return false
        case .raw(let text):
            write(client, text)
            return true
        case .hangUp:
            return false
        case .stall:
            return true
        case .hold(let body):
            return perform(.answer(body), on: client)
        }
    }

    private func write(_ client: Client, _ text: String) {
        let bytes = Array(text.utf8)
        if let tls = client.tls {
            bytes.withUnsafeBufferPointer { tls.enqueue($0) }
            let deadline = monotonicMs() + 2000
            while tls.wantsWrite, tls.flush() == nil, monotonicMs() < deadline {
                var entry = pollfd(fd: client.fd, events: Int16(POLLOUT), revents: 0)
                _ = poll(&entry, 1, 50)
            }
            return
        }
        _ = bytes.withUnsafeBytes { send(client.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Reads what arrived; false when the client closed (or broke) the connection.
    private func receive(_ client: inout Client) -> Bool {
        if let tls = client.tls {
            var received: [UInt8] = []
            let status = tls.readAvailable { received += $0; return true }
            client.buffer += received
            if case .closed = status { return false }
            return true
        }
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        let count = recv(client.fd, &chunk, chunk.count, 0)
        guard count > 0 else { return false }
        client.buffer += chunk[0..<count]
        return true
    }

    /// The server side of the TLS handshake on a freshly accepted socket; nil if it fails or takes over 10 s. A
    /// client that refused the certificate hangs up here at once; the bound is only for a client that went silent,
    /// and is generous so that a loaded machine's slow handshake is never cut short (`connectionHistory` records
    /// one that failed, and after how long).
    private func handshake(_ fd: Int32, _ context: OpaquePointer) -> TLSSocket? {
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        guard let ssl = SSL_new(context) else {
            close(fd)
            return nil
        }
        let socket = TLSSocket(fd: fd, ssl: ssl)
        let deadline = monotonicMs() + 10_000
        while monotonicMs() < deadline {
            guard let progress = try? socket.handshake(asClient: false) else { return nil }
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            switch progress {
            case .done: return socket
            case .wantRead: break
            case .wantWrite: entry.events = Int16(POLLOUT)
            }
            _ = poll(&entry, 1, 50)
        }
        return nil
    }

    /// The length of the first whole request in `buffer` (head plus Content-Length body), if it has arrived.
    static func requestLength(_ buffer: [UInt8]) -> Int? {
        guard buffer.count >= 4 else { return nil }
        for end in 3..<buffer.count where buffer[end - 3...end].elementsEqual([13, 10, 13, 10]) {
            let head = String(decoding: buffer[..<(end + 1)], as: UTF8.self).lowercased()
            var bodyLength = 0
            for line in head.split(separator: "\r\n") where line.hasPrefix("content-length:") {
                bodyLength = Int(line.dropFirst(15).filter { $0 != " " }) ?? 0
            }
            return buffer.count >= end + 1 + bodyLength ? end + 1 + bodyLength : nil
        }
        return nil
    }
}
