import CachedTestSupport
import Foundation
import Synchronization
import Testing

/// MULTI/EXEC/WATCH with more than one client, and with time: what the differential corpus (one connection)
/// cannot show. Each test runs against redis-server too, which shows that it asks for Redis's behaviour.
/// Serialized: the isolation test loads both cores.
@Suite("transactions between clients", .serialized)
struct TransactionLiveTests {
    /// cached-server with four event loops, so that connections made one after the other are served by loops
    /// running at once (the default on two cores is one loop).
    static func start(_ kind: ServerProcess.Kind, _ arguments: [String] = []) throws -> ServerProcess {
        try ServerProcess.start(kind, arguments: (kind == .cached ? ["--io-threads", "4"] : []) + arguments)
    }

    @Test("another client's write to a watched key fails EXEC; writes elsewhere do not", arguments: [ServerProcess.Kind.redis, .cached])
    func otherClientsWrites(_ kind: ServerProcess.Kind) throws {
        let server = try Self.start(kind)
        defer { server.stop() }
        let a = try server.connect()
        let b = try server.connect()
        #expect(try a.command("SET", "balance", "100") == .status("OK"))

        // A write by B to the watched key, between WATCH and EXEC: nothing runs.
        #expect(try a.command("WATCH", "balance") == .status("OK"))
        #expect(try b.command("INCRBY", "balance", "5") == .integer(105))
        #expect(try a.command("MULTI") == .status("OK"))
        #expect(try a.command("DECRBY", "balance", "10") == .status("QUEUED"))
        #expect(try a.command("EXEC") == .null)
        #expect(try a.command("GET", "balance") == .bulk("105"))

        // Writes to other keys, or to the same name in another database, leave the transaction alone.
        #expect(try a.command("WATCH", "balance") == .status("OK"))
        #expect(try b.command("SET", "other", "1") == .status("OK"))
        #expect(try b.command("SELECT", "1") == .status("OK"))
        #expect(try b.command("SET", "balance", "1") == .status("OK"))
        #expect(try a.command("MULTI") == .status("OK"))
        #expect(try a.command("DECRBY", "balance", "10") == .status("QUEUED"))
        #expect(try a.command("EXEC") == .array([.integer(95)]))

        // A flush by B of A's database counts; EXEC forgot the keys, so a new WATCH is needed.
        #expect(try a.command("WATCH", "balance") == .status("OK"))
        #expect(try b.command("SELECT", "0") == .status("OK"))
        #expect(try b.command("FLUSHDB") == .status("OK"))
        #expect(try a.command("MULTI") == .status("OK"))
        #expect(try a.command("SET", "balance", "0") == .status("QUEUED"))
        #expect(try a.command("EXEC") == .null)
        #expect(try a.command("EXISTS", "balance") == .integer(0))
    }

    @Test("a watched key that expires before EXEC fails it; one already gone at WATCH does not", arguments: [ServerProcess.Kind.redis, .cached])
    func watchedKeyExpires(_ kind: ServerProcess.Kind) throws {
        let server = try Self.start(kind)
        defer { server.stop() }
        let c = try server.connect()
        #expect(try c.command("SET", "lease", "me", "PX", "100") == .status("OK"))
        #expect(try c.command("WATCH", "lease", "never") == .status("OK"))
        Thread.sleep(forTimeInterval: 0.3)
        #expect(try c.command("MULTI") == .status("OK"))
        #expect(try c.command("SET", "lease", "again") == .status("QUEUED"))
        #expect(try c.command("EXEC") == .null)

        #expect(try c.command("SET", "short", "x", "PX", "50") == .status("OK"))
        Thread.sleep(forTimeInterval: 0.2)
        #expect(try c.command("WATCH", "short") == .status("OK"))
        #expect(try c.command("MULTI") == .status("OK"))
        #expect(try c.command("SET", "short", "y") == .status("QUEUED"))
        #expect(try c.command("EXEC") == .array([.status("OK")]))
    }

