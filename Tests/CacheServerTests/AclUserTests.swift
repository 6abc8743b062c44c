import CacheServer
import Foundation
import RESP
import Testing

/// ACL users without a network: what a user's description rebuilds, when commands are checked, and how
/// passwords, requirepass and protected configs meet. The live tests and the differential corpus compare the
/// replies with Redis.
@Suite("ACL users")
struct AclUserTests {
    /// Rule lists of the kinds operators write, and some they should not.
    static let ruleSets: [[String]] = [
        ["+@all"], ["-@all"], ["+@all", "-@dangerous"], ["-@all", "+@read", "-@keyspace"], ["+@all", "-@write", "+set"],
        ["-@all", "+client|id", "+config|get"], ["+@all", "-client", "+client|id"], ["-@all", "+get|x", "+select|0"],
        ["-@all", "+@string", "-@fast", "+@bitmap", "-bitop"], ["+@all", "-@slow", "+@admin", "-config|set"],
        ["-@all", "+@pubsub", "+@connection", "-client|kill", "+@transaction"], ["allcommands", "-@keyspace", "+del"],
        ["-@all", "+@read", "+@write", "-@string"], ["+@all", "-@read", "-@write", "+getrange"],
    ]

    @Test("the command rules ACL GETUSER describes rebuild the same permissions", arguments: ruleSets)
    func descriptionRebuilds(_ rules: [String]) throws {
        let h = Harness()
        #expect(h.run((["ACL", "SETUSER", "original"] + rules).map { Array($0.utf8) }) == .simple("OK"))
        let table = h.server.commands
        let original = try #require(h.server.users.user(named: "original")).rules
        let description = original.root.commandRules(table: table)
        #expect(h.run((["ACL", "SETUSER", "copy"] + description.split(separator: " ").map(String.init)).map { Array($0.utf8) }) == .simple("OK"))
        let copy = try #require(h.server.users.user(named: "copy")).rules
        #expect(copy.root.commands == original.root.commands, "\(rules) described as \(description)")
        #expect(copy.root.firstArguments == original.root.firstArguments)
        #expect(copy.root.commandRules(table: table) == description)
    }

    @Test("only users whose rules restrict them take the checked path")
    func restriction() throws {
        let h = Harness()
        let user = h.server.users.defaultUser
        #expect(!user.isRestricted)
        h.run("ACL", "SETUSER", "default", "-flushall")
        #expect(user.isRestricted)
        #expect(h.run("FLUSHALL") == .error("NOPERM this user has no permissions to run the 'flushall' command"))
        h.run("ACL", "SETUSER", "default", "+@all")
        #expect(!user.isRestricted)
        h.run("ACL", "SETUSER", "default", "resetkeys", "~a*")
        #expect(user.isRestricted)
        #expect(h.run("SET", "b", "1") == .error("NOPERM this user has no permissions to access one of the keys used as arguments"))
        #expect(h.run("SET", "a", "1") == .simple("OK"))
        h.run("ACL", "SETUSER", "default", "allkeys", "resetchannels")
        #expect(user.isRestricted)
        h.run("ACL", "SETUSER", "default", "allchannels")
        #expect(!user.isRestricted)
    }

