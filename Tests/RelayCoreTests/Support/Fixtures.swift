import Glibc  // fopen/fread: the stdlib alone cannot read a file, and Foundation stays out of the tests
import Testing
@testable import RelayCore

/// Reads the captures in `Tests/RelayTests/Fixtures` (the one copy both test targets use) by path, found from this
/// file's own location: no bundle, no resources copied into this target.
enum Fixtures {
    static let root: String = {
        var path = #filePath
        // …/Tests/RelayCoreTests/Support/Fixtures.swift → …/Tests/RelayTests/Fixtures/
        for _ in 0..<3 { path = String(path[..<path.lastIndex(of: "/")!]) }
        return path + "/RelayTests/Fixtures/"
    }()

    /// A fixture's bytes as stored; nil when it is missing.
    static func bytes(_ relative: String) -> [UInt8]? {
        guard let file = fopen(root + relative, "rb") else { return nil }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = fread(&chunk, 1, chunk.count, file)
            if count == 0 { break }
            bytes += chunk[0..<count]
        }
        return bytes
    }

    /// A fixture's text (empty, with an issue recorded, when it is missing).
    static func text(_ relative: String) -> String {
        guard let bytes = bytes(relative) else {
            Issue.record("missing fixture \(relative)")
            return ""
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A fixture parsed as JSON (`.null`, with an issue recorded, when it is missing or not JSON).
    static func json(_ relative: String) -> JSONValue {
        do {
            return try JSONParser.parse(text(relative))
        } catch {
            Issue.record("fixture \(relative) is not JSON: \(error)")
            return .null
        }
    }

    /// The `response` of a captured `prefect/<name>.json` REST exchange.
    static func response(_ name: String) -> JSONValue {
        json("prefect/\(name).json")["response"] ?? .null
    }
}
