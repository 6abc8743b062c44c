import Foundation
import Testing

/// docs/architecture.md and README.md describe every target the package has: read against Package.swift and the
/// Sources folder, so that a target added or renamed fails here until the docs say so.
@Suite("the docs list every target")
struct PackageDocsTests {
    static let root = DeployUnitFileTests.root

    /// The targets under Sources/ that Package.swift declares (test targets and the fuzzers' executables, which
    /// live under Tests/, are not listed in the docs).
    static func sourceTargets() throws -> [String] {
        let manifest = try String(contentsOfFile: root + "/Package.swift", encoding: .utf8)
        let declaration = /\.(?:target|executableTarget|systemLibrary)\(\s*name:\s*"([^"]+)"/
        let lines = manifest.split(separator: "\n")
        var names: [String] = []
        for match in manifest.matches(of: declaration) {
            let name = String(match.output.1)
            // The fuzzers' executables: one line each, with a path under Tests/.
            if lines.contains(where: { $0.contains("name: \"\(name)\"") && $0.contains("path: \"Tests/") }) { continue }
            names.append(name)
        }
        return names
    }

    @Test("Package.swift's source targets are the folders under Sources/")
    func targetsAreTheSourceFolders() throws {
        let folders = try FileManager.default.contentsOfDirectory(atPath: Self.root + "/Sources").filter { name in
            var isFolder: ObjCBool = false
            return !name.hasPrefix(".") && FileManager.default.fileExists(atPath: Self.root + "/Sources/" + name, isDirectory: &isFolder)
                && isFolder.boolValue
        }
        #expect(Set(try Self.sourceTargets()) == Set(folders))
    }

    @Test("docs/architecture.md's module table names every target")
    func architectureTable() throws {
        let text = try String(contentsOfFile: Self.root + "/docs/architecture.md", encoding: .utf8)
        // The first cell of each row names its targets (one or several, in backticks).
        let firstCells = text.split(separator: "\n").filter { $0.hasPrefix("| `") }
            .map { $0.dropFirst(2).prefix { $0 != "|" } }.joined(separator: " ")
        for target in try Self.sourceTargets() {
            #expect(firstCells.contains("`\(target)`"), "docs/architecture.md's module table has no row for \(target)")
        }
    }

    @Test("README's layout names every target's folder")
    func readmeLayout() throws {
        let text = try String(contentsOfFile: Self.root + "/README.md", encoding: .utf8)
        let layout = try #require(text.range(of: "\n## Layout\n")).upperBound
        let section = text[layout...].components(separatedBy: "\n#").first ?? ""
        let named = Set(section.matches(of: /Sources\/([A-Za-z0-9_-]+)/).map { String($0.output.1) })
        for target in try Self.sourceTargets() {
            #expect(named.contains(target), "README's layout does not name Sources/\(target)")
        }
    }
}
