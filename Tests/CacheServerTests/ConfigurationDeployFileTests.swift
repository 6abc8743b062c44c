import CacheServer
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

@Suite("deploy/cached.conf")
struct ConfigurationDeployFileTests {
    /// The repository's root, found from this file's location (Tests/CacheServerTests/).
    private static let deployFile: String = {
        var components = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        components.removeLast(3)
        return components.joined(separator: "/") + "/deploy/cached.conf"
    }()

    @Test("loads without errors")
    func loads() throws {
        _ = try ServerConfiguration.load(configFile: Self.deployFile)
    }

    @Test("states the defaults, apart from also binding ::1 when available")
    func statesDefaults() throws {
        var loaded = try ServerConfiguration.load(configFile: Self.deployFile)
        #expect(loaded.bind == ["127.0.0.1", "-::1"])
        loaded.bind = ServerConfiguration().bind
        loaded.directory = ServerConfiguration().directory
        #expect(loaded == ServerConfiguration())
    }

    @Test("mentions every directive this server understands")
    func mentionsEveryDirective() throws {
        let text = try Self.deployFileContents()
        let lines = try ConfigurationFile.parse(Array(text.utf8), path: Self.deployFile)
        let active = Set(lines.map(\.directive))
        let commentedOut = Set(
            text.split(separator: "\n")
                .compactMap { $0.hasPrefix("# ") ? $0.dropFirst(2).split(separator: " ").first.map(String.init) : nil })
        for name in ServerConfiguration.directiveNames {
            #expect(active.contains(name) || commentedOut.contains(name), "\(name) is not in deploy/cached.conf")
        }
    }

    private static func deployFileContents() throws -> String {
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
