import CacheCore
import NIOCore
import RESP
import Synchronization

/// The options CLIENT TRACKING set for one client.
package struct TrackingOptions: Sendable, Equatable {
    /// The id of the client that receives this client's invalidations, or 0.
    package var redirect = 0
    package var bcast = false
    package var optin = false
    package var optout = false
    package var noloop = false
    /// BCAST's prefixes, sorted; `[""]` (every key) when BCAST was given without PREFIX.
    package var prefixes: [[UInt8]] = []

    package init() {}
}

/// Server-assisted client-side caching (Redis's tracking.c): which clients may hold which keys, and the
/// invalidation messages sent when those keys change.
///
/// In the default mode the table remembers, for every key a tracking client read, that client's id, and
/// forgets it once it has sent that client one invalidation. In BCAST mode nothing is remembered: every
/// modified key that starts with a registered prefix is collected, and the keys collected go to the prefix's
/// clients in one message per prefix when a connection has run the commands it read (Redis sends them before
/// its event loop sleeps): the keys of one EXEC, or of a pipeline, arrive together. As in Redis, keys are names only (not per database), and the ids of clients that
/// turned tracking off are dropped lazily, when their keys next change.
///
/// Nothing here is on the path of a command while no client tracks: ``isActive`` is one relaxed load (of a flag
/// in this module, so that it inlines into every write handler; the keyspace's ``RemovalFeed`` has its own,
/// switched with it), and the table's mutex is taken only when it is on.
package final class TrackingTable: Sendable {
    private struct Client {
        let session: ClientSession
        var options: TrackingOptions
        var brokenRedirect = false
    }

    private struct State {
        var clients: [Int: Client] = [:]
        /// Default mode: key → ids of the clients that may hold it.
        var keys: [[UInt8]: Set<Int>] = [:]
        /// Ids across all of `keys` (INFO's tracking_total_items).
        var items = 0
        /// BCAST mode: prefix → ids of its clients.
        var prefixes: [[UInt8]: Set<Int>] = [:]
        /// BCAST mode: prefix → the modified keys not sent yet, each with the id of the client that modified
        /// it (nil for expiry and eviction, or when several clients did, as NOLOOP then keeps it).
        var pendingBroadcast: [[UInt8]: [[UInt8]: Int?]] = [:]
    }

    private let state = Mutex(State())
    private let active = Atomic<Bool>(false)
    private let broadcastPending = Atomic<Bool>(false)
    private let removals: RemovalFeed

    package init(removals: RemovalFeed) {
        self.removals = removals
    }

    /// Whether any client has tracking on.
    @inline(__always)
    package var isActive: Bool { active.load(ordering: .relaxed) }

    /// Whether BCAST keys wait to be sent (``pendingBroadcastInvalidations()``): one relaxed load.
    @inline(__always)
    package var hasPendingBroadcast: Bool { broadcastPending.load(ordering: .relaxed) }

    /// Switches ``isActive`` and the removal feed together (with the state's lock held).
    private func setActive(_ on: Bool) {
        active.store(on, ordering: .relaxed)
        removals.setEnabled(on)
    }

    // MARK: clients

    /// Turns tracking on for `session` with `options` (a second CLIENT TRACKING ON adds prefixes to the ones
    /// it has, as in Redis).
    package func enable(_ session: ClientSession, _ options: TrackingOptions) {
        state.withLock { state in
            if let old = state.clients[session.id] {
                for prefix in old.options.prefixes where !options.prefixes.contains(prefix) {
                    state.prefixes[prefix]?.remove(session.id)
                    if state.prefixes[prefix]?.isEmpty == true { state.prefixes[prefix] = nil }
                }
            }
            state.clients[session.id] = Client(session: session, options: options)
            for prefix in options.prefixes { state.prefixes[prefix, default: []].insert(session.id) }
            setActive(true)
        }
    }

    /// Turns tracking off for client `id` (also when it disconnects). Its ids in the key table go lazily.
    package func disable(_ id: Int) {
        state.withLock { state in
            guard let old = state.clients.removeValue(forKey: id) else { return }
            for prefix in old.options.prefixes {
                state.prefixes[prefix]?.remove(id)
                if state.prefixes[prefix]?.isEmpty == true { state.prefixes[prefix] = nil }
            }
            if state.clients.isEmpty {
                state.keys = [:]
                state.items = 0
                setActive(false)
            }
        }
    }

    /// Whether invalidations for client `id` found its redirect target gone (TRACKINGINFO, CLIENT LIST 'R').
    package func hasBrokenRedirect(_ id: Int) -> Bool {
        state.withLock { $0.clients[id]?.brokenRedirect ?? false }
    }

    /// The options of client `id`, when it tracks (CLIENT LIST from another connection).
    package func options(of id: Int) -> TrackingOptions? {
        state.withLock { $0.clients[id]?.options }
    }

    /// INFO's tracking figures.
    package var statistics: (clients: Int, keys: Int, items: Int, prefixes: Int) {
        state.withLock { ($0.clients.count, $0.keys.count, $0.items, $0.prefixes.count) }
    }

    // MARK: reads

    /// Remembers that client `id` may now hold `keys` (a read-only command it ran in the default mode).
    package func remember(_ keys: [[UInt8]], for id: Int) {
        state.withLock { state in
            guard state.clients[id] != nil else { return }
            for key in keys where state.keys[key, default: []].insert(id).inserted {
                state.items += 1
            }
        }
    }

    // MARK: invalidation

    /// What one tracking client is to be told.
    package struct Invalidation: Sendable {
        package let session: ClientSession
        package let redirect: Int
        /// The keys, or nil for "every key" (a flush).
        package let keys: [[UInt8]]?
    }

    /// The invalidations that `modified` keys (changed by client `origin`, or by expiry or eviction when
    /// nil) and a flush cause, in Redis's order: flushes, then each key's default-mode clients. Default-mode
    /// entries are forgotten. Keys under a BCAST prefix (with `broadcast`) are collected for
    /// ``pendingBroadcastInvalidations()``.
    package func invalidations(modified: [[UInt8]], flushed: Bool, origin: Int?, broadcast: Bool = true)
        -> [Invalidation]
    {
        state.withLock { state in
            var out: [Invalidation] = []
            if flushed {
                for id in state.clients.keys.sorted() {
                    let client = state.clients[id]!
                    out.append(Invalidation(session: client.session, redirect: client.options.redirect, keys: nil))
                }
                state.keys = [:]
                state.items = 0
            }
            var collected = false
            for key in modified {
                for (prefix, _) in state.prefixes where broadcast && key.starts(with: prefix) {
                    // A key changed by two clients in one batch is NOLOOP's neither.
                    let previous: Int?? = state.pendingBroadcast[prefix]?[key]
                    let kept: Int? = previous.map { $0 == origin ? origin : nil } ?? origin
                    state.pendingBroadcast[prefix, default: [:]][key] = .some(kept)
                    collected = true
                }
                guard let ids = state.keys.removeValue(forKey: key) else { continue }
                state.items -= ids.count
                for id in ids.sorted() {
                    guard let client = state.clients[id], !client.options.bcast else { continue }
                    if client.options.noloop && id == origin { continue }
                    out.append(Invalidation(session: client.session, redirect: client.options.redirect, keys: [key]))
                }
            }
            if collected { broadcastPending.store(true, ordering: .relaxed) }
            return out
        }
    }

    /// The BCAST messages for the keys collected since the last call, which it forgets: for each prefix in
    /// byte order, one message per client of the prefix with the keys in byte order (for a NOLOOP client,
    /// without those it modified itself).
    package func pendingBroadcastInvalidations() -> [Invalidation] {
        guard broadcastPending.load(ordering: .relaxed) else { return [] }
        return state.withLock { state in
            broadcastPending.store(false, ordering: .relaxed)
            var out: [Invalidation] = []
            for prefix in state.pendingBroadcast.keys.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
                let changed = state.pendingBroadcast[prefix]!
                let sortedKeys = changed.keys.sorted { $0.lexicographicallyPrecedes($1) }
                for id in (state.prefixes[prefix] ?? []).sorted() {
                    guard let client = state.clients[id] else { continue }
                    let keys = client.options.noloop ? sortedKeys.filter { changed[$0]! != id } : sortedKeys
                    if keys.isEmpty { continue }
                    out.append(Invalidation(session: client.session, redirect: client.options.redirect, keys: keys))
                }
            }
            state.pendingBroadcast = [:]
            return out
        }
    }

    /// Keys past `limit` in the default mode's table (`tracking-table-max-keys`), to be invalidated as if they
    /// had been modified, as Redis does to bound the table's memory. Which keys is arbitrary.
    package func keysOverLimit(_ limit: Int) -> [[UInt8]] {
        state.withLock { state in
            guard limit > 0, state.keys.count > limit else { return [] }
            return Array(state.keys.keys.prefix(state.keys.count - limit))
        }
    }

    /// Records that client `id`'s redirect target was gone when an invalidation was due.
    package func markBrokenRedirect(_ id: Int) {
        state.withLock { $0.clients[id]?.brokenRedirect = true }
    }

    /// Name of the pub/sub channel RESP2 clients subscribe to for redirected invalidations.
    package static let channel = "__redis__:invalidate"
}
