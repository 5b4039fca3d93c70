/// An HTTP/1.1 request head and body as bytes for the wire (RFC 9112 §3): what the Prefect connection pool writes.
public enum HTTP1Request {
    /// `method path HTTP/1.1`, then `Host`, `User-Agent`, the given headers, and `Content-Length` when there is a
    /// body (or the method carries one). Nil when a field could smuggle a line break or NUL into the head, or a
    /// header name isn't a token: such a request is refused rather than sent.
    public static func serialize(method: String, path: String, authority: String, headers: [(String, String)],
                                 body: [UInt8]?, userAgent: String) -> [UInt8]? {
        guard !method.isEmpty, method.utf8.allSatisfy(HTTPSyntax.isTokenByte),
              path.hasPrefix("/"), !path.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }),
              isFieldValue(authority), isFieldValue(userAgent) else {
            return nil
        }
        var head = "\(method) \(path) HTTP/1.1\r\nHost: \(authority)\r\nUser-Agent: \(userAgent)\r\n"
        for (name, value) in headers {
            guard !name.isEmpty, name.utf8.allSatisfy(HTTPSyntax.isTokenByte), isFieldValue(value) else { return nil }
            // These are the pool's to set; a caller's copy would contradict them.
            if ["host", "user-agent", "content-length", "transfer-encoding", "connection"]
                .contains(where: { HTTP1ResponseParser.sameToken($0, name) }) { continue }
            head += "\(name): \(value)\r\n"
        }
        if let body {
            head += "Content-Length: \(body.count)\r\n"
        } else if ["POST", "PUT", "PATCH"].contains(method) {
            head += "Content-Length: 0\r\n"
        }
        head += "\r\n"
        var bytes = Array(head.utf8)
        if let body { bytes += body }
        return bytes
    }

    private static func isFieldValue(_ value: String) -> Bool {
        !value.utf8.contains { $0 == 0x0A || $0 == 0x0D || $0 == 0x00 }
    }
}
