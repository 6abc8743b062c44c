import CachedTestSupport
import Foundation
import Synchronization
import HTTPTypes
import NIOCore
import Testing

@testable import CachedNetworking
@testable import CachedNetworkingRedis

/// How the cluster store places keys and reads the cluster's answers, without a cluster: key slots (CRC16 and
/// hash tags, with the Redis Cluster specification's vectors), `MOVED`/`ASK` and transient errors, `CLUSTER SLOTS`
/// replies, `redis+cluster://` URLs, and the SDK's key layout keeping an entry's keys in one slot.
@Suite("Redis Cluster routing")
struct ClusterRoutingTests {
    // MARK: slots

    @Test("CRC16/XMODEM of \"123456789\" is 0x31C3")
    func crc16CheckValue() {
        #expect(ClusterSlots.crc16(Array("123456789".utf8)) == 0x31C3)
        #expect(ClusterSlots.crc16([UInt8]()) == 0)
    }

    @Test("slots of known keys")
    func knownSlots() {
        #expect(ClusterSlots.slot(of: "foo") == 12182)
        #expect(ClusterSlots.slot(of: "bar") == 5061)
        #expect(ClusterSlots.slot(of: "") == 0)
        #expect(ClusterSlots.slot(of: "123456789") == 0x31C3 & 16383)
    }

    @Test("keys with the same hash tag share a slot")
    func hashTagsShareASlot() {
        let following = ClusterSlots.slot(of: "{user1000}.following")
        #expect(following == ClusterSlots.slot(of: "{user1000}.followers"))
        #expect(following == ClusterSlots.slot(of: "user1000"))
        #expect(ClusterSlots.slot(of: "a{user1000}b{other}") == following)
    }

    @Test("only the first non-empty {…} is a hash tag")
    func hashTagEdgeCases() {
        // An empty first tag: the whole key is hashed.
        #expect(ClusterSlots.slot(of: "foo{}{bar}") == Int(ClusterSlots.crc16(Array("foo{}{bar}".utf8)) & 16383))
        // The tag ends at the first } after the first {.
        #expect(ClusterSlots.slot(of: "foo{{bar}}zap") == Int(ClusterSlots.crc16(Array("{bar".utf8)) & 16383))
        #expect(ClusterSlots.slot(of: "foo{bar}{zap}") == ClusterSlots.slot(of: "bar"))
        // No closing brace: the whole key.
        #expect(ClusterSlots.slot(of: "foo{bar") == Int(ClusterSlots.crc16(Array("foo{bar".utf8)) & 16383))
        #expect(String(decoding: ClusterSlots.hashedPart(of: Array("x{é}y".utf8)), as: UTF8.self) == "é")
    }

    @Test("keys are grouped by slot in the order of their first key")
    func groupingBySlot() {
        let keys = ["{a}1", "{b}1", "{a}2", "{c}1", "{b}2", "{a}1"]
        let groups = RESPClusterStore.groupedBySlot(keys)
        #expect(groups.map(\.positions) == [[0, 2, 5], [1, 4], [3]])
        #expect(groups.map(\.slot) == ["a", "b", "c"].map { ClusterSlots.slot(of: $0) })
        #expect(RESPClusterStore.groupedBySlot([]).isEmpty)
    }

    // MARK: redirections

    @Test("MOVED and ASK are parsed; other errors are not redirections")
    func redirections() {
        let moved = ClusterRedirection(errorText: "MOVED 3999 127.0.0.1:6381")
        #expect(moved?.kind == .moved)
        #expect(moved?.slot == 3999)
        #expect(moved?.node == RESPClusterStore.Node(host: "127.0.0.1", port: 6381))

        let ask = ClusterRedirection(errorText: "ASK 12182 cache-2.internal:7000")
        #expect(ask?.kind == .ask)
        #expect(ask?.slot == 12182)
        #expect(ask?.node == RESPClusterStore.Node(host: "cache-2.internal", port: 7000))

        #expect(ClusterRedirection(errorText: "MOVED 1 [::1]:7001")?.node == RESPClusterStore.Node(host: "::1", port: 7001))
        #expect(ClusterRedirection(errorText: "MOVED 1 ::1:7001")?.node == RESPClusterStore.Node(host: "::1", port: 7001))

        // An unknown endpoint (empty host) means the node that answered.
        let unknownHost = ClusterRedirection(errorText: "MOVED 5 :7002")
        #expect(unknownHost?.node.host == "")
        #expect(unknownHost?.target(answeredBy: .init(host: "10.1.2.3", port: 7000)) == .init(host: "10.1.2.3", port: 7002))
        #expect(moved?.target(answeredBy: .init(host: "10.1.2.3", port: 7000)) == .init(host: "127.0.0.1", port: 6381))
        // "?" (a node set to announce host names that has none) is read as CLUSTER SLOTS's is: the node that answered.
        #expect(ClusterRedirection(errorText: "ASK 5 ?:7003")?.target(answeredBy: .init(host: "10.1.2.3", port: 7000))
            == .init(host: "10.1.2.3", port: 7003))

