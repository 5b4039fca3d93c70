import Glibc
import Synchronization
import FakeAPNs

/// A TCP forwarder on 127.0.0.1 that counts the connections it accepts: put in front of a server the tests don't
/// script (the Prefect server), it shows how many connections a client opened. Each accepted connection gets its
/// own connection to the target, bytes go both ways, and when either side closes both are closed, so a server
/// closing an idle connection reaches the client as it would directly. One thread polls everything.
final class CountingForwarder: @unchecked Sendable {
    let port: Int
    private let target: Int
    private let listenFD: Int32
    private let acceptedCount = Atomic<Int>(0)
    private let closedCount = Atomic<Int>(0)
    private let stopping = Atomic<Bool>(false)
    private var thread = pthread_t()

    /// Connections accepted and joined to the target so far.
    var accepted: Int { acceptedCount.load(ordering: .relaxed) }
    /// Connections that have ended, either side having closed.
    var closed: Int { closedCount.load(ordering: .relaxed) }

    /// Forwards to 127.0.0.1:`target`.
    init(to target: Int) throws {
        self.target = target
        guard let (fd, port) = TestSocket.listen() else { throw TestFailure("the forwarder could not listen") }
        (listenFD, self.port) = (fd, port)
        let retained = Unmanaged.passRetained(self)
        guard pthread_create(&thread, nil, { raw in
            Unmanaged<CountingForwarder>.fromOpaque(raw!).takeRetainedValue().run()
            return nil
        }, retained.toOpaque()) == 0 else {
            retained.release()
            close(fd)
            throw TestFailure("pthread_create failed")
        }
    }

    func stop() {
        guard !stopping.exchange(true, ordering: .relaxed) else { return }
        pthread_join(thread, nil)
        close(listenFD)
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }

    /// A blocking, close-on-exec connection to the target, or -1.
    private func connectToTarget() -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        var address = CountingForwarder.loopback(port: target)
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard fd >= 0, rc == 0 else {
            close(fd)
            return -1
        }
        return fd
    }

    private func run() {
        var pairs: [(client: Int32, server: Int32)] = []
        defer { pairs.forEach { close($0.client); close($0.server) } }
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while !stopping.load(ordering: .relaxed) {
            var fds = [pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0)]
            for pair in pairs {
                fds.append(pollfd(fd: pair.client, events: Int16(POLLIN), revents: 0))
                fds.append(pollfd(fd: pair.server, events: Int16(POLLIN), revents: 0))
            }
            guard poll(&fds, nfds_t(fds.count), 20) > 0 else { continue }
            var ended: [Int] = []
            for (index, pair) in pairs.enumerated() {
                let directions = [(pair.client, pair.server, fds[1 + 2 * index]), (pair.server, pair.client, fds[2 + 2 * index])]
                for (from, to, entry) in directions where entry.revents != 0 {
                    let count = recv(from, &buffer, buffer.count, 0)
                    if count <= 0 || !sendAll(to, buffer[..<count]) {
                        ended.append(index)
                        break
                    }
                }
            }
            for index in ended.reversed() {
                close(pairs[index].client)
                close(pairs[index].server)
                pairs.remove(at: index)
                closedCount.add(1, ordering: .relaxed)
            }
            if fds[0].revents != 0 {
                let client = acceptCloseOnExec(listenFD, nonBlocking: false)
                guard client >= 0 else { continue }
                // Counted once the target took it: a connection the target refused (a server restarting) is one
                // the client could not have opened directly either.
                let server = connectToTarget()
                guard server >= 0 else {
                    close(client)
                    continue
                }
                acceptedCount.add(1, ordering: .relaxed)
                pairs.append((client, server))
            }
        }
    }

    private func sendAll(_ fd: Int32, _ bytes: ArraySlice<UInt8>) -> Bool {
        var offset = bytes.startIndex
        while offset < bytes.endIndex {
            let sent = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent < 0 && errno == EINTR { continue }
            if sent <= 0 { return false }
            offset += sent
        }
        return true
    }
}
