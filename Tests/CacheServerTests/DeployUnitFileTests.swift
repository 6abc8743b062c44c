import CacheServer
import Foundation
import Testing

/// deploy/cached-server.service read as systemd reads it: `Key=Value` lines in sections (later lines of
/// list settings add to earlier ones; this test only needs the last value of each key).
@Suite("deploy/cached-server.service")
struct DeployUnitFileTests {
    static let root: String = {
        var components = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        components.removeLast(3)
        return components.joined(separator: "/")
    }()

    /// section → key → values, in order.
    static func unit() throws -> [String: [String: [String]]] {
        let text = try String(contentsOfFile: root + "/deploy/cached-server.service", encoding: .utf8)
        var result: [String: [String: [String]]] = [:]
        var section = ""
        for line in text.split(separator: "\n").map({ $0.trimmingCharacters(in: .whitespaces) }) {
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") {
                section = String(line.dropFirst().dropLast())
                continue
            }
            guard let equals = line.firstIndex(of: "=") else { continue }
            result[section, default: [:]][String(line[..<equals]), default: []].append(String(line[line.index(after: equals)...]))
        }
        return result
    }

    static func service() throws -> [String: String] {
        try unit()["Service", default: [:]].compactMapValues(\.last)
    }

    @Test("Type=notify, started on the installed binary with the installed config")
    func execStart() throws {
        let service = try Self.service()
        #expect(service["Type"] == "notify")
        let makefile = try String(contentsOfFile: Self.root + "/Makefile", encoding: .utf8)
        let prefix = try #require(makefile.split(separator: "\n").first { $0.hasPrefix("PREFIX") }?.split(separator: "=").last?
            .trimmingCharacters(in: .whitespaces))
        #expect(service["ExecStart"] == "\(prefix)/bin/cached-server /etc/cached/cached.conf", "PREFIX in the Makefile is \(prefix)")
        #expect(service["Restart"] == "on-failure")
        #expect(try Self.unit()["Install"]?["WantedBy"] == ["multi-user.target"])
    }

    @Test("its own user and a state directory that is the config's dir")
    func stateDirectory() throws {
        let service = try Self.service()
        #expect(service["DynamicUser"] == "yes" || service["User"] != nil)
        #expect(service["StateDirectory"] == "cached")
        let config = try ConfigurationDeployFileTests.deployFileContents()
        #expect(config.contains("\ndir /var/lib/cached\n"))
    }

    @Test("hardening settings")
    func hardening() throws {
        let service = try Self.service()
        let expected = [
            "NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
            "PrivateDevices": "yes", "RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
            "MemoryDenyWriteExecute": "yes", "SystemCallFilter": "@system-service",
        ]
        for (key, value) in expected {
            #expect(service[key] == value, "\(key)")
        }
    }

    @Test("LimitNOFILE leaves room for maxclients plus 32, and TimeoutStopSec covers shutdown-timeout")
    func limits() throws {
        let service = try Self.service()
        let config = try ConfigurationDeployFileTests.deployFileContents()
        let line = try #require(config.split(separator: "\n").first { $0.hasPrefix("maxclients ") })
        let maxClients = try #require(Int(line.split(separator: " ")[1]))
        let files = try #require(service["LimitNOFILE"].flatMap { Int($0) })
        #expect(files >= maxClients + 32)
        let shutdownLine = try #require(config.split(separator: "\n").first { $0.hasPrefix("shutdown-timeout ") })
        let shutdownTimeout = try #require(Int(shutdownLine.split(separator: " ")[1]))
        let stop = try #require(service["TimeoutStopSec"].flatMap { Int($0) })
        #expect(stop > shutdownTimeout + 30, "time for the clients and then the final snapshot")
    }
}
