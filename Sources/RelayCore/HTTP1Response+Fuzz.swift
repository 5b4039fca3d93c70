extension HTTP1ResponseParser {
    /// The fuzz entry point (`Fuzz/ResponseHarness.swift`, `make fuzz`; the tests call it too): the first byte picks
    /// a read size (1…256), the rest is fed in pieces of that size, then the connection "closes". Whatever the
    /// bytes, the parser must finish without trapping and within its limits; this checks the limits it promises.
    /// Small limits (4 KiB of headers, 64 KiB of body) keep each run fast. Returns 0, as libFuzzer expects.
    @discardableResult
    public static func fuzz(_ data: UnsafeRawBufferPointer) -> Int32 {
        guard let first = data.first else { return 0 }
        let step = Int(first) + 1
        var parser = HTTP1ResponseParser(maxHeaderBytes: 4096, maxBody: 65_536)
        let bytes = data.dropFirst()
        var index = bytes.startIndex
        var outcome = HTTP1ResponseParser.Progress.needMore
        while index < bytes.endIndex {
            let end = min(index + step, bytes.endIndex)
            let piece = Array(bytes[index..<end])
            outcome = piece.withUnsafeBufferPointer { parser.feed($0) }
            index = end
        }
        if case .needMore = outcome { outcome = parser.finishAtEOF() }
        switch outcome {
        case .complete(let response):
            precondition(response.body.count <= 65_536, "body over the limit")
            precondition((200...999).contains(response.status) , "status out of range")
        case .failed, .needMore:
            break
        }
        return 0
    }
}
