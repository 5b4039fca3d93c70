import Glibc

/// Plain text to stderr (for usage errors before logging is set up), one write(2) per call.
enum Stderr {
    static func write(_ text: String) {
        var bytes = Array(text.utf8)
        _ = bytes.withUnsafeMutableBytes { Glibc.write(2, $0.baseAddress, $0.count) }
    }
}