    @Test("EXEC runs its commands with no other client's command in between", arguments: [ServerProcess.Kind.redis, .cached])
    func isolation(_ kind: ServerProcess.Kind) throws {
        let server = try Self.start(kind)
        defer { server.stop() }
        let transactions = try server.connect()
        // Other clients (on the other event loops) overwrite the key the transactions count with, as fast as
        // they can, for as long as the transactions run.
        let stop = Atomic<Bool>(false)
        let problems = ProblemLog()
        let finished = DispatchGroup()
        for _ in 0..<3 {
            finished.enter()
            let port = server.port
            Thread.detachNewThread {
                defer { finished.leave() }
                do {
                    let c = try HiredisConnection(port: port)
                    while !stop.load(ordering: .relaxed) {
                        for _ in 0..<50 { try c.append("SET", "tx:counter", "1000000") }
                        for _ in 0..<50 { _ = try c.reply() }
                    }
                } catch {
                    problems.add("writer: \(error)")
                }
            }
        }
        defer {
            stop.store(true, ordering: .relaxed)
            finished.wait()
        }

        let increments = 100
        let expected = RedisReply.array([.status("OK")] + (1...increments).map { .integer(Int64($0)) })
        var interleaved = 0
        for _ in 0..<100 {
            #expect(try transactions.command("MULTI") == .status("OK"))
            _ = try transactions.command("SET", "tx:counter", "0")
            for _ in 0..<increments { _ = try transactions.command("INCR", "tx:counter") }
            if try transactions.command("EXEC") != expected { interleaved += 1 }
        }
        #expect(interleaved == 0, "transactions with another client's write in between: \(interleaved) of 100")
        #expect(problems.all.isEmpty, "\(problems.all.prefix(3))")
    }

    @Test("CLIENT LIST shows a transaction (multi=, flag x) and a changed watched key (flag d)", arguments: [ServerProcess.Kind.redis, .cached])
    func clientList(_ kind: ServerProcess.Kind) throws {
        let server = try Self.start(kind)
        defer { server.stop() }
        let a = try server.connect()
        let b = try server.connect()
        #expect(try a.command("CLIENT", "SETNAME", "tx") == .status("OK"))

        func line() throws -> String {
            let list = try b.command("CLIENT", "LIST").text ?? ""
            return list.split(separator: "\n").first { $0.contains("name=tx ") }.map(String.init) ?? ""
        }
        func field(_ name: String) throws -> String? {
            try line().split(separator: " ").first { $0.hasPrefix(name + "=") }.map { String($0.dropFirst(name.count + 1)) }
        }
        #expect(try field("multi") == "-1")
        #expect(try field("flags") == "N")
        #expect(try a.command("MULTI") == .status("OK"))
        #expect(try a.command("GET", "k") == .status("QUEUED"))
        #expect(try a.command("GET", "k") == .status("QUEUED"))
        #expect(try field("multi") == "2")
        #expect(try field("flags") == "x")
        #expect(try a.command("EXEC") == .array([.null, .null]))
        #expect(try field("multi") == "-1")
        #expect(try field("flags") == "N")
        #expect(try field("cmd") == "exec")

        // A watched key changed: the transaction is bound to fail, and what is sent is no longer kept.
        #expect(try a.command("WATCH", "k") == .status("OK"))
        #expect(try b.command("SET", "k", "1") == .status("OK"))
        #expect(try field("flags") == "d")
        #expect(try a.command("MULTI") == .status("OK"))
        #expect(try a.command("GET", "k") == .status("QUEUED"))
        #expect(try field("multi") == "0")
        #expect(try field("flags") == "xd")
        #expect(try a.command("EXEC") == .null)
        #expect(try field("flags") == "N")
    }

