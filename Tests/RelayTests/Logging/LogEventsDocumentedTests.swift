import Glibc
import Testing

/// Every event the relay can write is in the table of docs/operations.md, and the table names no event that is gone.
@Suite struct LogEventsDocumentedTests {
    /// Where event names appear in the sources: as the first argument of these calls.
    static let callPrefixes = ["Log.debug(\"", "Log.info(\"", "Log.warn(\"", "Log.error(\"", "Log.emit(level, \"",
                               "RelayThread.start(\"", "writeLine(\"warn\", \""]

    @Test func everyEventIsListedInOperations() throws {
        var written: Set<String> = []
        for file in Self.swiftFiles(under: TestFiles.packageRoot + "/Sources") {
            let text = try TestFiles.read(file)
            for prefix in Self.callPrefixes {
                var rest = Substring(text)
                while let found = rest.range(of: prefix) {
                    rest = rest[found.upperBound...]
                    let name = rest.prefix { $0 != "\"" }
                    if name.contains("."), name.allSatisfy({ $0.isLowercase || $0 == "." || $0 == "_" }) {
                        written.insert(String(name))
                    }
                }
            }
        }
        #expect(written.count > 60, "the scan found too few events: \(written.sorted())")
        let documented = Set(try TestFiles.read(TestFiles.packageRoot + "/docs/operations.md").split(separator: "\n")
            .compactMap { line -> String? in
                guard line.hasPrefix("| `") else { return nil }
                let name = line.dropFirst(3).prefix { $0 != "`" }
                return name.contains(".") && !name.contains(" ") && !name.hasPrefix("prefect_push") ? String(name) : nil
            })
        #expect(written.subtracting(documented).isEmpty, "not in docs/operations.md: \(written.subtracting(documented).sorted())")
        let stale = documented.subtracting(written).filter { !$0.hasSuffix(".md") }
        #expect(stale.isEmpty, "listed but never written: \(stale.sorted())")
    }

    private static func swiftFiles(under directory: String) -> [String] {
        guard let dir = opendir(directory) else { return [] }
        defer { closedir(dir) }
        var files: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            guard !name.hasPrefix(".") else { continue }
            let path = directory + "/" + name
            if entry.pointee.d_type == UInt8(DT_DIR) {
                files += swiftFiles(under: path)
            } else if name.hasSuffix(".swift") {
                files.append(path)
            }
        }
        return files
    }
}
