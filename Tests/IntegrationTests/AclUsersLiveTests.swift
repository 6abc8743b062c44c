import CachedTestSupport
import Foundation
import Testing

/// ACL users on live servers, each test against redis-server too: a service confined to its key prefix, rule
/// changes and deletions reaching connected clients, users from the configuration and from an ACL file, and
/// protected configs. The differential corpus (acl-users.corpus) compares the rule language reply by reply.
@Suite("ACL users on a live server")
struct AclUsersLiveTests {
    static let kinds: [ServerProcess.Kind] = [.redis, .cached]

    /// The user docs/operations.md gives each service of the SDK (`svc-a` here): its own keys, the invalidation
    /// channel of the near cache, and the commands the SDK sends.
    static func serviceRules(_ name: String, password: String) -> [String] {
        ["on", ">\(password)", "~\(name):*", "resetchannels", "&__redis__:invalidate", "-@all", "+get", "+set", "+del",
         "+mget", "+pttl", "+incr", "+ping", "+subscribe", "+client|id", "+client|tracking"]
    }

    static let operationsDocument = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("docs/operations.md")

    @Test("docs/operations.md gives each service the user these tests check")
    func documentedRules() throws {
        let text = try String(contentsOf: Self.operationsDocument, encoding: .utf8)
        let line = "ACL SETUSER svc-a " + Self.serviceRules("svc-a", password: "<password>").joined(separator: " ")
        #expect(text.contains(line), "docs/operations.md should show: \(line)")
    }

    @Test("a service's user reads and writes its own keys only, and cannot flush or look around", arguments: kinds)
    func confinedService(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let admin = try server.connect()
        #expect(try admin.command(["ACL", "SETUSER", "svc-a"] + Self.serviceRules("svc-a", password: "a-secret")) == .ok)
        #expect(try admin.command(["ACL", "SETUSER", "svc-b"] + Self.serviceRules("svc-b", password: "b-secret")) == .ok)
        #expect(try admin.command("SET", "svc-b:token", "b's data") == .ok)

        let a = try server.connect()
        #expect(try a.command("AUTH", "svc-a", "wrong") == .error("WRONGPASS invalid username-password pair or user is disabled."))
        #expect(try a.command("AUTH", "svc-a", "a-secret") == .ok)
        #expect(try a.command("ACL", "WHOAMI") == .error("NOPERM this user has no permissions to run the 'acl|whoami' command"))
        #expect(try a.command("SET", "svc-a:page", "v", "PX", "60000") == .ok)
        #expect(try a.command("GET", "svc-a:page") == .bulk("v"))
        #expect(try a.command("INCR", "svc-a:generation") == .integer(1))
        let keyRefused = RedisReply.error("NOPERM this user has no permissions to access one of the keys used as arguments")
        #expect(try a.command("GET", "svc-b:token") == keyRefused)
        #expect(try a.command("SET", "svc-b:token", "overwritten") == keyRefused)
        #expect(try a.command("DEL", "svc-b:token") == keyRefused)
        #expect(try a.command("MGET", "svc-a:page", "svc-b:token") == keyRefused)
        #expect(try a.command("FLUSHALL") == .error("NOPERM this user has no permissions to run the 'flushall' command"))
        #expect(try a.command("KEYS", "*") == .error("NOPERM this user has no permissions to run the 'keys' command"))
        #expect(try a.command("CONFIG", "GET", "requirepass") == .error("NOPERM this user has no permissions to run the 'config|get' command"))
        #expect(try a.command("PUBLISH", "__redis__:invalidate", "x") == .error("NOPERM this user has no permissions to run the 'publish' command"))
        #expect(try a.command("SUBSCRIBE", "other") == .error("NOPERM this user has no permissions to access one of the channels used as arguments"))
        #expect(try admin.command("GET", "svc-b:token") == .bulk("b's data"))

        // redis-cli with --user, as an operator would check.
        let cli = try server.redisCli("--user", "svc-a", "--pass", "a-secret", "--no-auth-warning", "GET", "svc-b:token")
        #expect(cli.standardOutput.contains("NOPERM this user has no permissions to access one of the keys"), "\(cli.standardOutput)")
        // redis-py with username and password.
        let py = try ExternalProgram.python3.run([
            "-c",
            """
            import redis
            r = redis.Redis(port=\(server.port), username="svc-a", password="a-secret")
            assert r.get("svc-a:page") == b"v"
            try:
                r.get("svc-b:token")
            except redis.exceptions.NoPermissionError as e:
                print("refused:", e)
            """,
        ])
        #expect(py.standardOutput.hasPrefix("refused: this user has no permissions to access one of the keys"), "\(py.summary)")

        // Every refusal is in ACL LOG, with its reason and object.
        let entries = try AclLiveTests.log(admin, "20")
        let seen = Set(entries.map { "\($0["reason"]?.text ?? "?") \($0["object"]?.text ?? "?")" })
        for expected in ["key svc-b:token", "command flushall", "command keys", "command config|get", "channel other", "auth AUTH"] {
            #expect(seen.contains(expected), "ACL LOG lacks \(expected): \(seen)")
        }
    }

