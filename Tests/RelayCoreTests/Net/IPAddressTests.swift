import Testing
@testable import RelayCore

/// Address text as `API_BIND`, `METRICS_BIND`, `TRUSTED_PROXIES` and X-Forwarded-For give it, and as logs print it.
@Suite struct IPAddressTests {
    @Test(arguments: [
        ("127.0.0.1", "127.0.0.1"), ("0.0.0.0", "0.0.0.0"), ("255.255.255.255", "255.255.255.255"),
        ("::", "::"), ("::1", "::1"), ("0:0:0:0:0:0:0:1", "::1"), ("2001:DB8::1", "2001:db8::1"),
        ("2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"), ("2001:0db8:0000:0000:0000:0000:0002:0001", "2001:db8::2:1"),
        ("1:2:3:4:5:6:7::", "1:2:3:4:5:6:7:0"), ("::2:3:4:5:6:7:8", "0:2:3:4:5:6:7:8"), ("fd00::", "fd00::"),
        ("1:0:0:2::3", "1:0:0:2::3"), ("::1.2.3.4", "::102:304"), ("64:ff9b::192.0.2.33", "64:ff9b::c000:221"),
        // IPv4-mapped: what a dual-stack socket reports for an IPv4 peer is that IPv4 address.
        ("::ffff:192.0.2.7", "192.0.2.7"), ("::FFFF:c000:0207", "192.0.2.7"), ("0:0:0:0:0:ffff:10.0.0.1", "10.0.0.1"),
    ])
    func readsAndPrints(_ text: String, _ shown: String) {
        #expect(IPAddress(text)?.description == shown, "\(text)")
    }

    @Test(arguments: [
        "", "localhost", "1.2.3", "1.2.3.4.5", "1.2.3.256", "01.2.3.4", "+1.2.3.4", "1..2.3", " 1.2.3.4",
        ":::", "1:::2", "1::2::3", ":1:2:3:4:5:6:7", "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7", "12345::", "g::1",
        "1:2:3:4:5:6:7:8::", "1::2:3:4:5:6:7:8", "[::1]", "fe80::1%eth0", "::1.2.3.4:5", "1.2.3.4::", "::1.2.3",
        "1.2.3.4:80", "unknown",
    ])
    func refusesWhatIsNotOneAddress(_ text: String) {
        #expect(IPAddress(text) == nil, "\(text)")
    }

    @Test func socketBytesOfAMappedPeerAreItsIPv4Address() {
        let mapped: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1]
        #expect(IPAddress(bytes: mapped) == IPAddress("127.0.0.1"))
        #expect(IPAddress(bytes: mapped)?.isIPv4 == true)
        #expect(IPAddress(bytes: [1, 2, 3]) == nil)
        #expect(IPAddress("::")?.isUnspecifiedIPv6 == true && IPAddress("::1")?.isUnspecifiedIPv6 == false)
    }
}
