import Testing
@testable import RelayCore

@Suite struct AddressTallyTests {
    @Test func eachAddressHasItsOwnCap() {
        var tally = AddressTally(cap: 2)
        tally.add("203.0.113.7")
        #expect(!tally.isFull("203.0.113.7"))
        tally.add("203.0.113.7")
        #expect(tally.isFull("203.0.113.7"))
        #expect(!tally.isFull("203.0.113.8"))
        tally.remove("203.0.113.7")
        #expect(!tally.isFull("203.0.113.7") && tally.count("203.0.113.7") == 1)
        tally.remove("203.0.113.7")
        #expect(tally.addresses == 0)  // nothing kept for an address holding nothing
    }
}
