import CacheCore
import CacheServer
import RESP
import Testing

@Suite("Database commands")
struct DatabaseCommandTests {
    @Test("SELECT switches the client's database; keys are per database")
    func select() {
        let h = Harness()
        h.run("SET", "k", "zero")
        #expect(h.run("SELECT", "15") == .ok)
        #expect(h.run("GET", "k") == .nullBulkString)
        h.run("SET", "k", "fifteen")
        #expect(h.run("SELECT", "0") == .ok)
        #expect(h.run("GET", "k") == .bulk("zero"))
    }

    @Test("SELECT errors: out of range, not an integer, beyond 32 bits")
    func selectErrors() {
        let h = Harness()
        #expect(h.run("SELECT", "16") == .error("ERR DB index is out of range"))
        #expect(h.run("SELECT", "-1") == .error("ERR DB index is out of range"))
        #expect(h.run("SELECT", "abc") == .error("ERR value is not an integer or out of range"))
        #expect(h.run("SELECT", "99999999999")
            == .error("ERR value is out of range, value must between -2147483648 and 2147483647"))
        #expect(h.session.db == 0)
    }

    @Test("SWAPDB exchanges two databases for every client")
    func swapdb() {
        let h = Harness()
        let other = h.newSession()
        h.run("SET", "k", "zero", "EX", "100")
        h.run("SELECT", "1", as: other)
        h.run("SET", "j", "one", as: other)
        #expect(h.run("SWAPDB", "0", "1") == .ok)
        #expect(h.run("GET", "j") == .bulk("one"))
        #expect(h.run("GET", "k") == .nullBulkString)
        #expect(h.run("GET", "k", as: other) == .bulk("zero"))
        #expect(h.run("TTL", "k", as: other) == .integer(100))
        #expect(h.run("SWAPDB", "1", "1") == .ok)
    }

    @Test("SWAPDB errors name the bad index")
    func swapdbErrors() {
        let h = Harness()
        #expect(h.run("SWAPDB", "a", "1") == .error("ERR invalid first DB index"))
        #expect(h.run("SWAPDB", "0", "b") == .error("ERR invalid second DB index"))
        #expect(h.run("SWAPDB", "0", "99999999999") == .error("ERR invalid second DB index"))
        #expect(h.run("SWAPDB", "0", "16") == .error("ERR DB index is out of range"))
    }

    @Test("DBSIZE counts the selected database's keys")
    func dbsize() {
        let h = Harness()
        #expect(h.run("DBSIZE") == .integer(0))
        h.run("MSET", "a", "1", "b", "2")
        #expect(h.run("DBSIZE") == .integer(2))
        h.run("SELECT", "3")
        #expect(h.run("DBSIZE") == .integer(0))
    }

    @Test("FLUSHDB empties only the selected database; FLUSHALL empties all", arguments: [[], ["ASYNC"], ["sync"]])
    func flush(mode: [String]) {
        let h = Harness()
        h.run("SET", "a", "1")
        h.run("SELECT", "1")
        h.run("SET", "b", "1", "EX", "10")
        #expect(h.run((["FLUSHDB"] + mode).map { Array($0.utf8) }) == .ok)
        #expect(h.run("DBSIZE") == .integer(0))
        h.run("SELECT", "0")
        #expect(h.run("DBSIZE") == .integer(1))
        #expect(h.run((["FLUSHALL"] + mode).map { Array($0.utf8) }) == .ok)
        #expect(h.run("DBSIZE") == .integer(0))
    }

    @Test("FLUSHDB and FLUSHALL refuse other arguments")
    func flushErrors() {
        let h = Harness()
        h.run("SET", "a", "1")
        #expect(h.run("FLUSHDB", "foo") == .error("ERR syntax error"))
        #expect(h.run("FLUSHALL", "sync", "x") == .error("ERR syntax error"))
        #expect(h.run("DBSIZE") == .integer(1))
    }
}

@Suite("Connection commands")
struct ConnectionCommandTests {
    @Test("PING replies PONG, or its argument as a bulk string")
    func ping() {
        let h = Harness()
        #expect(h.run("PING") == .simple("PONG"))
        #expect(h.run("PING", "hi") == .bulk("hi"))
        #expect(h.run("PING", "a", "b") == .error("ERR wrong number of arguments for 'ping' command"))
    }

