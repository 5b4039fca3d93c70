import Testing
@testable import RelayCore

/// CIDR blocks as `TRUSTED_PROXIES` lists them.
@Suite struct IPNetworkTests {
    @Test func blocksMatchTheirOwnFamily() throws {
        func block(_ text: String) throws -> IPNetwork { try IPNetwork.parse(text).get() }
        #expect(try block("10.0.0.0/8").contains(IPAddress("10.255.1.2")!))
        #expect(try !block("10.0.0.0/8").contains(IPAddress("11.0.0.1")!))
        #expect(try block("172.16.0.0/12").contains(IPAddress("172.31.255.255")!))
        #expect(try !block("172.16.0.0/12").contains(IPAddress("172.32.0.0")!))
        #expect(try block("127.0.0.1").description == "127.0.0.1/32")
        #expect(try block("0.0.0.0/0").contains(IPAddress("203.0.113.9")!))
        #expect(try block("fd00::/8").contains(IPAddress("fd12:3456::1")!))
        #expect(try !block("fd00::/8").contains(IPAddress("fe80::1")!))
        #expect(try block("::1").description == "::1/128")
        // A mapped peer is its IPv4 address, so an IPv4 block holds it; a mapped block is that IPv4 block.
        #expect(try block("10.0.0.0/8").contains(IPAddress("::ffff:10.1.2.3")!))
        #expect(try block("::ffff:10.0.0.0/104").description == "10.0.0.0/8")
        #expect(try block("::ffff:10.0.0.0/104").contains(IPAddress("10.9.9.9")!))
        // Families don't mix: ::/0 is every IPv6 client, not the IPv4 ones.
        #expect(try block("::/0").contains(IPAddress("2001:db8::1")!))
        #expect(try !block("::/0").contains(IPAddress("10.0.0.1")!))
        #expect(try !block("0.0.0.0/0").contains(IPAddress("::1")!))
    }

    @Test func malformedBlocksSayWhat() {
        #expect(IPNetwork.parse("10.0.0.0/33") == .failure(.badLength(maximum: 32)))
        #expect(IPNetwork.parse("fd00::/129") == .failure(.badLength(maximum: 128)))
        #expect(IPNetwork.parse("10.0.0.0/") == .failure(.badLength(maximum: 32)))
        #expect(IPNetwork.parse("10.0.0.0/08") == .failure(.badLength(maximum: 32)))
        #expect(IPNetwork.parse("10.0.0.0/-1") == .failure(.badLength(maximum: 32)))
        #expect(IPNetwork.parse("10.0.0.0/8/8") == .failure(.badLength(maximum: 32)))
        #expect(IPNetwork.parse("ingress.local/32") == .failure(.notAnAddress))
        #expect(IPNetwork.parse("/8") == .failure(.notAnAddress))
        #expect(IPNetwork.parse("10.1.2.3/8") == .failure(.hostBits(network: "10.0.0.0/8", single: "10.1.2.3/32")))
        #expect(IPNetwork.parse("fd00::1/8") == .failure(.hostBits(network: "fd00::/8", single: "fd00::1/128")))
    }
}
