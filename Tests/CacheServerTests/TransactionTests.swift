import CacheCore
import CacheServer
import Foundation
import NIOCore
import NIOPosix
import RESP
import Synchronization
import Testing

/// MULTI/EXEC/WATCH inside the server: the watch registry's bookkeeping, tracking inside a transaction, and
/// the gate that keeps other event loops out while EXEC runs. The replies themselves are compared with
/// Redis's in the differential corpus (transactions.corpus), and between clients in TransactionLiveTests.
@Suite("Transactions: MULTI, EXEC, WATCH")
struct TransactionTests {
    @Test("writes report their keys only while someone watches: UNWATCH, EXEC, DISCARD and an aborted EXEC forget them")
    func registryEmptiesAgain() {
        let h = Harness()
        let other = h.newSession()
        #expect(!h.server.watches.isActive)

        for end in [["UNWATCH"], ["MULTI", "EXEC"], ["MULTI", "DISCARD"], ["MULTI", "NOSUCH", "EXEC"]] {
            #expect(h.run("WATCH", "a", "b") == .ok)
            #expect(h.run("WATCH", "c", as: other) == .ok)
            #expect(h.server.watches.isActive)
            for command in end { _ = h.run(command) }
            #expect(h.session.watchedKeys.isEmpty, "after \(end)")
            #expect(h.server.watches.isActive, "the other client still watches")
            #expect(h.run("UNWATCH", as: other) == .ok)
            #expect(!h.server.watches.isActive, "after \(end)")
        }
    }

    @Test("a write by another client marks the watcher, not the writer, and only for that key and database")
    func marksTheWatcher() {
        let h = Harness()
        let other = h.newSession()
        #expect(h.run("WATCH", "k") == .ok)
        #expect(h.run("SET", "j", "1", as: other) == .ok)
        #expect(h.run("SELECT", "2", as: other) == .ok)
        #expect(h.run("SET", "k", "1", as: other) == .ok)
        #expect(!h.session.isWatchDirty)
        #expect(h.run("SELECT", "0", as: other) == .ok)
        #expect(h.run("SET", "k", "1", as: other) == .ok)
        #expect(h.session.isWatchDirty)
        #expect(!other.isWatchDirty)
        #expect(h.run("MULTI") == .ok)
        #expect(h.run("GET", "k") == .simple("QUEUED"))
        #expect(h.run("EXEC") == .nullArray)
        #expect(!h.session.isWatchDirty, "EXEC clears the mark")
    }

    @Test("a tracking client's read inside MULTI is remembered when EXEC runs it, not when it is queued")
    func trackingInsideTransaction() {
        let h = Harness()
        let writer = h.newSession()
        _ = h.run("HELLO", "3")
        #expect(h.run("CLIENT", "TRACKING", "on") == .ok)
        #expect(h.run("MULTI") == .ok)
        #expect(h.run("GET", "k") == .simple("QUEUED"))
        #expect(h.run("SET", "k", "1", as: writer) == .ok)
        #expect(h.pushes().isEmpty, "a queued read has not read anything yet")
        #expect(h.run("EXEC") == .array([.bulk("1")]))
        #expect(h.run("SET", "k", "2", as: writer) == .ok)
        #expect(h.pushes() == [.push([.bulk("invalidate"), .array([.bulk("k")])])])
    }

    @Test("CLIENT CACHING YES before MULTI applies to every read of the transaction (OPTIN)")
    func cachingForTheTransaction() {
        let h = Harness()
        let writer = h.newSession()
        _ = h.run("HELLO", "3")
        #expect(h.run("CLIENT", "TRACKING", "on", "OPTIN") == .ok)
        #expect(h.run("CLIENT", "CACHING", "yes") == .ok)
        #expect(h.run("MULTI") == .ok)
        #expect(h.run("GET", "a") == .simple("QUEUED"))
        #expect(h.run("GET", "b") == .simple("QUEUED"))
        #expect(h.run("EXEC") == .array([.null, .null]))
        #expect(h.run("MSET", "a", "1", "b", "1", as: writer) == .ok)
        #expect(h.pushes() == [.push([.bulk("invalidate"), .array([.bulk("a")])]), .push([.bulk("invalidate"), .array([.bulk("b")])])])
        // And only to it: the next read is not tracked.
        #expect(h.run("GET", "c") == .null)
        #expect(h.run("SET", "c", "1", as: writer) == .ok)
        #expect(h.pushes().isEmpty)
    }

    @Test("RESET asks for AUTH again when a password is set, and leaves MONITOR")
    func resetConnection() {
        let h = Harness(requirePass: "secret")
        #expect(h.run("AUTH", "secret") == .ok)
        #expect(h.run("MONITOR") == .ok)
        #expect(h.session.isMonitor)
        #expect(h.run("RESET") == .simple("RESET"))
        #expect(!h.session.isMonitor)
        #expect(h.run("GET", "k") == .error("NOAUTH Authentication required."))
        #expect(h.run("AUTH", "secret") == .ok)
        #expect(h.run("GET", "k") == .nullBulkString)
    }

    @Test("the commands of a transaction count as commands when EXEC runs them")
    func counted() {
        let h = Harness()
        let before = h.session.commandsProcessed
        #expect(h.run("MULTI") == .ok)
        #expect(h.run("SET", "a", "1") == .simple("QUEUED"))
        #expect(h.run("GET", "a") == .simple("QUEUED"))
        #expect(h.session.commandsProcessed == before + 1, "MULTI only")
        #expect(h.run("EXEC") == .array([.ok, .bulk("1")]))
        #expect(h.session.commandsProcessed == before + 4)
    }

    @Test("EXEC waits until no other event loop runs commands, and other loops wait while it runs")
    func gateExcludesOtherLoops() throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        defer { try? group.syncShutdownGracefully() }
        let gate = TransactionGate()
        gate.configure(loops: group)
        let loops = Array(group.makeIterator())
        let (mine, theirs) = (try #require(gate.lane(for: loops[0])), try #require(gate.lane(for: loops[1])))

        // The other loop is inside a read's commands: the transaction does not start until it leaves.
        let events = Mutex<[String]>([])
        gate.enter(theirs)
        let transactionDone = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            gate.enter(mine)
            gate.exclusively(from: mine) {
                events.withLock { $0.append("transaction") }
                // While it runs, the other loop cannot start on commands.
                let entered = DispatchSemaphore(value: 0)
                Thread.detachNewThread {
                    gate.enter(theirs)
                    events.withLock { $0.append("other loop entered") }
                    gate.leave(theirs)
                    entered.signal()
                }
                #expect(entered.wait(timeout: .now() + 0.2) == .timedOut)
                events.withLock { $0.append("transaction done") }
            }
            gate.leave(mine)
            transactionDone.signal()
        }
        Thread.sleep(forTimeInterval: 0.2)
        #expect(events.withLock { $0 }.isEmpty, "the transaction ran while another loop was running commands")
        events.withLock { $0.append("other loop left") }
        gate.leave(theirs)
        #expect(transactionDone.wait(timeout: .now() + 10) == .success)
        Thread.sleep(forTimeInterval: 0.05)
        #expect(events.withLock { $0 } == ["other loop left", "transaction", "transaction done", "other loop entered"])
    }
}