    @Test("inside EXEC, the client is still in its transaction (CLIENT INFO); one that kills itself gets no more replies", arguments: [ServerProcess.Kind.redis, .cached])
    func insideExec(_ kind: ServerProcess.Kind) throws {
        let server = try Self.start(kind)
        defer { server.stop() }
        let a = try server.connect()
        #expect(try a.command("MULTI") == .status("OK"))
        #expect(try a.command("SET", "a", "1") == .status("QUEUED"))
        #expect(try a.command("CLIENT", "INFO") == .status("QUEUED"))
        guard case .array(let replies) = try a.command("EXEC"), replies.count == 2, let info = replies[1].text else {
            Issue.record("EXEC did not answer [OK, CLIENT INFO]")
            return
        }
        let fields = info.split(whereSeparator: { $0 == " " || $0 == "\n" })
        for field in ["flags=x", "multi=2", "cmd=exec"] {
            #expect(fields.contains(Substring(field)), "\(field) in \(info)")
        }

        // CLIENT KILL of itself: the kill's reply is the last one; the commands after it still run.
        let raw = try RawConnection(port: server.port)
        try raw.send(.respCommand(["CLIENT", "ID"]))
        guard case .integer(let id) = try raw.readReplies(1)[0] else {
            Issue.record("CLIENT ID did not answer an integer")
            return
        }
        for command in [["MULTI"], ["CLIENT", "KILL", "ID", String(id), "SKIPME", "no"], ["SET", "after-kill", "1"]] {
            try raw.send(.respCommand(command))
        }
        #expect(try raw.readReplies(3) == [.status("OK"), .status("QUEUED"), .status("QUEUED")])
        try raw.send(.respCommand(["EXEC"]))
        #expect(String(decoding: try raw.readUntilClosed(), as: UTF8.self) == "*2\r\n:1\r\n")
        #expect(try a.command("GET", "after-kill") == .bulk("1"))
    }

    @Test("over maxmemory with nothing to evict, queuing is refused and EXEC aborts", arguments: [ServerProcess.Kind.redis, .cached])
    func outOfMemory(_ kind: ServerProcess.Kind) throws {
        let server = try Self.start(kind)
        defer { server.stop() }
        let c = try server.connect()
        #expect(try c.command("MULTI") == .status("OK"))
        #expect(try c.command("SET", "before", "1") == .status("QUEUED"))
        // Lowered by another client while the transaction is open: EXEC of a write is refused.
        let admin = try server.connect()
        #expect(try admin.command("CONFIG", "SET", "maxmemory-policy", "noeviction") == .status("OK"))
        #expect(try admin.command("CONFIG", "SET", "maxmemory", "1") == .status("OK"))
        // cached-server counts the heap beyond its keys once the sweeper has measured it (within a cycle).
        Thread.sleep(forTimeInterval: 0.3)
        let oom = "OOM command not allowed when used memory > 'maxmemory'."
        #expect(try c.command("EXEC") == .error("EXECABORT Transaction discarded because of: " + oom))
        #expect(try c.command("MULTI") == .status("OK"))
        #expect(try c.command("GET", "before") == .error(oom))
        #expect(try c.command("EXEC") == .error("EXECABORT Transaction discarded because of previous errors."))
        // MULTI and WATCH sent inside a transaction are refused too, and make EXEC fail.
        for command in [["MULTI"], ["WATCH", "k"]] {
            #expect(try c.command("MULTI") == .status("OK"))
            #expect(try c.command(command) == .error(oom))
            #expect(try c.command("EXEC") == .error("EXECABORT Transaction discarded because of previous errors."))
        }
        #expect(try admin.command("CONFIG", "SET", "maxmemory", "0") == .status("OK"))
        #expect(try c.command("EXISTS", "before") == .integer(0))
    }

    @Test("MIGRATE and CLIENT PAUSE inside EXEC, which needs the server to itself already, run", arguments: [ServerProcess.Kind.redis, .cached])
    func serverWideCommandsInExec(_ kind: ServerProcess.Kind) throws {
        let server = try Self.start(kind)
        defer { server.stop() }
        let c = try server.connect()
        let other = try server.connect()
        #expect(try c.command("MULTI") == .status("OK"))
        #expect(try c.command("MIGRATE", "127.0.0.1", "1", "missing", "0", "100") == .status("QUEUED"))
        #expect(try c.command("CLIENT", "PAUSE", "50", "WRITE") == .status("QUEUED"))
        #expect(try c.command("SET", "k", "v") == .status("QUEUED"))
        #expect(try c.command("EXEC") == .array([.status("NOKEY"), .status("OK"), .status("OK")]))
        #expect(try other.command("GET", "k") == .bulk("v"))
        #expect(try other.command("SET", "k", "w") == .status("OK"))
    }
}