    @Test("ECHO returns its argument")
    func echo() {
        let h = Harness()
        #expect(h.run("ECHO", "hello world") == .bulk("hello world"))
        #expect(h.run("ECHO", "") == .bulk(""))
    }

    @Test("HELLO 2 replies a flat array, HELLO 3 a map and switches to RESP3")
    func helloVersions() {
        let h = Harness()
        let two = h.run("HELLO", "2")
        #expect(two.elements?.count == 14)
        #expect(two.elements?.prefix(6).map(\.text) == ["server", "redis", "version", "7.0.15", "proto", nil])
        #expect(two.elements?[5] == .integer(2))
        #expect(two.elements?[7] == .integer(h.session.id))
        let three = h.run("HELLO", "3")
        guard case .map(let pairs) = three else {
            Issue.record("HELLO 3 did not reply a map: \(three)")
            return
        }
        #expect(pairs.map { $0.key.text } == ["server", "version", "proto", "id", "mode", "role", "modules"])
        #expect(pairs[2].value == .integer(3))
        #expect(h.session.protocolVersion == .resp3)
        #expect(h.run("GET", "missing") == .null)
    }

    @Test("HELLO without a version keeps the protocol")
    func helloNoVersion() {
        let h = Harness()
        h.run("HELLO", "3")
        guard case .map = h.run("HELLO") else {
            Issue.record("HELLO did not keep RESP3")
            return
        }
        #expect(h.session.protocolVersion == .resp3)
    }

    @Test("HELLO errors: unsupported version, not a number, unknown or incomplete options")
    func helloErrors() {
        let h = Harness()
        #expect(h.run("HELLO", "4") == .error("NOPROTO unsupported protocol version"))
        #expect(h.run("HELLO", "1") == .error("NOPROTO unsupported protocol version"))
        #expect(h.run("HELLO", "abc") == .error("ERR Protocol version is not an integer or out of range"))
        #expect(h.run("HELLO", "3", "foo") == .error("ERR Syntax error in HELLO option 'foo'"))
        #expect(h.run("HELLO", "2", "SETNAME") == .error("ERR Syntax error in HELLO option 'SETNAME'"))
        #expect(h.run("HELLO", "3", "AUTH", "default") == .error("ERR Syntax error in HELLO option 'AUTH'"))
        #expect(h.session.protocolVersion == .resp2)
    }

    @Test("HELLO SETNAME names the client; an invalid name is refused")
    func helloSetname() {
        let h = Harness()
        #expect(h.run("HELLO", "2", "SETNAME", "worker").elements?.count == 14)
        #expect(h.run("CLIENT", "GETNAME") == .bulk("worker"))
        #expect(h.run("HELLO", "3", "SETNAME", "a b") == .error("ERR Client names cannot contain spaces, newlines or special characters."))
        #expect(h.session.protocolVersion == .resp2)
        #expect(h.run("CLIENT", "GETNAME") == .bulk("worker"))
    }

