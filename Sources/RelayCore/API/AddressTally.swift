/// How many of something each client address holds (open connections, requests being answered), against one cap
/// for every address, so no single client can hold them all.
public struct AddressTally: Sendable {
    public let cap: Int
    private var counts: [String: Int] = [:]

    public init(cap: Int) { self.cap = cap }

    public func count(_ address: String) -> Int { counts[address, default: 0] }

    /// Whether `address` holds `cap` already: one more would be over it.
    public func isFull(_ address: String) -> Bool { count(address) >= cap }

    public mutating func add(_ address: String) { counts[address, default: 0] += 1 }

    /// One fewer for `address`; an address at zero is dropped, so the table holds only addresses holding something.
    public mutating func remove(_ address: String) {
        let left = count(address) - 1
        counts[address] = left > 0 ? left : nil
    }

    /// Addresses holding anything.
    public var addresses: Int { counts.count }
}
