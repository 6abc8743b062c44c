import CacheCore
import CacheServer
import Dispatch
import Logging
import NIOCore
import NIOPosix
import Testing

/// An event loop's poller: after a read it keeps the loop from sleeping for `busy-poll` microseconds, and only
/// then lets it sleep.
@Suite("Busy polling after reads")
struct BusyPollTests {
    /// A server state whose `busy-poll` is `microseconds`, and a poller on one event loop that follows it.
    private static func make(microseconds: Int) -> (MultiThreadedEventLoopGroup, ServerState, BusyPoll) {
        var configuration = ServerConfiguration()
        configuration.busyPoll = microseconds
        let state = ServerState(configuration: configuration, logger: Logger(label: "test"))
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let poll = BusyPoll(eventLoop: group.next()) { [state] in state.busyPollNanoseconds }
        return (group, state, poll)
    }

    /// Notes a read on the poller's loop, and tells whether it polls afterwards and how many periods began.
    private static func read(_ poll: BusyPoll, on loop: any EventLoop) throws -> (polling: Bool, periods: Int) {
        try loop.submit {
            poll.noteRead()
            return (poll.isPolling, poll.periods)
        }.wait()
    }

    /// Waits (up to `seconds`) until the loop stops polling; returns whether it did.
    private static func waitUntilQuiet(_ poll: BusyPoll, on loop: any EventLoop, seconds: Double = 10) throws -> Bool {
        let deadline = DispatchTime.now() + seconds
        while DispatchTime.now() < deadline {
            if try !loop.submit({ poll.isPolling }).wait() { return true }
            usleep(1000)
        }
        return false
    }

    @Test("with busy-poll 0 a read starts no polling")
    func offMeansNoPolling() throws {
        let (group, _, poll) = Self.make(microseconds: 0)
        defer { try? group.syncShutdownGracefully() }
        let after = try Self.read(poll, on: group.next())
        #expect(!after.polling && after.periods == 0)
    }

    @Test("a read starts polling, which ends by itself once the window passes without another read")
    func pollingEnds() throws {
        let (group, _, poll) = Self.make(microseconds: 2_000)
        defer { try? group.syncShutdownGracefully() }
        let loop = group.next()
        let after = try Self.read(poll, on: loop)
        #expect(after.polling && after.periods == 1)
        #expect(try Self.waitUntilQuiet(poll, on: loop), "still polling long after the 2 ms window")
        let again = try Self.read(poll, on: loop)
        #expect(again.polling && again.periods == 2, "the next read starts a new period")
    }

    @Test("reads within the window extend the same period")
    func readsExtendThePeriod() throws {
        let (group, _, poll) = Self.make(microseconds: 100_000)
        defer { try? group.syncShutdownGracefully() }
        let loop = group.next()
        var last = try Self.read(poll, on: loop)
        for _ in 0..<3 {
            usleep(20_000)
            last = try Self.read(poll, on: loop)
        }
        #expect(last.polling && last.periods == 1)
    }

    @Test("the loop runs its timers and tasks while it polls")
    func loopStaysResponsive() throws {
        let (group, _, poll) = Self.make(microseconds: 60_000)
        defer { try? group.syncShutdownGracefully() }
        let loop = group.next()
        #expect(try Self.read(poll, on: loop).polling)
        let timer = loop.scheduleTask(in: .milliseconds(5)) { true }
        #expect(try timer.futureResult.wait())
        #expect(try loop.submit { poll.isPolling }.wait(), "still within the 60 ms window")
    }

    @Test("CONFIG SET busy-poll applies to the next read")
    func followsTheConfiguration() throws {
        let (group, state, poll) = Self.make(microseconds: 0)
        defer { try? group.syncShutdownGracefully() }
        let loop = group.next()
        #expect(try !Self.read(poll, on: loop).polling)
        state.updateConfiguration { $0.busyPoll = 50_000 }
        #expect(try Self.read(poll, on: loop).polling)
        state.updateConfiguration { $0.busyPoll = 0 }
        #expect(try Self.waitUntilQuiet(poll, on: loop))
        #expect(try !Self.read(poll, on: loop).polling)
    }

    @Test("the loop shuts down cleanly while a long window is open")
    func shutdownWhilePolling() throws {
        let (group, _, poll) = Self.make(microseconds: 100_000)
        #expect(try Self.read(poll, on: group.next()).polling)
        try group.syncShutdownGracefully()
    }
}
