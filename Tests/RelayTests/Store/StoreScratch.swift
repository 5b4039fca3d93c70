import Glibc
@testable import Relay
@testable import RelayCore

/// A fresh directory per test (Swift Testing runs tests in parallel), removed with its contents on release.
final class StoreScratch {
    struct Failed: Error {}

    let path: String

    init() throws {
        var template = Array("/tmp/prefect-push-store-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { buffer in
            mkdtemp(buffer.baseAddress!).map { String(cString: $0) }
        }
        guard let made else { throw Failed() }
        path = made
    }

    func file(_ name: String) -> String { path + "/" + name }

    /// A store at `name` in this directory.
    func store(_ name: String = "relay.db", checkpoints: WALCheckpointer.Policy = WALCheckpointer.Policy()) throws -> Store {
        try Store(path: file(name), checkpoints: checkpoints)
    }

    /// Writes raw bytes to a file in this directory.
    func write(_ bytes: [UInt8], to name: String) throws {
        let fd = open(file(name), O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard fd >= 0 else { throw Failed() }
        defer { close(fd) }
        guard bytes.withUnsafeBytes({ Glibc.write(fd, $0.baseAddress, $0.count) }) == bytes.count else { throw Failed() }
    }

    deinit {
        chmod(path, 0o755)  // a test may have made it read-only
        StoreScratch.removeTree(path)
    }

    /// Removes a directory and everything under it, children first; symlinks are removed, not followed.
    private static func removeTree(_ path: String) {
        if let dir = opendir(path) {
            var children: [String] = []
            while let entry = readdir(dir) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                    String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
                }
                if name != "." && name != ".." { children.append(path + "/" + name) }
            }
            closedir(dir)
            for child in children {
                var info = stat()
                if lstat(child, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR {
                    removeTree(child)
                } else {
                    unlink(child)
                }
            }
        }
        rmdir(path)
    }
}

func registration(_ id: String, token: String = "aabbccddeeff00112233", start: String? = "ffee0011",
                  environment: APNsEnvironment = .production, server: String = "srv-1") -> DeviceRegistration {
    DeviceRegistration(id: id, token: token, startToken: start, environment: environment, serverID: server)
}