    @Test("rule changes reach connected clients at once; DELUSER closes the user's connections", arguments: kinds)
    func changesReachConnections(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let admin = try server.connect()
        #expect(try admin.command(["ACL", "SETUSER", "svc-a"] + Self.serviceRules("svc-a", password: "pw")) == .ok)
        let a = try server.connect()
        #expect(try a.command("AUTH", "svc-a", "pw") == .ok)
        #expect(try a.command("GET", "svc-a:k") == .null)
        #expect(try admin.command("ACL", "SETUSER", "svc-a", "-get") == .ok)
        #expect(try a.command("GET", "svc-a:k") == .error("NOPERM this user has no permissions to run the 'get' command"))
        // A transaction queued before a change runs under the rules of EXEC's time.
        #expect(try a.command("MULTI") == .error("NOPERM this user has no permissions to run the 'multi' command"))
        #expect(try admin.command("ACL", "SETUSER", "svc-a", "+multi", "+exec", "+get") == .ok)
        #expect(try a.command("MULTI") == .ok)
        #expect(try a.command("GET", "svc-a:k") == .status("QUEUED"))
        #expect(try admin.command("ACL", "SETUSER", "svc-a", "resetkeys", "~other:*") == .ok)
        #expect(
            try a.command("EXEC")
                == .array([.error(
                    "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: no permission to touch the specified keys"
                )]))
        // A subscriber whose channel is taken away is closed, as Redis does.
        let subscriber = try server.connect()
        #expect(try subscriber.command("AUTH", "svc-a", "pw") == .ok)
        guard case .array = try subscriber.command("SUBSCRIBE", "__redis__:invalidate") else {
            Issue.record("SUBSCRIBE did not answer with a confirmation")
            return
        }
        #expect(try admin.command("ACL", "SETUSER", "svc-a", "resetchannels") == .ok)
        #expect(throws: (any Error).self) { try subscriber.reply() }
        let other = try server.connect()
        #expect(try other.command("AUTH", "svc-a", "pw") == .ok)
        #expect(try admin.command("ACL", "DELUSER", "svc-a") == .integer(1))
        for connection in [a, other] {
            #expect(throws: (any Error).self) { try connection.command("PING") }
        }
        #expect(try admin.command("PING") == .status("PONG"))
        #expect(try admin.command("CLIENT", "KILL", "USER", "svc-a") == .error("ERR No such user 'svc-a'"))
    }

    @Test("a restricted default user: new connections run as it, AUTH switches users, RESET goes back", arguments: kinds)
    func restrictedDefault(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let admin = try server.connect()
        #expect(try admin.command("ACL", "SETUSER", "admin", "on", ">root-pw", "~*", "&*", "+@all") == .ok)
        #expect(try admin.command("ACL", "SETUSER", "default", "-@dangerous", "-@admin") == .ok)
        let client = try server.connect()
        #expect(try client.command("FLUSHALL") == .error("NOPERM this user has no permissions to run the 'flushall' command"))
        #expect(try client.command("SET", "k", "v") == .ok)
        #expect(try client.command("AUTH", "admin", "root-pw") == .ok)
        #expect(try client.command("ACL", "WHOAMI") == .bulk("admin"))
        guard case .status = try client.command("RESET") else {
            Issue.record("RESET did not answer with a status")
            return
        }
        #expect(try client.command("ACL", "WHOAMI") == .bulk("default"))
        // Without nopass, new connections must authenticate; protected mode has nothing to say then.
        #expect(try admin.command("AUTH", "admin", "root-pw") == .ok)
        #expect(try admin.command("ACL", "SETUSER", "default", "resetpass", ">new-default-pw") == .ok)
        let fresh = try server.connect()
        #expect(try fresh.command("GET", "k") == .error("NOAUTH Authentication required."))
        #expect(try fresh.command("AUTH", "new-default-pw") == .ok)
        #expect(try fresh.command("GET", "k") == .bulk("v"))
    }

    @Test("users from `user` lines in the configuration file", arguments: kinds)
    func configurationUsers(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(
            kind,
            config: .file(
                contents: """
                    user svc-a on >pw ~svc-a:* -@all +get
                    user default on nopass ~* &* +@all -flushall
                    user svc-b off

                    """))
        defer { server.stop() }
        let admin = try server.connect()
        #expect(
            try admin.command("ACL", "LIST")
                == .array([
                    .bulk("user default on nopass sanitize-payload ~* &* +@all -flushall"),
                    .bulk("user svc-a on #30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4 ~svc-a:* resetchannels -@all +get"),
                    .bulk("user svc-b off resetchannels -@all"),
                ]))
        #expect(try admin.command("ACL", "USERS") == .array([.bulk("default"), .bulk("svc-a"), .bulk("svc-b")]))
        #expect(try admin.command("FLUSHALL") == .error("NOPERM this user has no permissions to run the 'flushall' command"))
        #expect(try admin.command("AUTH", "svc-a", "pw") == .ok)
        #expect(try admin.command("GET", "svc-a:x") == .null)
    }

    @Test("ACL SAVE writes the ACL file, ACL LOAD reads it back or refuses it whole", arguments: kinds)
    func aclFile(_ kind: ServerProcess.Kind) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("acl-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("users.acl")
        try Data("user svc-a on >pw ~svc-a:* +get\n\nuser default on nopass ~* &* +@all\n".utf8).write(to: file)
        let server = try ServerProcess.start(kind, arguments: ["--aclfile", file.path])
        defer { server.stop() }
        let admin = try server.connect()
        #expect(try admin.command("ACL", "USERS") == .array([.bulk("default"), .bulk("svc-a")]))
        #expect(try admin.command("ACL", "SETUSER", "svc-b", "on", "nopass", "+ping") == .ok)
        #expect(try admin.command("ACL", "SAVE") == .ok)
        guard case .array(let listed) = try admin.command("ACL", "LIST") else {
            Issue.record("ACL LIST is not an array")
            return
        }
        let saved = try String(contentsOf: file, encoding: .utf8)
        #expect(saved == listed.compactMap(\.text).map { $0 + "\n" }.joined())

        let svcB = try server.connect()
        #expect(try svcB.command("AUTH", "svc-b", "x") == .ok)
        // A file with errors changes nothing, and every error is told.
        try Data("user svc-a on +nosuch\nfoo\nuser svc-a off\n".utf8).write(to: file)
        let refused = try admin.command("ACL", "LOAD")
        #expect(
            refused
                == .error(
                    "ERR \(file.path):1: Error in applying operation '+nosuch': Unknown command or category name in ACL. \(file.path):2 should start with user keyword followed by the username. WARNING: Duplicate user 'svc-a' found on line 3. WARNING: ACL errors detected, no change to the previously active ACL rules was performed"
                ))
        #expect(try admin.command("ACL", "USERS") == .array([.bulk("default"), .bulk("svc-a"), .bulk("svc-b")]))
        // A good file replaces every user; the connections of users that are gone are closed.
        try Data("user svc-c on nopass +@all ~*\n".utf8).write(to: file)
        #expect(try admin.command("ACL", "LOAD") == .ok)
        #expect(try admin.command("ACL", "USERS") == .array([.bulk("default"), .bulk("svc-c")]))
        #expect(try admin.command("ACL", "GETUSER", "default").description.contains("+@all"))
        #expect(throws: (any Error).self) { try svcB.command("PING") }
        #expect(try admin.command("PING") == .status("PONG"))
    }

    @Test("a server refuses to start on ACL errors, as Redis does", arguments: kinds)
    func refusedStarts(_ kind: ServerProcess.Kind) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("acl-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("users.acl")
        try Data("user svc-a on +nosuch\n".utf8).write(to: file)
        let cases: [([String], String)] = [
            (["--aclfile", file.path],
             "Aborting Redis startup because of ACL errors: \(file.path):1: Error in applying operation '+nosuch': Unknown command or category name in ACL."),
            (["--aclfile", file.path, "--user", "x", "on"],
             "Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid."),
            (["--user", "x", "on", "+nosuch"], "Error loading ACL rule '+nosuch' for the user named 'x': Unknown command or category name in ACL"),
        ]
        for (arguments, message) in cases {
            let port = try freeLoopbackPort()
            let server = try ServerProcess.launch(kind, arguments: ["--port", String(port), "--bind", "127.0.0.1"] + arguments, port: port)
            defer { server.stop() }
            #expect(server.waitForExit(timeout: 10) == 1, "\(arguments)")
            #expect(server.standardError().contains(message), "\(arguments): \(server.standardError())")
        }
    }

    @Test("enable-protected-configs decides whether CONFIG SET may change dir", arguments: kinds)
    func protectedConfigs(_ kind: ServerProcess.Kind) throws {
        for (setting, allowed) in [("no", false), ("yes", true), ("local", true)] {
            let server = try ServerProcess.start(kind, arguments: ["--enable-protected-configs", setting])
            defer { server.stop() }
            let admin = try server.connect()
            #expect(try admin.command("CONFIG", "GET", "enable-protected-configs") == .array([.bulk("enable-protected-configs"), .bulk(setting)]))
            let reply = try admin.command("CONFIG", "SET", "dir", server.directory.path)
            if allowed {
                #expect(reply == .ok, "\(setting)")
            } else {
                #expect(reply == .error("ERR CONFIG SET failed (possibly related to argument 'dir') - can't set protected config"))
            }
            #expect(
                try admin.command("CONFIG", "SET", "enable-protected-configs", "yes")
                    == .error("ERR CONFIG SET failed (possibly related to argument 'enable-protected-configs') - can't set immutable config"))
        }
    }
}
