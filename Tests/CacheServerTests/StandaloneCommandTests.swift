import CacheServer
import RESP
import Testing

/// What the corpus cannot ask the reference Redis without making it a replica: REPLICAOF of a real address.
@Suite("replication commands on a standalone server")
struct StandaloneCommandTests {
    @Test("REPLICAOF host port is refused and changes nothing; NO ONE is OK; ROLE stays master")
    func replicaOfIsRefused() {
        let h = Harness()
        #expect(h.run("SET", "k", "v") == .ok)
        for command in ["REPLICAOF", "SLAVEOF"] {
            #expect(
                h.run(command, "127.0.0.1", "6380")
                    == .error("ERR REPLICAOF is not supported: this server does not replicate (REPLICAOF NO ONE is accepted)"))
            #expect(h.run(command, "no", "one") == .ok)
        }
        #expect(h.run("ROLE") == .array([.bulk("master"), .integer(0), .array([])]))
        #expect(h.run("GET", "k") == .bulk("v"))
        #expect(h.run("SET", "k", "w") == .ok)
    }
}
