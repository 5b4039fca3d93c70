import Testing
@testable import RelayCore

/// `TRUSTED_PROXIES` and the X-Forwarded-For walk: the client is named only by trusted hops, right to left.
@Suite struct TrustedProxiesTests {
    let proxies = try! TrustedProxies(parsing: "10.0.0.0/8, fd00::/8,127.0.0.1/32", variable: "TRUSTED_PROXIES")

    func client(_ peer: String, _ lines: [String]) -> String {
        proxies.client(peer: IPAddress(peer)!, forwardedFor: lines).address.description
    }

    @Test func anUntrustedPeerIsTheClientWhateverItSays() {
        #expect(client("203.0.113.9", ["198.51.100.1"]) == "203.0.113.9")
        #expect(proxies.client(peer: IPAddress("203.0.113.9")!, forwardedFor: ["198.51.100.1"]).via == nil)
        #expect(TrustedProxies.none.client(peer: IPAddress("10.0.0.1")!, forwardedFor: ["198.51.100.1"])
            == ClientAddress(address: IPAddress("10.0.0.1")!, via: nil))
    }

    @Test func theWalkStopsAtTheFirstUntrustedHopFromTheRight() {
        // The client put 192.0.2.66 first to pose as someone else; the ingress appended the address it saw.
        #expect(client("10.0.0.5", ["192.0.2.66, 203.0.113.7"]) == "203.0.113.7")
        #expect(client("10.0.0.5", ["192.0.2.66, 203.0.113.7, 10.1.1.1"]) == "203.0.113.7")
        #expect(client("10.0.0.5", ["203.0.113.7,10.1.1.1 ,  10.2.2.2"]) == "203.0.113.7")
        #expect(client("fd00::5", ["2001:db8::7"]) == "2001:db8::7")
        #expect(client("10.0.0.5", ["2001:db8::7, fd00::9"]) == "2001:db8::7")
        let named = proxies.client(peer: IPAddress("10.0.0.5")!, forwardedFor: ["203.0.113.7"])
        #expect(named == ClientAddress(address: IPAddress("203.0.113.7")!, via: IPAddress("10.0.0.5")!))
    }

    @Test func linesAreJoinedInOrder() {
        #expect(client("10.0.0.5", ["192.0.2.66", "203.0.113.7"]) == "203.0.113.7")
        #expect(client("10.0.0.5", ["203.0.113.7", "10.9.9.9"]) == "203.0.113.7")
    }

    @Test func everyHopTrustedMakesTheLeftmostTheClient() {
        #expect(client("10.0.0.5", ["10.3.3.3, 10.1.1.1"]) == "10.3.3.3")
        #expect(client("127.0.0.1", ["127.0.0.1"]) == "127.0.0.1")
    }

    @Test func noHeaderMeansThePeer() {
        #expect(client("10.0.0.5", []) == "10.0.0.5")
        #expect(proxies.client(peer: IPAddress("10.0.0.5")!, forwardedFor: []).via == nil)
    }

    /// A broken entry stops the walk at the last trusted hop: what lies left of it can't be believed.
    @Test(arguments: [
        (["unknown"], "10.0.0.5"), ([""], "10.0.0.5"), (["203.0.113.7:4711"], "10.0.0.5"),
        (["[2001:db8::7]"], "10.0.0.5"), (["client.example"], "10.0.0.5"), (["203.0.113.7,"], "10.0.0.5"),
        (["192.0.2.66, garbage, 10.1.1.1"], "10.1.1.1"), (["192.0.2.66,,10.1.1.1"], "10.1.1.1"),
        (["203.0.113.7, 10.1.1.1", "nonsense"], "10.0.0.5"), (["fe80::1%eth0"], "10.0.0.5"),
    ])
    func aMalformedEntryStopsAtTheLastTrustedHop(_ lines: [String], _ expected: String) {
        #expect(client("10.0.0.5", lines) == expected, "\(lines)")
    }

    /// A dual-stack listener sees an IPv4 proxy as ::ffff:a.b.c.d; its IPv4 block still trusts it, and a mapped
    /// entry in the header is the IPv4 client.
    @Test func ipv4MappedPeersAndEntriesAreIPv4() {
        let mappedPeer = IPAddress(bytes: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 5])!
        #expect(proxies.trusts(mappedPeer))
        #expect(proxies.client(peer: mappedPeer, forwardedFor: ["203.0.113.7"]).address.description == "203.0.113.7")
        #expect(client("10.0.0.5", ["::ffff:203.0.113.7"]) == "203.0.113.7")
        #expect(client("10.0.0.5", ["203.0.113.7, ::ffff:10.1.1.1"]) == "203.0.113.7")
    }

    @Test func parsesTheListAndSkipsBlankEntries() throws {
        let parsed = try TrustedProxies(parsing: " 10.0.0.0/8 ,,fd00::/8, 127.0.0.1 ,", variable: "TRUSTED_PROXIES")
        #expect(parsed.networks.map(\.description) == ["10.0.0.0/8", "fd00::/8", "127.0.0.1/32"])
        #expect(try TrustedProxies(parsing: " , ", variable: "TRUSTED_PROXIES").isEmpty)
    }

    /// A bad entry stops start-up (exit 2 at the edge) with one line naming the variable, the entry and the fix.
    @Test(arguments: [
        ("10.0.0.0/8,10.0.0.0/33", "\"10.0.0.0/33\", whose prefix length is not a number from 0 to 32"),
        ("fd00::/130", "\"fd00::/130\", whose prefix length is not a number from 0 to 128"),
        ("ingress.local", "\"ingress.local\", which is not an IP address or CIDR block"),
        ("10.0.0.0/8 fd00::/8", "\"10.0.0.0/8 fd00::/8\", whose prefix length"),
        ("[::1]/128", "\"[::1]/128\", which is not an IP address"),
        ("10.1.2.3/8", "\"10.1.2.3/8\", whose address has bits set past its prefix length; write the block, "
            + "10.0.0.0/8, or the single address, 10.1.2.3/32"),
    ])
    func aBadEntryIsAConfigErrorNamingIt(_ value: String, _ problem: String) {
        do {
            _ = try Config(environment: ["PREFECT_API_URL": "http://127.0.0.1:4200/api", "TRUSTED_PROXIES": value])
            Issue.record("\(value) was accepted")
        } catch {
            #expect(error.variable == "TRUSTED_PROXIES")
            #expect(error.problem.contains(problem), "\(error.problem)")
        }
    }

    @Test func configReadsItAndDefaultsToNone() throws {
        let base = ["PREFECT_API_URL": "http://127.0.0.1:4200/api"]
        #expect(try Config(environment: base).trustedProxies.isEmpty)
        let set = try Config(environment: base.merging(["TRUSTED_PROXIES": "10.0.0.0/8,fd00::/8"]) { $1 })
        #expect(set.trustedProxies.networks.map(\.description) == ["10.0.0.0/8", "fd00::/8"])
        #expect(Settings.all.contains { $0.name == "TRUSTED_PROXIES" })
    }
}
