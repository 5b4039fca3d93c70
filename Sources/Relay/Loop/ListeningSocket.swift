import CShims
import CWebSockets
import Glibc
import RelayCore

/// A loop's listening socket, made and bound here rather than by lws. lws 4.1.6 binds a vhost's `iface` through
/// `lws_interface_to_sa` (lib/plat/unix/unix-sockets.c), which looks the name up with `getifaddrs` first, over a
/// netlink socket; when that fails (a sandbox without AF_NETLINK, such as `RestrictAddressFamilies=AF_INET AF_INET6
/// AF_UNIX`) it logs "unable to getifaddrs" and binds every interface. Here the asked address, IPv4 or IPv6, is bound
/// as it is, with no interface lookup, and `getsockname` must read it back, or start-up fails naming the setting.
/// lws's `LWS_SERVER_OPTION_DISABLE_IPV6` does not reach this socket or the ones it accepts: lws 4.1.6 adopts a
/// descriptor of any family, and reads a peer's address with `getpeername` into a `sockaddr` big enough for IPv6.
///
/// lws polls the socket as a raw file (`LWS_ADOPT_RAW_FILE_DESC`): on each wake this accepts what is waiting and hands
/// each connection to the loop's first protocol as a raw socket. When lws can't take one (its table for the thread is
/// full, or the handler refused it) or `accept` fails for want of a resource, the listener pauses for
/// `pauseMicroseconds`, and clients wait in the kernel's backlog meanwhile, as lws's own listener left them.
///
/// Loop thread only, once adopted. The descriptor is this object's until `adopt` succeeds, then lws's (it closes it
/// with the context).
final class ListeningSocket: LWSHandler {
    let protocolName = "pp-listen"
    static let pauseMicroseconds: UInt64 = 100_000
    /// At most this many accepts per wake-up. Over its cap `HTTPServer` makes room by closing a connection, but lws
    /// frees that one only on its next pass, so each accept of a batch may hold one more descriptor: a batch no
    /// larger than the slack `creationInfo` leaves (8, less the listener and lws's wake-up pipe) never fills lws's
    /// table, and a flood is taken a few at a time instead of being dropped.
    static let acceptsPerWake = 4

    /// The address and port as `getsockname` read them after `bind`.
    let address: String
    let port: Int
    private let fd: Int32
    private let portVariable: String
    private var adopted = false
    private var vhost: OpaquePointer?
    private var connectionProtocol: UnsafePointer<CChar>?

    init(address asked: String, port askedPort: Int, portVariable: String, bindVariable: String) throws(StartupError) {
        self.portVariable = portVariable
        let everywhere = "0.0.0.0 (every IPv4 interface) or :: (every interface)"
        guard let wanted = IPAddress(asked) else {
            throw StartupError(bindVariable, "\(asked) is not an IP address; set \(bindVariable) to one, e.g. 127.0.0.1, "
                               + "::1, or \(everywhere)")
        }
        let family = wanted.isIPv4 ? AF_INET : AF_INET6
        let fd = socket(family, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else {
            let why = String(cString: strerror(errno))
            if family == AF_INET6 && errno == EAFNOSUPPORT {
                throw StartupError(bindVariable, "asks for IPv6 (\(asked)), which this machine does not have (\(why)); "
                                   + "set \(bindVariable) to an IPv4 address such as 0.0.0.0")
            }
            throw StartupError(portVariable, "could not open a TCP socket to listen on (\(why)); "
                               + "a sandbox must allow \(family == AF_INET6 ? "AF_INET6" : "AF_INET")")
        }
        var one: Int32 = 1
        // As lws does for its own listeners: a restart finds the port free even with old connections in TIME_WAIT.
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        if family == AF_INET6 {
            // `::` is dual-stack: IPv4 clients arrive as ::ffff:a.b.c.d, whatever the host's net.ipv6.bindv6only says.
            // Any other IPv6 address is that address alone.
            var v6only: Int32 = wanted.isUnspecifiedIPv6 ? 0 : 1
            setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &v6only, socklen_t(MemoryLayout<Int32>.size))
        }
        let failure = ListeningSocket.bindAndListen(fd, SocketAddress(wanted, port: askedPort))
        // "could not listen on port" is what test harnesses look for to retry on another port.
        let requested = "port \(askedPort) of \(asked)"
        let bound: SocketAddress
        switch failure {
        case .success(let local):
            bound = local
        case .failure(let failure):
            close(fd)
            throw ListeningSocket.listenError(failure, requested: requested, asked: asked, everywhere: everywhere,
                                              portVariable: portVariable, bindVariable: bindVariable)
        }
        address = bound.ip?.description ?? "?"
        port = bound.port
        // What the kernel says this socket is bound to is what the relay serves on: never more than was asked.
        guard bound.family == family, bound.ip == wanted, askedPort == 0 || port == askedPort else {
            close(fd)
            throw StartupError(bindVariable, "asked to listen on \(asked):\(askedPort), but the socket is bound to "
                               + "\(address):\(port); the relay serves only the address it was given: check "
                               + "\(bindVariable) and \(portVariable)")
        }
        self.fd = fd
    }

