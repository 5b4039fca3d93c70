import Glibc

// Shared by every fuzz harness. Each harness file defines `fuzz<Name>(_ data: [UInt8])`; all of them are built
// together with the RelayCore sources (and the two C-parser readers, JSONParser and Markdown) into one executable
// with `swiftc -sanitize=fuzzer,address` (see the Makefile's `fuzz` target), and FUZZ_HARNESS picks the one a run
// drives. One build, not one per harness: each compiles every RelayCore source under ASan and -O, about 2.5 min
// of a core here, seven times over. A broken invariant is a crash (`fuzzCheck`), so libFuzzer keeps the input.

/// The harnesses by name (FUZZ_HARNESS).
let harnesses: [String: @Sendable ([UInt8]) -> Void] = [
    "APNs": fuzzAPNs, "APNsMachine": fuzzAPNsMachine, "Events": fuzzEvents, "HTTP": fuzzHTTP, "JSON": fuzzJSON, "Payload": fuzzPayload,
    "Pool": fuzzPool, "Response": fuzzResponse, "Text": fuzzText,
]

/// The harness FUZZ_HARNESS names, read once; an unknown or missing name stops the run at its first input.
let harness: @Sendable ([UInt8]) -> Void = {
    let name = getenv("FUZZ_HARNESS").map { String(cString: $0) } ?? ""
    guard let chosen = harnesses[name] else {
        fatalError("FUZZ_HARNESS=\(name): name one of \(harnesses.keys.sorted().joined(separator: ", "))")
    }
    return chosen
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func LLVMFuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    harness(bytes)
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