        for text in [
            "ERR unknown command", "MOVED", "MOVED 3999", "MOVED 16384 127.0.0.1:6381", "MOVED -1 h:1", "MOVED x h:1",
            "ASK 1 host", "ASK 1 host:0", "ASK 1 host:65536", "MOVED 1 h:1 extra", "moved 1 h:1",
        ] {
            #expect(ClusterRedirection(errorText: text) == nil, "\(text)")
        }
    }

    @Test("TRYAGAIN, CLUSTERDOWN and LOADING are transient; other errors are not")
    func transientErrors() {
        #expect(ClusterTransientError(errorText: "TRYAGAIN Multiple keys request during rehashing of slot") == .tryAgain)
        #expect(ClusterTransientError(errorText: "CLUSTERDOWN The cluster is down") == .clusterDown)
        #expect(ClusterTransientError(errorText: "CLUSTERDOWN Hash slot not served") == .clusterDown)
        #expect(ClusterTransientError(errorText: "LOADING Redis is loading the dataset in memory") == .loading)
        #expect(ClusterTransientError(errorText: "ERR value is not an integer or out of range") == nil)
        #expect(ClusterTransientError(errorText: "CROSSSLOT Keys in request don't hash to the same slot") == nil)
    }

    // MARK: CLUSTER SLOTS

    @Test("a CLUSTER SLOTS reply maps every slot to its master")
    func slotMapFromClusterSlots() throws {
        func node(_ host: String, _ port: Int64, _ id: String) -> RESPReply {
            .array([.bulk(ByteBuffer(string: host)), .integer(port), .bulk(ByteBuffer(string: id))])
        }
        let reply = RESPReply.array([
            .array([.integer(0), .integer(5460), node("127.0.0.1", 30001, "a"), node("127.0.0.1", 30004, "d")]),
            .array([.integer(5461), .integer(10922), node("127.0.0.1", 30002, "b"), node("127.0.0.1", 30005, "e")]),
            .array([.integer(10923), .integer(16000), node("127.0.0.1", 30003, "c")]),
            .array([.integer(16001), .integer(16383), node("", 30003, "c"), node("?", 30006, "f")]),
        ])
        let map = try ClusterSlotMap(parsing: reply, answeredBy: .init(host: "127.0.0.1", port: 30002))
        #expect(map.coveredSlots == 16384)
        #expect(map.masters.map(\.port) == [30001, 30002, 30003])
        #expect(map.replicas.map(\.port) == [30004, 30005, 30006])
        #expect(map.master(of: 0)?.port == 30001)
        #expect(map.master(of: 5460)?.port == 30001)
        #expect(map.master(of: 5461)?.port == 30002)
        #expect(map.master(of: 12182)?.port == 30003)
        #expect(map.master(of: 16383) == .init(host: "127.0.0.1", port: 30003))

        var moved = map
        moved.assign(12182, to: .init(host: "127.0.0.1", port: 30006))
        #expect(moved.master(of: 12182)?.port == 30006)
        #expect(moved.master(of: 12181)?.port == 30003)
        #expect(moved.masters.count == 4)
        #expect(!moved.replicas.contains(.init(host: "127.0.0.1", port: 30006)))
    }

    @Test("a partial map leaves slots without a master; malformed replies are protocol violations")
    func partialAndMalformedSlotMaps() throws {
        let answeredBy = RESPClusterStore.Node(host: "127.0.0.1", port: 7000)
        let partial = try ClusterSlotMap(
            parsing: .array([
                .array([.integer(100), .integer(199), .array([.bulk(ByteBuffer(string: "10.0.0.1")), .integer(7000)])])
            ]),
            answeredBy: answeredBy)
        #expect(partial.coveredSlots == 100)
        #expect(partial.master(of: 99) == nil)
        #expect(partial.master(of: 150) == .init(host: "10.0.0.1", port: 7000))
        #expect(try ClusterSlotMap(parsing: .array([]), answeredBy: answeredBy).coveredSlots == 0)

        for bad: RESPReply in [
            .status("OK"),
            .array([.array([.integer(0), .integer(16384), .array([.bulk(ByteBuffer(string: "h")), .integer(1)])])]),
            .array([.array([.integer(10), .integer(5), .array([.bulk(ByteBuffer(string: "h")), .integer(1)])])]),
            .array([.array([.integer(0), .integer(5)])]),
            .array([.array([.integer(0), .integer(5), .array([.bulk(ByteBuffer(string: "h"))])])]),
        ] {
            #expect(throws: CacheStoreError.self) { try ClusterSlotMap(parsing: bad, answeredBy: answeredBy) }
        }
    }

    // MARK: configuration

    @Test("redis+cluster:// URLs name the seeds and the credentials")
    func clusterURLs() throws {
        let plain = try RESPClusterStore.Configuration(url: "redis+cluster://10.0.0.1:7000,10.0.0.2:7001,cache-3")
        #expect(plain.seeds == [.init(host: "10.0.0.1", port: 7000), .init(host: "10.0.0.2", port: 7001), .init(host: "cache-3", port: 6379)])
        #expect(plain.username == nil)
        #expect(plain.password == nil)
        #expect(plain.retryTimeout == .seconds(2))

        let auth = try RESPClusterStore.Configuration(url: "redis+cluster://app:s3cr%3At%40@[::1]:7000,127.0.0.1:7001/0")
        #expect(auth.seeds == [.init(host: "::1", port: 7000), .init(host: "127.0.0.1", port: 7001)])
        #expect(auth.username == "app")
        #expect(auth.password == "s3cr:t@")
        #expect(auth.description.hasPrefix("redis+cluster://app:***@[::1]:7000,127.0.0.1:7001 (pool 4 per master"))

        let passwordOnly = try RESPClusterStore.Configuration(url: "redis+cluster://:pw@h1:1")
        #expect(passwordOnly.username == nil)
        #expect(passwordOnly.password == "pw")

        let pool = auth.nodeConfiguration(.init(host: "10.0.0.9", port: 7005), poolSize: 2)
        #expect(pool.host == "10.0.0.9")
        #expect(pool.port == 7005)
        #expect(pool.poolSize == 2)
        #expect(pool.password == "s3cr:t@")
        #expect(pool.database == 0)
    }

    @Test("malformed cluster URLs are refused without showing the password")
    func malformedClusterURLs() {
        for (url, fragment) in [
            ("redis://h:1", "use redis+cluster://"),
            ("rediss://h:1", "use redis+cluster:// or rediss+cluster://"),
            ("redis+cluster://h:1/2", "database 0 only"),
            ("redis+cluster://h:1,,h:2", "empty seed"),
            ("redis+cluster://:secret@h:1,h:99999", "port"),
            ("redis+cluster://", "empty seed"),
        ] {
            do {
                _ = try RESPClusterStore.Configuration(url: url)
                Issue.record("\(url) was accepted")
            } catch {
                #expect(error.message.contains(fragment), "\(url): \(error.message)")
                #expect(!error.message.contains("secret"), "\(error.message)")
            }
        }
        #expect(throws: RESPStore.ConfigurationError.self) { try RESPStore.Configuration(url: "redis+cluster://h:1") }
    }

    // MARK: key layout

    @Test("an entry, its variants and leases, and the URL's other methods and generations share one slot")
    func entryKeysShareASlot() {
        let keys = CacheKeys(namespace: "catalog", maximumURLLength: 40)
        let uri = "https://api.example.com/items?page={2}"
        let entry = keys.entryKey(generation: 3, method: .get, uri: uri)
        #expect(entry == "catalog:3:{\(FNV1a64.hex(FNV1a64.hash(uri)))}:GET:\(uri)")
        // The example of docs/sdk.md.
        #expect(keys.entryKey(generation: 3, method: .get, uri: "https://api.example.com/items")
            == "catalog:3:{349432f7a1fdf96e}:GET:https://api.example.com/items")
        let slot = ClusterSlots.slot(of: entry)
        let related = [
            CacheKeys.variantKey(entryKey: entry, nonce: 7, secondaryKey: "accept-language=en"),
            CacheKeys.lockKey(entryKey: entry),
            CacheKeys.refreshKey(entryKey: entry),
            CacheKeys.refreshKey(entryKey: CacheKeys.variantKey(entryKey: entry, nonce: 7, secondaryKey: "x")),
            keys.entryKey(generation: 3, method: .head, uri: uri),
            keys.entryKey(generation: 4, method: .get, uri: uri),
        ]
        for key in related {
            #expect(ClusterSlots.slot(of: key) == slot, "\(key)")
        }
        // A long URL is shortened, and keeps its slot.
        let long = "https://api.example.com/" + String(repeating: "a", count: 100)
        let longKey = keys.entryKey(generation: 0, method: .get, uri: long)
        #expect(longKey.contains("#h:"))
        #expect(ClusterSlots.slot(of: longKey) == ClusterSlots.slot(of: CacheKeys.lockKey(entryKey: longKey)))
        // Different URLs spread out.
        let slots = Set((0..<64).map { ClusterSlots.slot(of: keys.entryKey(generation: 0, method: .get, uri: "https://x/\($0)")) })
        #expect(slots.count > 50)
    }

    // MARK: calls sent again

    /// A scripted node that serves every slot (its `CLUSTER SLOTS` names itself) and answers other commands
    /// with `respond` (given the node's port), and a configuration for a store on it: one connection, retries
    /// for `retryTimeout`.
    private func singleNodeCluster(
        retryTimeout: Duration, _ respond: @escaping @Sendable (_ command: [String], _ port: Int) -> [UInt8]
    ) throws -> (ScriptedServer, RESPClusterStore.Configuration) {
        let port = try freeLoopbackPort()
        let node = try ScriptedServer(port: port, concurrent: true) { command in
            guard command.first?.uppercased() == "CLUSTER" else { return respond(command, port) }
            return Array("*1\r\n*3\r\n:0\r\n:16383\r\n*3\r\n$9\r\n127.0.0.1\r\n:\(port)\r\n$2\r\nn1\r\n".utf8)
        }
        var configuration = RESPClusterStore.Configuration(seeds: [.init(host: "127.0.0.1", port: port)])
        configuration.poolSize = 1
        configuration.retryTimeout = retryTimeout
        configuration.minReconnectDelay = .milliseconds(10)
        return (node, configuration)
    }

    @Test("a SET NX applied before its connection broke, sent again, counts as set when the key holds its value")
    func setIfAbsentSentAgain() async throws {
        // One node serving every slot, which applies the first SET NX and hangs up before answering it.
        let data = Mutex<(values: [String: String], hungUp: Bool)>(([:], false))
        let (node, configuration) = try singleNodeCluster(retryTimeout: .seconds(5)) { command, _ in
            switch command.first?.uppercased() {
            case "SET" where command.count > 3:
                let (stored, hangUp): (Bool, Bool) = data.withLock { d in
                    let stored = d.values[command[1]] == nil
                    if stored { d.values[command[1]] = command[2] }
                    defer { d.hungUp = true }
                    return (stored, !d.hungUp)
                }
                if hangUp { return ScriptedServer.hangUp }
                return Array((stored ? "+OK\r\n" : "$-1\r\n").utf8)
            case "GET":
                guard let value = data.withLock({ $0.values[command[1]] }) else { return Array("$-1\r\n".utf8) }
                return Array("$\(value.utf8.count)\r\n\(value)\r\n".utf8)
            default:
                return Array("+OK\r\n".utf8)
            }
        }
        defer { node.stop() }
        let store = RESPClusterStore(configuration: configuration)
        #expect(try await store.setIfAbsent("lease", to: ByteBuffer(string: "mine"), ttl: .seconds(10)))
        #expect(data.withLock { $0.hungUp })
        // Sent again or not, a key that holds another value was not set by this call.
        #expect(try await !store.setIfAbsent("lease", to: ByteBuffer(string: "theirs"), ttl: .seconds(10)))
        await store.shutdown()
    }

    @Test("ASK then TRYAGAIN, as during a migration, is retried within the retry time, past maxRedirections")
    func askThenTryAgainIsRetried() async throws {
        // One node serving every slot, importing and migrating at once: without ASKING it redirects to itself,
        // with it it answers TRYAGAIN seven times (the keys are moving), then the value.
        let state = Mutex<(asking: Bool, tryAgains: Int)>((false, 0))
        let (node, base) = try singleNodeCluster(retryTimeout: .seconds(10)) { command, port in
            switch command.first?.uppercased() {
            case "ASKING":
                state.withLock { $0.asking = true }
                return Array("+OK\r\n".utf8)
            case "MGET":
                let reply: String = state.withLock { s in
                    defer { s.asking = false }
                    guard s.asking else { return "-ASK 9189 127.0.0.1:\(port)\r\n" }
                    guard s.tryAgains >= 7 else {
                        s.tryAgains += 1
                        return "-TRYAGAIN Multiple keys request during rehashing of slot\r\n"
                    }
                    return "*2\r\n$1\r\n1\r\n$1\r\n2\r\n"
                }
                return Array(reply.utf8)
            default:
                return Array("+OK\r\n".utf8)
            }
        }
        defer { node.stop() }
        var configuration = base
        configuration.maxRedirections = 5
        let store = RESPClusterStore(configuration: configuration)
        let values = try await store.get(["{t}k1", "{t}k2"])
        #expect(values.map { $0.map { String(buffer: $0) } } == ["1", "2"])
        #expect(state.withLock { $0.tryAgains } == 7)
        await store.shutdown()
    }
}
