import Glibc
import RelayCore

/// An IPv4 or IPv6 socket address in the `sockaddr_storage` that `bind`, `getsockname` and `getpeername` take, with
/// the `IPAddress` it holds. A value: it owns no descriptor.
struct SocketAddress {
    private(set) var storage = sockaddr_storage()
    private(set) var length: socklen_t

    /// `address:port` as `sockaddr_in` (4 bytes) or `sockaddr_in6` (16).
    init(_ address: IPAddress, port: Int) {
        let port = in_port_t(UInt16(truncatingIfNeeded: port).bigEndian)
        if address.isIPv4 {
            var v4 = sockaddr_in()
            v4.sin_family = sa_family_t(AF_INET)
            v4.sin_port = port
            withUnsafeMutableBytes(of: &v4.sin_addr) { $0.copyBytes(from: address.bytes) }
            length = socklen_t(MemoryLayout<sockaddr_in>.size)
            withUnsafeMutableBytes(of: &storage) { $0.storeBytes(of: v4, as: sockaddr_in.self) }
        } else {
            var v6 = sockaddr_in6()
            v6.sin6_family = sa_family_t(AF_INET6)
            v6.sin6_port = port
            withUnsafeMutableBytes(of: &v6.sin6_addr) { $0.copyBytes(from: address.bytes) }
            length = socklen_t(MemoryLayout<sockaddr_in6>.size)
            withUnsafeMutableBytes(of: &storage) { $0.storeBytes(of: v6, as: sockaddr_in6.self) }
        }
    }

    /// What `call` (`getsockname` or `getpeername` on a descriptor) writes; nil when it fails.
    private init?(reading call: (UnsafeMutablePointer<sockaddr>, UnsafeMutablePointer<socklen_t>) -> Int32) {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let result = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { call($0, &length) }
        }
        guard result == 0 else { return nil }
        self.storage = storage
        self.length = length
    }

    /// The address `fd` is bound to.
    static func local(of fd: Int32) -> SocketAddress? { SocketAddress { getsockname(fd, $0, $1) } }

    /// The address of `fd`'s peer.
    static func peer(of fd: Int32) -> SocketAddress? { SocketAddress { getpeername(fd, $0, $1) } }

    var family: Int32 { Int32(storage.ss_family) }

    /// The IP address (an IPv4-mapped one as IPv4); nil for another family.
    var ip: IPAddress? {
        withUnsafeBytes(of: storage) { raw in
            switch family {
            case AF_INET:
                let v4 = raw.load(as: sockaddr_in.self)
                return withUnsafeBytes(of: v4.sin_addr) { IPAddress(bytes: Array($0)) }
            case AF_INET6:
                let v6 = raw.load(as: sockaddr_in6.self)
                return withUnsafeBytes(of: v6.sin6_addr) { IPAddress(bytes: Array($0)) }
            default:
                return nil
            }
        }
    }

    var port: Int {
        withUnsafeBytes(of: storage) { raw in
            switch family {
            case AF_INET: return Int(UInt16(bigEndian: raw.load(as: sockaddr_in.self).sin_port))
            case AF_INET6: return Int(UInt16(bigEndian: raw.load(as: sockaddr_in6.self).sin6_port))
            default: return 0
            }
        }
    }

    /// `bind(fd, self)`.
    func bind(_ fd: Int32) -> Int32 {
        var copy = storage
        return withUnsafePointer(to: &copy) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, length) }
        }
    }
}
