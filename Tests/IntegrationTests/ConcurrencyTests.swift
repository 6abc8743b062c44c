import CachedTestSupport
import Foundation
import Testing

/// Many clients at once: every command is applied exactly once and each client sees its own replies in order.
/// Serialized: the load generators would otherwise compete for the same cores.
@Suite("many clients at once", .serialized)
struct ConcurrencyTests {
    /// A server of `kind`; cached-server with four event loops, so that the clients' connections are spread over
    /// loops running at once whatever the machine's default (one loop on two cores).
    static func start(_ kind: ServerProcess.Kind) throws -> ServerProcess {
        try ServerProcess.start(kind, arguments: kind == .cached ? ["--io-threads", "4"] : [])
    }

    @Test("50 clients × 4,000 INCR on one key end at exactly 200,000", arguments: [ServerProcess.Kind.redis, .cached])
    func contendedCounter(_ kind: ServerProcess.Kind) throws {
        let server = try Self.start(kind)
        defer { server.stop() }

        // Without -r every client increments the literal key `counter:__rand_int__`.
        let run = try server.redisBenchmark(["-c", "50", "-n", "200000", "-t", "incr", "-q"], timeout: 120)
        #expect(run.status == 0, "\(run.summary)")
        #expect(run.benchmarkErrors.isEmpty, "\(run.benchmarkErrors.prefix(3))")

        #expect(try server.connect().command("GET", "counter:__rand_int__") == .bulk("200000"))
    }

    @Test("50 clients INCR random keys of 1,000: the counters sum to exactly the requests made", arguments: [ServerProcess.Kind.redis, .cached])
    func spreadCounters(_ kind: ServerProcess.Kind) throws {
        let server = try Self.start(kind)
        defer { server.stop() }

        // With -r 1000, `__rand_int__` becomes a 12-digit number below 1000: counter:000000000042.
        let run = try server.redisBenchmark(["-c", "50", "-n", "200000", "-r", "1000", "-t", "incr", "-q"], timeout: 60)
        #expect(run.status == 0, "\(run.summary)")
        #expect(run.benchmarkErrors.isEmpty, "\(run.benchmarkErrors.prefix(3))")

        let client = try server.connect()
        let names = (0..<1_000).map { "counter:" + String(repeating: "0", count: 12 - String($0).count) + String($0) }
        guard case .array(let values) = try client.command(["MGET"] + names) else {
            Issue.record("MGET did not answer an array")
            return
        }
        let counts = values.compactMap { $0.text.flatMap(Int.init) }
        #expect(counts.reduce(0, +) == 200_000)
        #expect(try client.command("DBSIZE") == .integer(Int64(counts.count)), "no other key was created")
    }

    @Test("8 hiredis clients on their own threads: own keys exact, one shared counter exact", arguments: [ServerProcess.Kind.redis, .cached])
    func threadsOnOwnKeys(_ kind: ServerProcess.Kind) throws {
        let server = try Self.start(kind)
        defer { server.stop() }
        let threads = 8, rounds = 2_000, keysPerThread = 20

        let problems = ProblemLog()
        let finished = DispatchGroup()
        for t in 0..<threads {
            finished.enter()
            Thread.detachNewThread {
                defer { finished.leave() }
                do {
                    let client = try HiredisConnection(port: server.port)
                    var totals = [Int64](repeating: 0, count: keysPerThread)
                    // Pipelined in batches of 100 rounds: INCRBY on this thread's key, INCR on the shared one.
                    for batch in stride(from: 0, to: rounds, by: 100) {
                        for i in batch..<batch + 100 {
                            try client.append("INCRBY", "t\(t):k\(i % keysPerThread)", String(i + 1))
                            try client.append("INCR", "shared")
                        }
                        for i in batch..<batch + 100 {
                            totals[i % keysPerThread] += Int64(i + 1)
                            let own = try client.reply()
                            if own != .integer(totals[i % keysPerThread]) {
                                problems.add("thread \(t) round \(i): INCRBY answered \(own), expected \(totals[i % keysPerThread])")
                            }
                            if case .integer = try client.reply() {} else { problems.add("thread \(t): INCR shared did not answer an integer") }
                        }
                    }
                } catch {
                    problems.add("thread \(t): \(error)")
                }
            }
        }
        #expect(finished.wait(timeout: .now() + 60) == .success, "the client threads did not finish within 60 s")
        #expect(problems.all.isEmpty, "\(problems.all.prefix(5))")

        let client = try server.connect()
        #expect(try client.command("GET", "shared") == .bulk(String(threads * rounds)))
        for t in 0..<threads {
            for k in 0..<keysPerThread {
                let expected = stride(from: k, to: rounds, by: keysPerThread).reduce(0) { $0 + $1 + 1 }
                #expect(try client.command("GET", "t\(t):k\(k)") == .bulk(String(expected)))
            }
        }
    }
}
