import CachedTestSupport
import Foundation
import Testing

/// ACL with a password set, and ACL LOG's record of failed authentications, whose ages and client lines the
/// differential corpus can compare only in shape. Each test runs against redis-server too.
@Suite("ACL on a live server")
struct AclLiveTests {
    static let kinds: [ServerProcess.Kind] = [.redis, .cached]

    /// The fields of each ACL LOG entry, by name.
    static func log(_ connection: HiredisConnection, _ arguments: String...) throws -> [[String: RedisReply]] {
        guard case .array(let entries) = try connection.command(["ACL", "LOG"] + arguments) else { return [] }
        return entries.map { entry in
            guard case .array(let items) = entry else { return [:] }
            var fields: [String: RedisReply] = [:]
            for i in stride(from: 0, to: items.count - 1, by: 2) { fields[items[i].text ?? "?"] = items[i + 1] }
            return fields
        }
    }

    @Test("with requirepass, ACL LIST and GETUSER show the password's SHA-256; failed AUTHs are logged", arguments: kinds)
    func passwordAndLog(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind, arguments: ["--requirepass", "secret"])
        defer { server.stop() }
        let admin = try server.connect()
        #expect(try admin.command("AUTH", "secret") == .status("OK"))
        // SHA-256("secret")
        let digest = "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b"
        #expect(try admin.command("ACL", "LIST") == .array([.bulk("user default on #\(digest) ~* &* +@all")]))
        guard case .array(let user) = try admin.command("ACL", "GETUSER", "default") else {
            Issue.record("ACL GETUSER default is not an array")
            return
        }
        #expect(user.count == 12)
        #expect(user.prefix(4) == [.bulk("flags"), .array([.bulk("on")]), .bulk("passwords"), .array([.bulk(digest)])])
        #expect(try admin.command("ACL", "WHOAMI") == .bulk("default"))

        // Three failures of the same kind make one entry; another user or another spelling of the command, others.
        let intruder = try server.connect()
        for password in ["a", "b", "c"] {
            #expect(try intruder.command("AUTH", password) == .error("WRONGPASS invalid username-password pair or user is disabled."))
        }
        #expect(try intruder.command("auth", "x") != .status("OK"))
        #expect(try intruder.command("AUTH", "mallory", "x") != .status("OK"))
        #expect(try intruder.command("HELLO", "3", "AUTH", "default", "nope") != .status("OK"))
        #expect(try intruder.command("AUTH", "secret") == .status("OK"))

        let entries = try Self.log(admin)
        #expect(entries.count == 4)
        let summary = entries.map { entry in
            [entry["count"], entry["reason"], entry["context"], entry["object"], entry["username"]].map { $0?.description ?? "-" }
        }
        #expect(
            summary == [
                [":1", "\"auth\"", "\"toplevel\"", "\"HELLO\"", "\"default\""],
                [":1", "\"auth\"", "\"toplevel\"", "\"AUTH\"", "\"mallory\""],
                [":1", "\"auth\"", "\"toplevel\"", "\"auth\"", "\"default\""],
                [":3", "\"auth\"", "\"toplevel\"", "\"AUTH\"", "\"default\""],
            ])
        let info = entries.first?["client-info"]?.text ?? ""
        #expect(info.hasPrefix("id=") && info.contains(" cmd=hello "), "\(info)")
        let age = Double(entries.last?["age-seconds"]?.text ?? "") ?? -1
        #expect(age >= 0 && age < 10, "age-seconds \(age)")

        #expect(try Self.log(admin, "2").count == 2)
        #expect(try admin.command("ACL", "LOG", "RESET") == .status("OK"))
        #expect(try Self.log(admin).isEmpty)
    }
}
