import CacheServer
import NIOCore
import RESP
import Testing

/// Runs `body` with `words` as a parsed command's arguments.
private func withArguments<T>(_ words: [String], _ body: (Arguments) -> T) -> T {
    var request = ByteBuffer()
    request.writeRESPCommand(arguments: words.map { Array($0.utf8) })
    return request.withUnsafeReadableBytes { raw in
        var parser = RESPRequestParser()
        _ = try? parser.parse(raw, limits: .init())
        return parser.arguments.withUnsafeBufferPointer { body(Arguments(base: raw.baseAddress!, spans: $0)) }
    }
}

@Suite("Subcommands as table entries")
struct SubcommandDispatchTests {
    /// Every container with its subcommands, as the table has them.
    static let containers = CommandRegistry.all.filter { !$0.subcommands.isEmpty }

    @Test("Each subcommand has its own dispatch entry: its arity, its flags and its handler")
    func everySubcommandHasItsEntry() {
        let table = CommandTable(CommandRegistry.all)
        #expect(Self.containers.count >= 10)
        for (index, container) in table.commands.enumerated() where !container.subcommands.isEmpty {
            #expect(table.dispatch[index].flags.contains(.container), "\(container.name)")
            for (sub, spec) in container.subcommands.enumerated() {
                let id = table.permissionId(index, sub: sub)
                let entry = table.dispatch[id]
                #expect(entry.arity == spec.arity, "\(container.name)|\(spec.name)")
                #expect(entry.flags == spec.flags, "\(container.name)|\(spec.name)")
                // A subcommand takes at least itself and its container.
                #expect(spec.arity >= 2 || spec.arity <= -2, "\(container.name)|\(spec.name) arity \(spec.arity)")
                #expect(table.fullName(id) == "\(container.name)|\(spec.name)")
                #expect(table.owner(of: id).command == index && table.owner(of: id).sub == sub)
            }
        }
    }

    @Test("Each subcommand runs its own handler, and the executor answers its arity in Redis's words")
    func everySubcommandRuns() {
        for container in Self.containers {
            for spec in container.subcommands {
                // A fresh server for each: subcommands change connections, users and settings.
                let h = Harness()
                let name = "\(container.name)|\(spec.name)"
                let fits = [container.name, spec.name] + Array(repeating: "x", count: abs(spec.arity) - 2)
                let reply = h.run(fits.map { Array($0.utf8) })
                // The container's own handler would answer with its arity error; none would say "unknown".
                if case .simpleError(let buffer) = reply {
                    let message = String(buffer: buffer)
                    #expect(!message.hasPrefix("ERR wrong number of arguments"), "\(name): \(message)")
                    #expect(!message.hasPrefix("ERR unknown subcommand '"), "\(name): \(message)")
                }
                let wrong = spec.arity > 0 ? fits + ["x"] : spec.arity < -2 ? Array(fits.dropLast()) : nil
                if let wrong {
                    #expect(
                        h.run(wrong.map { Array($0.utf8) })
                            == .error("ERR wrong number of arguments for '\(name)' command"), "\(name)")
                }
            }
            let h = Harness()
            #expect(
                h.run(container.name, "nosuch") == .error("ERR unknown subcommand 'nosuch'. Try \(container.name.uppercased()) HELP."))
        }
    }

    @Test("An unknown subcommand or a wrong arity is refused before anything runs: not counted, EXEC aborts")
    func refusedBeforeRunning() {
        let h = Harness()
        #expect(h.run("MULTI") == .ok)
        #expect(h.run("CLIENT", "nosuch") == .error("ERR unknown subcommand 'nosuch'. Try CLIENT HELP."))
        #expect(h.run("OBJECT", "ENCODING") == .error("ERR wrong number of arguments for 'object|encoding' command"))
        #expect(h.run("EXEC") == .error("EXECABORT Transaction discarded because of previous errors."))
        // A known subcommand refused counts as its rejected call; an unknown one as nothing but an error.
        let stats = h.infoFields("commandstats")
        #expect(stats["cmdstat_object|encoding"]?.contains("calls=0,") == true, "\(stats)")
        #expect(stats["cmdstat_object|encoding"]?.contains("rejected_calls=1,") == true, "\(stats)")
        #expect(stats["cmdstat_client"] == nil, "\(stats)")
        #expect(h.infoFields("errorstats")["errorstat_ERR"] == "count=2")
        // Unauthenticated: the subcommand's error comes first, as in Redis.
        let locked = Harness(requirePass: "pw")
        #expect(locked.run("CONFIG", "nosuch") == .error("ERR unknown subcommand 'nosuch'. Try CONFIG HELP."))
        #expect(locked.run("CONFIG", "GET") == .error("ERR wrong number of arguments for 'config|get' command"))
        #expect(locked.run("CONFIG", "GET", "x") == .error("NOAUTH Authentication required."))
    }

    @Test("A subcommand's own flags apply: a monitoring connection may not read keys with OBJECT or MEMORY USAGE")
    func subcommandFlags() {
        let h = Harness()
        #expect(h.run("SET", "k", "v") == .ok)
        #expect(h.run("MONITOR") == .ok)
        #expect(h.run("OBJECT", "ENCODING", "k") == .error("ERR Replica can't interact with the keyspace"))
        #expect(h.run("MEMORY", "USAGE", "k") == .error("ERR Replica can't interact with the keyspace"))
        #expect(h.run("OBJECT", "HELP", "x") == .error("ERR wrong number of arguments for 'object|help' command"))
    }

    @Test("Secret arguments are a property of the command's spec")
    func secrets() {
        let table = CommandTable(CommandRegistry.all)
        func secrets(_ words: String...) -> Set<Int> {
            let container = table.spec(named: words[0].lowercased())!
            let sub = words.count > 1 ? container.subcommands.firstIndex { $0.name == words[1].lowercased() } : nil
            let spec = sub.map { container.subcommands[$0] } ?? container
            return withArguments(words) { spec.secretPositions(in: $0) }
        }
        #expect(secrets("AUTH", "pw") == [1])
        #expect(secrets("AUTH", "user", "pw") == [1, 2])
        #expect(secrets("HELLO", "3", "AUTH", "user", "pw", "SETNAME", "n") == [3, 4])
        #expect(secrets("HELLO", "3", "SETNAME", "n", "AUTH", "user", "pw") == [5, 6])
        #expect(secrets("MIGRATE", "h", "1", "", "0", "5", "AUTH", "pw", "KEYS", "AUTH", "k") == [7])
        #expect(secrets("MIGRATE", "h", "1", "k", "0", "5", "COPY", "AUTH2", "u", "pw") == [8, 9])
        #expect(secrets("CONFIG", "SET", "maxmemory", "1", "requirepass", "pw") == [5])
        #expect(secrets("CONFIG", "GET", "requirepass").isEmpty)
        #expect(secrets("GET", "k").isEmpty)
    }
}
