import CachedTestSupport
import Foundation
import Testing

/// redis-benchmark, as users run it to size a server: it must finish with no error and report throughput.
@Suite("redis-benchmark", .serialized)
struct RedisBenchmarkTests {
    @Test("redis-benchmark -t set,get,incr,mset -P 16 -n 100000 -q completes with no errors", arguments: [ServerProcess.Kind.redis, .cached])
    func pipelinedBenchmark(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }

        let run = try server.redisBenchmark(["-t", "set,get,incr,mset", "-P", "16", "-n", "100000", "-q"], timeout: 60)
        #expect(run.status == 0, "\(run.summary)")
        #expect(run.benchmarkErrors.isEmpty, "\(run.benchmarkErrors.prefix(3))")
        let rps = BenchmarkReport(run).requestsPerSecond
        for test in ["SET", "GET", "INCR", "MSET (10 keys)"] {
            #expect((rps[test] ?? 0) > 0, "no throughput line for \(test): \(run.summary)")
        }

        let client = try server.connect()
        #expect(try client.command("GET", "counter:__rand_int__") == .bulk("100000"), "every pipelined INCR applied once")
        #expect(try client.command("STRLEN", "key:__rand_int__") == .integer(3), "SET and MSET wrote the default 3-byte value")
    }

    @Test("redis-benchmark reads the server's CONFIG (save, appendonly) without a warning", arguments: [ServerProcess.Kind.redis, .cached])
    func benchmarkReadsConfig(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }

        // Before benchmarking, redis-benchmark sends CONFIG GET save and CONFIG GET appendonly on a connection
        // of its own; a reply that is not an array makes it print this warning (and carry on).
        let run = try server.redisBenchmark(["-t", "ping", "-n", "1000", "-q"])
        #expect(run.status == 0, "\(run.summary)")
        #expect(!run.standardError.contains("Could not fetch server CONFIG"), "\(run.summary)")
    }
}