    @Test("Without requirepass, AUTH <password> is an error and AUTH default <anything> succeeds")
    func authWithoutPassword() {
        let h = Harness()
        #expect(h.run("AUTH", "x") == .error(
            "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"))
        #expect(h.run("AUTH", "default", "x") == .ok)
        #expect(h.run("AUTH", "a", "b", "c") == .error("ERR syntax error"))
        #expect(h.run("AUTH") == .error("ERR wrong number of arguments for 'auth' command"))
    }

    @Test("With requirepass, commands need AUTH first; unknown commands and bad arity are reported before")
    func authRequired() {
        let h = Harness(requirePass: "secret")
        #expect(h.run("GET", "k") == .error("NOAUTH Authentication required."))
        #expect(h.run("PING") == .error("NOAUTH Authentication required."))
        #expect(h.run("SHUTDOWN", "NOSAVE") == .error("NOAUTH Authentication required."), "only a client that knows the password stops the server")
        #expect(h.run("GET") == .error("ERR wrong number of arguments for 'get' command"))
        #expect(h.run("NOSUCH") == .error("ERR unknown command 'NOSUCH', with args beginning with: "))
        #expect(h.run("AUTH", "wrong") == .error("WRONGPASS invalid username-password pair or user is disabled."))
        #expect(h.run("AUTH", "someone", "secret") == .error("WRONGPASS invalid username-password pair or user is disabled."))
        #expect(h.run("AUTH", "secret") == .ok)
        #expect(h.run("GET", "k") == .nullBulkString)
        let other = h.newSession()
        #expect(h.run("AUTH", "default", "secret", as: other) == .ok)
        #expect(h.run("PING", as: other) == .simple("PONG"))
    }

    @Test("With requirepass, HELLO needs AUTH or its own AUTH option")
    func helloAuth() {
        let h = Harness(requirePass: "secret")
        #expect(h.run("HELLO", "3") == .error(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"))
        #expect(h.run("HELLO", "3", "AUTH", "default", "wrong") == .error("WRONGPASS invalid username-password pair or user is disabled."))
        #expect(h.session.protocolVersion == .resp2)
        guard case .map = h.run("HELLO", "3", "AUTH", "default", "secret") else {
            Issue.record("HELLO 3 AUTH did not reply a map")
            return
        }
        #expect(h.session.authenticated)
        #expect(h.run("DBSIZE") == .integer(0))
    }

    @Test("CLIENT ID is the session's id, distinct per client")
    func clientID() {
        let h = Harness()
        let other = h.newSession()
        #expect(h.run("CLIENT", "ID") == .integer(h.session.id))
        #expect(h.run("CLIENT", "ID", as: other) == .integer(other.id))
        #expect(h.session.id != other.id)
    }

    @Test("CLIENT SETNAME / GETNAME; an empty name clears it")
    func clientName() {
        let h = Harness()
        #expect(h.run("CLIENT", "GETNAME") == .nullBulkString)
        #expect(h.run("CLIENT", "SETNAME", "conn-1") == .ok)
        #expect(h.run("CLIENT", "GETNAME") == .bulk("conn-1"))
        #expect(h.run("CLIENT", "SETNAME", "") == .ok)
        #expect(h.run("CLIENT", "GETNAME") == .nullBulkString)
    }

    @Test("CLIENT SETNAME refuses spaces, newlines and special characters", arguments: ["a b", "a\nb", "é", "a\u{7F}"])
    func clientNameInvalid(name: String) {
        let h = Harness()
        h.run("CLIENT", "SETNAME", "keep")
        #expect(h.run("CLIENT", "SETNAME", name) == .error("ERR Client names cannot contain spaces, newlines or special characters."))
        #expect(h.run("CLIENT", "GETNAME") == .bulk("keep"))
    }

    @Test("CLIENT errors: unknown subcommand, wrong arity of a known one")
    func clientErrors() {
        let h = Harness()
        #expect(h.run("CLIENT", "foo") == .error("ERR unknown subcommand 'foo'. Try CLIENT HELP."))
        #expect(h.run("CLIENT", "GETNAME", "x") == .error("ERR wrong number of arguments for 'client|getname' command"))
        #expect(h.run("CLIENT", "SETNAME") == .error("ERR wrong number of arguments for 'client|setname' command"))
        #expect(h.run("CLIENT", "ID", "x") == .error("ERR wrong number of arguments for 'client|id' command"))
        #expect(h.run("CLIENT") == .error("ERR wrong number of arguments for 'client' command"))
    }
}

@Suite("Server commands and dispatch")
struct ServerCommandTests {
    @Test("TIME is the clock's seconds and microseconds")
    func time() {
        let h = Harness()
        h.clock.set(milliseconds: 1_700_000_000_123)
        #expect(h.run("TIME") == .bulks("1700000000", "123000"))
        h.advance(1_900)
        #expect(h.run("TIME") == .bulks("1700000002", "23000"))
    }

    @Test("COMMAND COUNT is the number of commands COMMAND lists")
    func commandCount() {
        let h = Harness()
        let count = h.run("COMMAND", "COUNT").int
        #expect(count != nil)
        #expect(h.run("COMMAND").elements?.count == count)
        // Redis 7.0's COMMAND LIST also names every subcommand, as `container|subcommand`.
        let list = h.run("COMMAND", "LIST").elements ?? []
        #expect(list.count > count ?? 0)
        #expect(list.contains(.bulk("client|list")))
        #expect(h.run("COMMAND", "COUNT", "x") == .error("ERR wrong number of arguments for 'command|count' command"))
    }

