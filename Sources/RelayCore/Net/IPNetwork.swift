/// A CIDR block: `10.0.0.0/8`, `fd00::/8`, or a single address (`/32` or `/128` when no length is given). An IPv6
/// block inside `::ffff:0:0/96` is the IPv4 block it maps (`::ffff:10.0.0.0/104` is `10.0.0.0/8`), as addresses are
/// (`IPAddress`). Otherwise families don't mix: an IPv6 block matches IPv6 addresses only, so `::/0` trusts every
/// IPv6 client and no IPv4 one.
public struct IPNetwork: Sendable, Hashable, CustomStringConvertible {
    /// The first address of the block (every bit past `prefixLength` is zero).
    public let address: IPAddress
    public let prefixLength: Int

    /// What is wrong with a block's text, for a message that names the entry.
    public enum Problem: Error, Equatable {
        case notAnAddress
        case badLength(maximum: Int)
        /// Bits set past the prefix: the block the entry probably meant, and the single address it also names.
        case hostBits(network: String, single: String)
    }

    public static func parse(_ text: some StringProtocol) -> Result<IPNetwork, Problem> {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard var bytes = IPAddress.rawBytes(parts[0]) else { return .failure(.notAnAddress) }
        let maximum = bytes.count * 8
        var length = maximum
        if parts.count == 2 {
            let digits = parts[1]
            guard !digits.isEmpty, digits.count <= 3, digits.allSatisfy(\.isASCIIDigit),
                  digits.count == 1 || digits.first != "0", let value = Int(digits), value <= maximum else {
                return .failure(.badLength(maximum: maximum))
            }
            length = value
        }
        // An IPv4-mapped block of /96 or longer is an IPv4 block. (A shorter block can't look mapped: its bits 80-95
        // are past the prefix, so zero.)
        if bytes.count == 16 && length >= 96 && IPAddress.isIPv4Mapped(bytes) {
            bytes = Array(bytes[12...])
            length -= 96
        }
        let masked = IPNetwork.masked(bytes, to: length)
        guard masked == bytes else {
            let network = IPAddress(bytes: masked).map { "\($0)/\(length)" } ?? ""
            let single = IPAddress(bytes: bytes).map { "\($0)/\($0.bytes.count * 8)" } ?? ""
            return .failure(.hostBits(network: network, single: single))
        }
        guard let address = IPAddress(bytes: bytes) else { return .failure(.notAnAddress) }
        return .success(IPNetwork(address: address, prefixLength: length))
    }

    private init(address: IPAddress, prefixLength: Int) {
        self.address = address
        self.prefixLength = prefixLength
    }

    /// Whether `candidate` is in the block (never across families: see the type's comment).
    public func contains(_ candidate: IPAddress) -> Bool {
        candidate.bytes.count == address.bytes.count && IPNetwork.masked(candidate.bytes, to: prefixLength) == address.bytes
    }

    public var description: String { "\(address)/\(prefixLength)" }

    /// `bytes` with every bit past the first `length` cleared.
    static func masked(_ bytes: [UInt8], to length: Int) -> [UInt8] {
        bytes.enumerated().map { index, byte in
            let kept = min(max(length - index * 8, 0), 8)
            return kept == 8 ? byte : byte & ~(0xff >> UInt8(kept))
        }
    }
}
