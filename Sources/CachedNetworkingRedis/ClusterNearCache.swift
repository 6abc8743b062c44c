import CachedNetworking
import Logging
import Synchronization

/// A ``RESPClusterStore``'s near cache: one ``NearCacheCore`` fed by a ``TrackingChannel`` per master.
///
/// `CLIENT TRACKING … REDIRECT <id>` can only name a client of the same server, and in the default mode a server
/// tracks the keys each connection read: so every master gets its own subscriber, and every data connection to
/// that master redirects to it (the channel is the hook of the master's pool). The core fills only while every
/// channel is subscribed, and drops everything when
///
/// - a channel's subscription or a tracking data connection is lost (as for ``RESPStore``);
/// - a master is added (its channel is registered before its pool has a connection, and filling waits for
///   its subscriber) or leaves the slot map (its channel is retired);
/// - the slot map changes (`MOVED`, or a refresh that assigns any slot to another master): a key cached from
///   one master may now be written on another that never tracked it for this store.
final class ClusterNearCache: Sendable {
    typealias Node = RESPClusterStore.Node

    private struct State {
        var channels: [Node: TrackingChannel] = [:]
        /// Channels of nodes that left the map; awaited by ``shutdown()``.
        var retired: [TrackingChannel] = []
        var closed = false
    }

    let core: NearCacheCore
    private let state = Mutex(State())

    init(core: NearCacheCore) {
        self.core = core
    }

    /// The channel of `node` (a master), created and subscribing on first use; the hook for `node`'s pool.
    /// - Parameters:
    ///   - configuration: how to connect to `node`, for its subscriber.
    ///   - tlsContext: the store's TLS context, when it uses TLS.
    func channel(for node: Node, configuration: RESPStore.Configuration, tlsContext: StoreTLSContext?) -> TrackingChannel {
        let (channel, created): (TrackingChannel, Bool) = state.withLock { s in
            if let known = s.channels[node] { return (known, false) }
            let channel = TrackingChannel(configuration: configuration, tlsContext: tlsContext, core: core)
            s.channels[node] = channel
            // A channel made after shutdown never subscribes: its pool is refused anyway.
            return (channel, !s.closed)
        }
        if created { channel.start() }
        return channel
    }

    /// `node` is no longer a master in the slot map: its channel stops and everything is dropped.
    func nodeLeft(_ node: Node) {
        let channel: TrackingChannel? = state.withLock { s in
            guard let channel = s.channels.removeValue(forKey: node) else { return nil }
            // Channels retired before whose subscribers have exited are done with (and their descriptors closed).
            s.retired.removeAll { $0.releaseIfStopped() }
            s.retired.append(channel)
            return channel
        }
        guard let channel else { return }
        channel.retire()
        core.logger.info("near cache flushed: a node left the cluster's slot map", metadata: ["node": "\(node)"])
    }

    /// The slot map changed: everything is dropped (reads in flight keep nothing).
    func topologyChanged(_ reason: String) {
        core.invalidateAll(reason: .topology)
        core.logger.debug("near cache flushed: the cluster's slot map changed", metadata: ["reason": "\(reason)"])
    }

    /// Stops every subscriber without waiting for their threads, and turns the near cache off.
    func beginShutdown() {
        for channel in close() { channel.beginShutdown() }
    }

    /// Stops every subscriber and waits for their threads to exit.
    func shutdown() async {
        for channel in close() { await channel.shutdown() }
    }

    private func close() -> [TrackingChannel] {
        core.close()
        return state.withLock { s in
            s.closed = true
            return Array(s.channels.values) + s.retired
        }
    }
}