    @Test("refusals are logged with their reason, object and context, and grouped like failed logins")
    func refusalsAreLogged() {
        let h = Harness()
        h.run("ACL", "SETUSER", "svc", "on", "nopass", "~svc:*", "&news", "-@all", "+get", "+publish", "+multi", "+exec")
        h.run("AUTH", "svc", "x")
        h.run("GET", "other")
        h.run("GET", "other")
        h.run("PUBLISH", "sports", "m")
        h.run("SET", "svc:1", "v")
        h.run("MULTI")
        h.run("GET", "other")
        h.run("DISCARD")
        let entries = h.server.aclLog.newest(10).map { "\($0.reason) \($0.context) \($0.object) \($0.username) \($0.count)" }
        #expect(
            entries == [
                "command multi discard svc 1", "key multi other svc 1", "command toplevel set svc 1",
                "channel toplevel sports svc 1", "key toplevel other svc 2",
            ])
    }

    @Test("requirepass is default's password: CONFIG SET replaces it, and new connections must log in")
    func requirePass() {
        let h = Harness()
        h.run("ACL", "SETUSER", "default", ">extra")
        #expect(h.run("CONFIG", "SET", "requirepass", "s3cret") == .simple("OK"))
        let rules = h.server.users.defaultUser.rules
        #expect(!rules.noPassword && rules.passwords.count == 1)
        let client = h.newSession()
        #expect(!client.authenticated)
        #expect(h.run("AUTH", "extra", as: client) == .error("WRONGPASS invalid username-password pair or user is disabled."))
        #expect(h.run("AUTH", "s3cret", as: client) == .simple("OK"))
        #expect(h.run("CONFIG", "SET", "requirepass", "") == .simple("OK"))
        #expect(h.newSession().authenticated)
    }

    @Test("DELUSER closes the user's connections and leaves the others")
    func deleteUserClosesConnections() {
        let h = Harness()
        h.run("ACL", "SETUSER", "svc", "on", "nopass", "+@all", "~*")
        let svc = h.newSession()
        let bystander = h.newSession()
        #expect(h.run("AUTH", "svc", "x", as: svc) == .simple("OK"))
        #expect(h.run("ACL", "DELUSER", "svc", "nosuch") == .integer(1))
        let remaining = Set(h.server.clients.all.map(\.id))
        #expect(!remaining.contains(svc.id))
        #expect(remaining.contains(bystander.id) && remaining.contains(h.session.id))
    }

    @Test("a connection still holding a deleted user may only authenticate again")
    func deletedUserIsRevoked() {
        let h = Harness()
        h.run("ACL", "SETUSER", "svc", "on", "nopass", "+@all", "~*")
        let svc = h.newSession()
        #expect(h.run("AUTH", "svc", "x", as: svc) == .simple("OK"))
        let held = svc.user
        #expect(h.run("ACL", "DELUSER", "svc") == .integer(1))
        // As if its pipelined commands were still running, or its AUTH raced the deletion.
        svc.user = held
        #expect(h.run("GET", "k", as: svc) == .error("NOPERM this user has no permissions to run the 'get' command"))
        #expect(h.run("AUTH", "svc", "x", as: svc) == .error("WRONGPASS invalid username-password pair or user is disabled."))
        #expect(h.run("AUTH", "default", "x", as: svc) == .simple("OK"))
        #expect(h.run("GET", "k", as: svc) == .nullBulkString)
    }

    @Test("subscribers to channels a rule change takes away are closed; the others stay")
    func revokedChannelsCloseSubscribers() {
        let h = Harness()
        h.run("ACL", "SETUSER", "bob", "on", "nopass", "+@all", "~*", "&*")
        let payroll = h.newSession()
        let public_ = h.newSession()
        let patterns = h.newSession()
        for session in [payroll, public_, patterns] { h.run("AUTH", "bob", "x", as: session) }
        h.run("SUBSCRIBE", "payroll", as: payroll)
        h.run("SUBSCRIBE", "public", as: public_)
        h.run("PSUBSCRIBE", "pub*", as: patterns)
        #expect(h.run("ACL", "SETUSER", "bob", "resetchannels", "&public", "&pub*") == .simple("OK"))
        var ids = Set(h.server.clients.all.map(\.id))
        #expect(!ids.contains(payroll.id) && ids.contains(public_.id) && ids.contains(patterns.id))
        // A pattern subscription needs the pattern itself, not a pattern that matches it.
        #expect(h.run("ACL", "SETUSER", "bob", "resetchannels", "&public", "&p*") == .simple("OK"))
        ids = Set(h.server.clients.all.map(\.id))
        #expect(ids.contains(public_.id) && !ids.contains(patterns.id))
    }

    @Test("enable-protected-configs: no refuses, yes allows, local allows loopback and Unix socket clients only")
    func protectedConfigs() {
        for (setting, local, allowed) in [("no", true, false), ("yes", false, true), ("local", true, true), ("local", false, false)] {
            let h = Harness { $0.enableProtectedConfigs = .init(rawValue: setting)! }
            let client = ClientSession(
                id: h.server.clients.makeID(), remoteAddress: local ? "127.0.0.1:5000" : "10.0.0.7:5000",
                localAddress: "10.0.0.1:6379", isLocal: local, now: 0, authenticated: true,
                user: h.server.users.defaultUser, channel: nil)
            let reply = h.run("CONFIG", "SET", "dbfilename", "other.rdb", as: client)
            if allowed {
                #expect(reply == .simple("OK"), "\(setting), local: \(local)")
            } else {
                #expect(
                    reply == .error("ERR CONFIG SET failed (possibly related to argument 'dbfilename') - can't set protected config"),
                    "\(setting), local: \(local)")
            }
        }
    }

    @Test("users from the configuration: default is reset first, a user named twice is refused")
    func configurationUsers() throws {
        let h = Harness {
            $0.users = [["default", "on", "nopass", "~*", "+@all", "-flushall"], ["svc", "on", ">pw", "~svc:*", "+get"]]
        }
        try h.server.loadUsers()
        #expect(h.server.users.all.map(\.name) == ["default", "svc"])
        #expect(h.server.users.defaultUser.rules.sanitizePayload == true)
        #expect(h.server.users.defaultUser.isRestricted)
        let twice = Harness { $0.users = [["svc", "on"], ["svc", "off"]] }
        #expect(throws: AclSetupError.self) { try twice.server.loadUsers() }
        let both = Harness {
            $0.users = [["svc", "on"]]
            $0.aclFile = "/nonexistent/users.acl"
        }
        #expect(throws: AclSetupError.self) { try both.server.loadUsers() }
    }

    @Test("ACL SAVE then ACL LOAD gives back the same users")
    func saveAndLoad() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("users-\(UUID().uuidString).acl")
        try Data("user default on nopass ~* &* +@all\n".utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let h = Harness { $0.aclFile = file.path }
        try h.server.loadUsers()
        h.run("ACL", "SETUSER", "svc", "on", ">pw", "%R~r:*", "~svc:*", "&ch", "-@all", "+@read", "-get", "(~x +set)")
        let before = h.run("ACL", "LIST")
        #expect(h.run("ACL", "SAVE") == .simple("OK"))
        h.run("ACL", "DELUSER", "svc")
        #expect(h.run("ACL", "LOAD") == .simple("OK"))
        #expect(h.run("ACL", "LIST") == before)
    }
}
