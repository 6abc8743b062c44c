import CacheServer
import Foundation
import Glibc
import Testing

@Suite("deploy/cached.conf")
struct ConfigurationDeployFileTests {
    /// The repository's root, found from this file's location (Tests/CacheServerTests/).
    private static let deployFile: String = {
        var components = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        components.removeLast(3)
        return components.joined(separator: "/") + "/deploy/cached.conf"
    }()

    /// The shipped file with its `dir` (the service's state directory, which only exists on a machine where
    /// the unit ran) pointed at an existing directory, loaded.
    private static func loadWithExistingDirectory() throws -> ServerConfiguration {
        let text = try deployFileContents()
        let temporary = FileManager.default.temporaryDirectory.path
        let copy = temporary + "/cached-deploy-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).conf"
        let replaced = text.replacingOccurrences(of: "\ndir /var/lib/cached\n", with: "\ndir \(temporary)\n")
        #expect(replaced != text)
        let file = try #require(fopen(copy, "w"))
        fputs(replaced, file)
        fclose(file)
        defer { unlink(copy) }
        return try ServerConfiguration.load(configFile: copy)
    }

    @Test("loads without errors (with dir pointing at a directory that exists)")
    func loads() throws {
        _ = try Self.loadWithExistingDirectory()
    }

    @Test("keeps snapshots in the systemd unit's state directory, /var/lib/cached, with no save points")
    func snapshotDirectory() throws {
        let lines = try ConfigurationFile.parse(Array(try Self.deployFileContents().utf8), path: Self.deployFile)
        #expect(lines.filter { $0.directive == "dir" }.map(\.arguments) == [["/var/lib/cached"]])
        #expect(try Self.loadWithExistingDirectory().savePoints.isEmpty)
    }

    @Test("states the defaults, apart from also binding ::1 when available and the snapshot directory")
    func statesDefaults() throws {
        var loaded = try Self.loadWithExistingDirectory()
        #expect(loaded.bind == ["127.0.0.1", "-::1"])
        loaded.bind = ServerConfiguration().bind
        loaded.directory = ServerConfiguration().directory
        #expect(loaded.configFile.hasPrefix("/"), "the file it came from, as an absolute path")
        loaded.configFile = ""
        #expect(loaded == ServerConfiguration())
    }

    @Test("mentions every directive this server understands, but the hidden ones (debugging aids, as Redis's)")
    func mentionsEveryDirective() throws {
        let text = try Self.deployFileContents()
        let lines = try ConfigurationFile.parse(Array(text.utf8), path: Self.deployFile)
        let active = Set(lines.map(\.directive))
        let commentedOut = Set(
            text.split(separator: "\n")
                .compactMap { $0.hasPrefix("# ") ? $0.dropFirst(2).split(separator: " ").first.map(String.init) : nil })
        for name in ConfigurationDirective.all.filter({ !$0.isHidden }).map(\.name) {
            #expect(active.contains(name) || commentedOut.contains(name), "\(name) is not in deploy/cached.conf")
        }
    }

    static func deployFileContents() throws -> String {
        let file = try #require(fopen(deployFile, "r"))
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = fread(&buffer, 1, buffer.count, file)
            if count == 0 { break }
            bytes += buffer[0..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
