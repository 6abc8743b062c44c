import CacheServer
import RESP
import Testing

/// ACL LOG's grouping of failed authentications over time, on a manual clock (the live tests compare the rest
/// with Redis).
@Suite("ACL LOG")
struct AclCommandTests {
    static func counts(_ h: Harness) -> [Int] {
        h.server.aclLog.newest(200).map(\.count)
    }

    @Test("failures within a minute of an entry count in it; later ones start a new entry")
    func groupingWindow() {
        let h = Harness(requirePass: "secret")
        for _ in 0..<2 { h.run("AUTH", "wrong") }
        h.advance(60_000)
        h.run("AUTH", "wrong")
        #expect(Self.counts(h) == [3])
        h.advance(60_001)
        h.run("AUTH", "wrong")
        #expect(Self.counts(h) == [1, 3])
    }

    @Test("a failure counted in an entry makes it the newest")
    func countedEntryMovesToTheFront() {
        let h = Harness(requirePass: "secret")
        h.run("AUTH", "bob", "x")
        h.run("AUTH", "carol", "y")
        h.run("AUTH", "bob", "z")
        #expect(h.server.aclLog.newest(10).map { "\($0.username):\($0.count)" } == ["bob:2", "carol:1"])
    }

    @Test("only the ten newest entries are matched, and at most 128 are kept, newest first")
    func lookbackAndLimit() {
        let h = Harness(requirePass: "secret")
        h.run("AUTH", "user-0", "x")
        for i in 1...10 { h.run("AUTH", "user-\(i)", "x") }
        // user-0's entry is the eleventh newest now: a new failure of it is a new entry.
        h.run("AUTH", "user-0", "x")
        #expect(h.server.aclLog.newest(200).map(\.username).prefix(2) == ["user-0", "user-10"])
        #expect(Self.counts(h).count == 12)
        for i in 0..<200 { h.run("AUTH", "other-\(i)", "x") }
        let kept = h.server.aclLog.newest(1000)
        #expect(kept.count == 128)
        #expect(kept.first?.username == "other-199")
        #expect(h.run("AUTH", "secret") == .ok)
        #expect(h.run("ACL", "LOG", "3").elements?.count == 3)
        #expect(h.run("ACL", "LOG", "RESET") == .ok)
        #expect(h.run("ACL", "LOG") == .array([]))
    }
}