    deinit {
        if !adopted { close(fd) }
    }

    /// What a failed bind or listen means, naming the setting to change.
    private static func listenError(_ failure: Failure, requested: String, asked: String, everywhere: String,
                                    portVariable: String, bindVariable: String) -> StartupError {
        switch (failure.step, failure.code) {
        case (.bind, EADDRINUSE):
            return StartupError(portVariable, "could not listen on \(requested): it is in use; pick another \(portVariable)")
        case (.bind, EADDRNOTAVAIL):
            return StartupError(bindVariable, "could not listen on \(requested): \(asked) is not an address of this "
                                + "machine; set \(bindVariable) to one of its addresses, or \(everywhere)")
        case (.bind, EACCES):
            return StartupError(portVariable, "could not listen on \(requested): ports below 1024 need privileges; "
                                + "pick another \(portVariable)")
        case (let step, let code):
            return StartupError(portVariable, "could not listen on \(requested) (\(step): \(String(cString: strerror(code)))); "
                                + "pick another \(portVariable) or \(bindVariable)")
        }
    }

    /// `address:port`, an IPv6 address in brackets.
    var authority: String { address.contains(":") ? "[\(address)]:\(port)" : "\(address):\(port)" }

    private enum Step: String { case bind, listen, getsockname }

    private struct Failure: Error {
        let step: Step
        let code: Int32
    }

    /// `bind`, `listen` and `getsockname`: the address bound, or the step that failed and its errno.
    private static func bindAndListen(_ fd: Int32, _ request: SocketAddress) -> Result<SocketAddress, Failure> {
        guard request.bind(fd) == 0 else { return .failure(Failure(step: .bind, code: errno)) }
        guard listen(fd, SOMAXCONN) == 0 else { return .failure(Failure(step: .listen, code: errno)) }
        guard let bound = SocketAddress.local(of: fd) else { return .failure(Failure(step: .getsockname, code: errno)) }
        return .success(bound)
    }

    /// Hands the socket to lws, which polls it from now on; accepted connections go to `connectionProtocol`.
    func adopt(into vhost: OpaquePointer, connectionsTo connectionProtocol: UnsafePointer<CChar>?) throws(StartupError) {
        self.vhost = vhost
        self.connectionProtocol = connectionProtocol
        let wsi = protocolName.withCString {
            lws_adopt_descriptor_vhost(vhost, LWS_ADOPT_RAW_FILE_DESC, lws_sock_file_fd_type(filefd: fd), $0, nil)
        }
        guard wsi != nil else { throw StartupError(portVariable, "libwebsockets could not take the listening socket") }
        adopted = true
    }

    func handle(wsi: OpaquePointer?, reason: lws_callback_reasons, input: UnsafeMutableRawPointer?, length: Int) -> Int32 {
        guard let wsi else { return 0 }
        switch reason {
        case LWS_CALLBACK_RAW_RX_FILE:
            acceptWaiting(wsi)
        case LWS_CALLBACK_TIMER:
            lws_rx_flow_control(wsi, 1)  // the pause is over
        default:
            break
        }
        return 0
    }

    private func acceptWaiting(_ wsi: OpaquePointer) {
        guard let vhost else { return }
        var accepted = 0
        while accepted < ListeningSocket.acceptsPerWake {
            let client = CShims_accept_cloexec(fd, 1)
            guard client >= 0 else {
                switch errno {
                case EAGAIN, EWOULDBLOCK: return
                case EINTR, ECONNABORTED: continue
                // EMFILE, ENFILE, ENOBUFS, ENOMEM: the descriptors are budgeted (`DescriptorBudget`), so this is
                // passing; retrying at once would spin.
                default: return pause(wsi)
                }
            }
            accepted += 1
            var one: Int32 = 1
            // Answers are small and written whole: no Nagle delay (lws sets this on the sockets it accepts too).
            setsockopt(client, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            // On failure lws has closed the socket already.
            if lws_adopt_descriptor_vhost(vhost, LWS_ADOPT_SOCKET, lws_sock_file_fd_type(sockfd: client),
                                          connectionProtocol, nil) == nil {
                return pause(wsi)
            }
        }
    }

    /// No polling of the listener for a moment: lws applies it when this callback returns, the timer undoes it.
    private func pause(_ wsi: OpaquePointer) {
        lws_rx_flow_control(wsi, 0)
        lws_set_timer_usecs(wsi, lws_usec_t(ListeningSocket.pauseMicroseconds))
    }
}
