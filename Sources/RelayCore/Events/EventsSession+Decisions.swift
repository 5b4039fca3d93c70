/// The events socket's decisions that need no state: what a failed connect was, when a message is too large, and
/// which events to ask Prefect for. `EventsSocket` carries them out.
extension EventsSession {
    /// The proxy the socket tunnels through, and the `host:port` it asks it to CONNECT to.
    public struct Tunnel: Sendable, Equatable {
        public var proxy: ProxyEndpoint
        public var target: String

        public init(proxy: ProxyEndpoint, target: String) {
            self.proxy = proxy
            self.target = target
        }
    }

    /// A failed connect as the session reports it: the reason for the log and the relay, the end, and the
    /// `events.auth_rejected` reason when it is a refusal.
    public struct ConnectFailure: Sendable, Equatable {
        public var reason: String
        public var end: SocketEnd
        public var refusal: String?
    }

    /// What lws's words for a failed connect mean. Through a proxy, lws words a CONNECT answered with anything but
    /// 200 (or a proxy that hung up) "proxy …": that names the proxy and the target, and is never Prefect refusing
    /// the credential, whatever its digits. (Worded without "403": that would read as Prefect's refusal.)
    public static func connectFailure(_ message: String, tunnel: Tunnel?) -> ConnectFailure {
        if let tunnel, message.hasPrefix("proxy") {
            let reason = "proxy \(tunnel.proxy) refused CONNECT to \(tunnel.target) (\(message)): check the "
                + "user:pass@ in the proxy URL (407) and that the proxy allows this target, or list the host in NO_PROXY"
            return ConnectFailure(reason: reason, end: .lost, refusal: nil)
        }
        let end = SocketEnd.ofConnectError(message)
        let refusal = end.isRefusal ? message + " (the server refused the upgrade; check PREFECT_API_URL too)" : nil
        return ConnectFailure(reason: message, end: end, refusal: refusal)
    }

    // MARK: - Messages

    /// The largest message the socket collects, its fragments together. Prefect's events are a few KiB; one this
    /// large is no event the relay could use.
    public static let maxMessage = 1024 * 1024

    /// What to do with a message fragment.
    public enum Fragment: Sendable, Equatable {
        /// Add it to the message.
        case collect
        /// Drop the message and close the connection with this close code and reason (it reconnects as after
        /// any close); log `bytes`, what the message had reached.
        case close(code: Int, reason: String, bytes: Int)
    }

    /// A fragment of `adding` bytes arrived with `buffered` bytes of its message already collected.
    public static func fragment(buffered: Int, adding: Int) -> Fragment {
        guard buffered + adding > maxMessage else { return .collect }
        return .close(code: 1009, reason: "message too big", bytes: buffered + adding)  // RFC 6455 7.4.1
    }

    // MARK: - Backfill

    /// The filter's `occurred` window, unix seconds.
    public struct Window: Sendable, Equatable {
        public var since: Double
        public var until: Double
    }

    /// From a minute before the last event seen (`lastOccurred`, as Prefect wrote it) so a reconnect misses none,
    /// else from 15 minutes back (the server clamps `since` to that anyway), until a year ahead (the server applies
    /// `until` to live events too).
    public static func backfillWindow(lastOccurred: String?, now: Double) -> Window {
        let since = lastOccurred.flatMap(Timestamp.parse).map { $0 - 60 } ?? (now - 15 * 60)
        return Window(since: since, until: now + 365 * 86400)
    }
}
