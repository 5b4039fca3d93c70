// Shared by every fuzz harness: each harness file defines `fuzzOne(_ data: [UInt8])`, built together with the
// RelayCore sources (and the two C-parser readers, JSONParser and Markdown) into one executable with
// `swiftc -sanitize=fuzzer,address` (see the Makefile's `fuzz` target). A broken invariant is a crash
// (`fuzzCheck`), so libFuzzer keeps the input.

@_cdecl("LLVMFuzzerTestOneInput")
public func LLVMFuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    fuzzOne(bytes)
    return 0
}

/// Stops the run with `message` when an invariant is broken.
func fuzzCheck(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String) {
    if !condition() { fatalError("invariant broken: \(message())") }
}

/// Splits fuzz input into `count` byte fields at 0xFF separators (missing fields are empty).
func fields(_ data: [UInt8], _ count: Int) -> [[UInt8]] {
    var out = data.split(separator: 0xFF, maxSplits: count - 1, omittingEmptySubsequences: false).map(Array.init)
    while out.count < count { out.append([]) }
    return out
}

/// Fuzz bytes as text, invalid UTF-8 repaired (what the relay's readers hand the core).
func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }
