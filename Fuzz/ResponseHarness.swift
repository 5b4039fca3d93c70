// The Prefect client's HTTP/1.1 response parser: any bytes, fed in reads of any size, then the connection closing,
// never crash and never pass the parser's limits. The first byte picks the read size (1…256), the rest is fed in
// pieces of that size; small limits (4 KiB of headers, 64 KiB of body) keep each run fast.

func fuzzResponse(_ data: [UInt8]) {
    guard let first = data.first else { return }
    let step = Int(first) + 1
    var parser = HTTP1ResponseParser(maxHeaderBytes: 4096, maxBody: 65_536)
    var outcome = HTTP1ResponseParser.Progress.needMore
    var index = 1
    while index < data.count {
        let end = min(index + step, data.count)
        outcome = data[index..<end].withUnsafeBufferPointer { parser.feed($0) }
        index = end
    }
    if case .needMore = outcome { outcome = parser.finishAtEOF() }
    if case .complete(let response) = outcome {
        fuzzCheck(response.body.count <= 65_536, "body over the limit")
        fuzzCheck((200...999).contains(response.status), "status \(response.status) out of range")
    }
}
