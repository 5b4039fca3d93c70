import Foundation
import Testing
@testable import RelayCore

/// The README against the settings: it reads a file of the repository, so it stays out of the pure suites.
@Suite struct ReadmeSettingsTests {
    /// The README's configuration table keeps up with the descriptors: every variable is in it, and a row's default
    /// is the one `Settings` gives (the one `Config` uses).
    @Test func readmeTableMatchesTheSettings() throws {
        let readme = try String(contentsOfFile: TestFiles.packageRoot + "/README.md", encoding: .utf8)
        let section = readme.split(separator: "\n## ").first { $0.hasPrefix("Configuration") }.map(String.init) ?? ""
        var rows: [String: String] = [:]
        for line in section.split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 3 else { continue }
            rows[cells[0].replacingOccurrences(of: "`", with: "")] = cells[2].replacingOccurrences(of: "`", with: "")
        }
        for setting in Settings.all {
            #expect(section.contains("`\(setting.name)`"), "README's configuration table lacks \(setting.name)")
            if let cell = rows[setting.name] {
                #expect(cell.hasPrefix(setting.defaultValue), "\(setting.name): README says \(cell), --help \(setting.defaultValue)")
            }
        }
    }
}