    @Test("COMMAND GETKEYSANDFLAGS knows the key flags of every command and subcommand with keys")
    func keyFlagsForEveryKeyedCommand() {
        for spec in CommandRegistry.all {
            let keyed = spec.firstKey > 0 ? [spec.name] : []
            let subcommands = spec.listedSubcommands.filter { $0.firstKey > 0 }.map { spec.name + "|" + $0.name }
            for name in keyed + subcommands {
                #expect(KeySpecFlags.table[name]?.isEmpty == false, "\(name) has no key flags")
            }
        }
        let h = Harness()
        #expect(h.run("COMMAND", "GETKEYSANDFLAGS", "rename", "a", "b") == .array([
            .array([.bulk("a"), .array([.simple("RW"), .simple("access"), .simple("delete")])]),
            .array([.bulk("b"), .array([.simple("OW"), .simple("update")])]),
        ]))
        #expect(h.run("COMMAND", "GETKEYSANDFLAGS", "set", "k", "get", "get") == .array([
            .array([.bulk("k"), .array([.simple("RW"), .simple("access"), .simple("update")])]),
        ]))
    }

    @Test("COMMAND INFO describes each named command, nil for unknown ones")
    func commandInfo() throws {
        let h = Harness()
        let reply = try #require(h.run("COMMAND", "INFO", "get", "nosuch", "MSET").elements)
        #expect(reply.count == 3)
        let get = try #require(reply[0].elements)
        #expect(get.count == 10)
        #expect(get[0] == .bulk("get"))
        #expect(get[1] == .integer(2))
        #expect(Set(get[2].elements?.compactMap(\.text) ?? []) == ["readonly", "fast"])
        #expect(Array(get[3...5]) == [.integer(1), .integer(1), .integer(1)])
        #expect(Set(get[6].elements?.compactMap(\.text) ?? []) == ["@read", "@string", "@fast"])
        #expect(reply[1] == .nullBulkString)  // Redis 7.0 answers an unknown name with $-1
        let mset = try #require(reply[2].elements)
        #expect(mset[0] == .bulk("mset"))
        #expect(mset[1] == .integer(-3))
        #expect(Array(mset[3...5]) == [.integer(1), .integer(-1), .integer(2)])
    }

    @Test("COMMAND with an unknown subcommand is an error")
    func commandUnknownSubcommand() {
        let h = Harness()
        #expect(h.run("COMMAND", "foo") == .error("ERR unknown subcommand 'foo'. Try COMMAND HELP."))
    }

    @Test("Unknown commands are reported with a preview of their arguments")
    func unknownCommand() {
        let h = Harness()
        #expect(h.run("NOSUCH", "a", "b") == .error("ERR unknown command 'NOSUCH', with args beginning with: 'a' 'b' "))
        #expect(h.run("nosuch") == .error("ERR unknown command 'nosuch', with args beginning with: "))
    }

    @Test("Command names are case-insensitive")
    func caseInsensitive() {
        let h = Harness()
        #expect(h.run("sEt", "k", "v") == .ok)
        #expect(h.run("get", "k") == .bulk("v"))
    }

    @Test("Wrong arity is reported with the command's lowercase name", arguments: [
        (["GET"], "get"), (["GET", "a", "b"], "get"), (["SET", "k"], "set"), (["ECHO"], "echo"), (["DBSIZE", "x"], "dbsize"),
        (["TIME", "x"], "time"), (["SELECT", "1", "2"], "select"), (["KEYS"], "keys"), (["RENAME", "a"], "rename"),
        (["EXPIRE", "k"], "expire"), (["GETRANGE", "k", "0"], "getrange"), (["INCRBY", "k"], "incrby"), (["DEL"], "del"),
        (["SCAN"], "scan"), (["MGET"], "mget"), (["SETEX", "k", "1"], "setex"), (["RANDOMKEY", "x"], "randomkey"),
    ])
    func wrongArity(command: [String], name: String) {
        let h = Harness()
        #expect(h.run(command.map { Array($0.utf8) }) == .error("ERR wrong number of arguments for '\(name)' command"))
    }
}
