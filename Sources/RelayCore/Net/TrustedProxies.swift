/// `TRUSTED_PROXIES`: the blocks whose connections may say, in `X-Forwarded-For`, which client they carry. Behind an
/// ingress every connection comes from the ingress, so without this the per-client limits and the logs see one
/// client. Empty (the default): the header is ignored and the client is the connection's peer.
public struct TrustedProxies: Sendable, Equatable {
    public let networks: [IPNetwork]

    public static let none = TrustedProxies(networks: [])

    public init(networks: [IPNetwork]) { self.networks = networks }

    /// A comma-separated list of CIDR blocks or single addresses (`10.0.0.0/8,fd00::/8,127.0.0.1`); blank entries
    /// are skipped. A bad entry is a `ConfigError` naming `variable`, the entry and the fix.
    public init(parsing text: String, variable: String) throws(ConfigError) {
        var networks: [IPNetwork] = []
        for raw in text.split(separator: ",") {
            let entry = String(raw).trimmingWhitespace()
            if entry.isEmpty { continue }
            let shown = "\"\(entry.prefix(60))\""
            switch IPNetwork.parse(entry) {
            case .success(let network):
                networks.append(network)
            case .failure(.notAnAddress):
                throw ConfigError(variable, "has \(shown), which is not an IP address or CIDR block; write blocks "
                                  + "like 10.0.0.0/8 or fd00::/8, or single addresses, separated by commas "
                                  + "(no host names, brackets or zones such as %eth0)")
            case .failure(.badLength(let maximum)):
                throw ConfigError(variable, "has \(shown), whose prefix length is not a number from 0 to \(maximum); "
                                  + "write it like 10.0.0.0/8")
            case .failure(.hostBits(let network, let single)):
                throw ConfigError(variable, "has \(shown), whose address has bits set past its prefix length; write "
                                  + "the block, \(network), or the single address, \(single)")
            }
        }
        self.networks = networks
    }

    public var isEmpty: Bool { networks.isEmpty }

    public func trusts(_ address: IPAddress) -> Bool { networks.contains { $0.contains(address) } }

    /// The client a request comes from, by the standard rule (nginx's `real_ip_recursive on`): a peer that is not
    /// trusted is the client, whatever it sends. From a trusted peer, `X-Forwarded-For` (its lines joined in order,
    /// RFC 9110 §5.3) is walked from the right, the entry the peer itself appended: while the hop reached is
    /// trusted, the entry left of it is the next hop; the first untrusted hop is the client, and when every entry
    /// is trusted the leftmost is.
    ///
    /// An entry that is not a bare IP address (empty, `unknown`, a port, brackets, a name) stops the walk at the last
    /// trusted hop, which is then the client. That hop is the nearest address known to be true: anything left of a
    /// broken entry may be the client's own invention, and refusing the request would let one bad header from an
    /// ingress break the API. Requests so attributed count against the proxy's own address.
    public func client(peer: IPAddress, forwardedFor lines: [String]) -> ClientAddress {
        guard trusts(peer), !lines.isEmpty else { return ClientAddress(address: peer, via: nil) }
        var hop = peer
        var named = false
        for entry in lines.joined(separator: ",").split(separator: ",", omittingEmptySubsequences: false).reversed() {
            guard let address = IPAddress(String(entry).trimmingWhitespace()) else { break }
            hop = address
            named = true
            if !trusts(address) { break }
        }
        return ClientAddress(address: hop, via: named ? peer : nil)
    }
}

/// Who a request is from: the client's address, and the trusted proxy that named it (nil when the client is the
/// connection's own peer).
public struct ClientAddress: Sendable, Equatable {
    public var address: IPAddress
    public var via: IPAddress?

    public init(address: IPAddress, via: IPAddress?) {
        self.address = address
        self.via = via
    }
}
