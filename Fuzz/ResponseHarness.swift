// The Prefect client's HTTP/1.1 response parser: any bytes, fed in reads of any size, then the connection closing,
// never crash and never pass the parser's limits (`HTTP1ResponseParser.fuzz` checks them).

func fuzzOne(_ data: [UInt8]) {
    data.withUnsafeBytes { _ = HTTP1ResponseParser.fuzz($0) }
}
