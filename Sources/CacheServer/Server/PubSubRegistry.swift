import CacheCore
import NIOCore
import RESP
import Synchronization

/// Who is subscribed to which channels and patterns, and the delivery of PUBLISH's messages.
///
/// Every subscriber is reached through its session's ``SessionOutlet``, which writes on the subscriber's own
/// event loop; a publisher never touches another connection's channel. Messages from one publisher reach
/// each subscriber in the order they were published (one event loop's task queue is first in, first out).
/// The registry is behind one mutex, which no command takes unless it is a pub/sub command.
package final class PubSubRegistry: Sendable {
    private struct State {
        var channels: [[UInt8]: [Int: ClientSession]] = [:]
        var patterns: [[UInt8]: [Int: ClientSession]] = [:]
    }

    private let state = Mutex(State())

    package init() {}

    /// Adds `session` to `channel`'s subscribers (or `pattern`'s, when `isPattern`).
    package func add(_ session: ClientSession, to name: [UInt8], isPattern: Bool) {
        state.withLock { state in
            if isPattern {
                state.patterns[name, default: [:]][session.id] = session
            } else {
                state.channels[name, default: [:]][session.id] = session
            }
        }
    }

    /// Removes client `id` from the subscribers of the given channels and patterns.
    package func remove(_ id: Int, channels: some Sequence<[UInt8]>, patterns: some Sequence<[UInt8]>) {
        state.withLock { state in
            for name in channels {
                state.channels[name]?[id] = nil
                if state.channels[name]?.isEmpty == true { state.channels[name] = nil }
            }
            for name in patterns {
                state.patterns[name]?[id] = nil
                if state.patterns[name]?.isEmpty == true { state.patterns[name] = nil }
            }
        }
    }

    /// Channels with at least one subscriber, those matching `pattern` when given (PUBSUB CHANNELS).
    package func activeChannels(matching pattern: [UInt8]?) -> [[UInt8]] {
        let names = state.withLock { Array($0.channels.keys) }
        guard let pattern else { return names }
        return pattern.withUnsafeBytes { p in
            names.filter { name in name.withUnsafeBytes { Glob.matches(pattern: p, subject: $0) } }
        }
    }

    /// The number of subscribers of `channel`, patterns not counted (PUBSUB NUMSUB).
    package func subscriberCount(_ channel: [UInt8]) -> Int {
        state.withLock { $0.channels[channel]?.count ?? 0 }
    }

    /// Channels and patterns with at least one subscriber (INFO, PUBSUB NUMPAT).
    package var counts: (channels: Int, patterns: Int) {
        state.withLock { ($0.channels.count, $0.patterns.count) }
    }

    /// Sends `message` to the subscribers of `channel` and of every pattern matching it, and returns how many
    /// deliveries that made. A message for `current` (the publisher itself, subscribed in RESP3) is written
    /// into `reply` straight away, before PUBLISH's own reply, as Redis does.
    package func publish(
        channel: UnsafeRawBufferPointer, message: UnsafeRawBufferPointer, current: ClientSession?,
        reply: inout ByteBuffer
    ) -> Int {
        let key = Array(channel)
        let (direct, matched) = state.withLock { state -> ([ClientSession], [([UInt8], [ClientSession])]) in
            let direct = state.channels[key].map { Array($0.values) } ?? []
            var matched: [([UInt8], [ClientSession])] = []
            for (pattern, sessions) in state.patterns {
                let hit = pattern.withUnsafeBytes { Glob.matches(pattern: $0, subject: channel) }
                if hit { matched.append((pattern, Array(sessions.values))) }
            }
            return (direct, matched)
        }
        var deliveries = 0
        if !direct.isEmpty {
            deliveries += fanOut(direct, [Array("message".utf8), key], message, current: current, reply: &reply) {
                $0.channels.contains(key)
            }
        }
        for (pattern, sessions) in matched {
            deliveries += fanOut(sessions, [Array("pmessage".utf8), pattern, key], message, current: current, reply: &reply) {
                $0.patterns.contains(pattern)
            }
        }
        return deliveries
    }

    /// Sends `[fields..., message]` to each of `sessions` that still `isSubscribed` when it gets there (an
    /// UNSUBSCRIBE may overtake it): encoded once, framed per client as a RESP2 array or a RESP3 push.
    private func fanOut(
        _ sessions: [ClientSession], _ fields: [[UInt8]], _ message: UnsafeRawBufferPointer,
        current: ClientSession?, reply: inout ByteBuffer, isSubscribed: @escaping @Sendable (ClientSession) -> Bool
    ) -> Int {
        var encoded = ByteBuffer()
        for field in fields { encoded.writeRESPBulkString(field) }
        encoded.writeRESPBulkString(message)
        let body = encoded
        let count = fields.count + 1
        let write: @Sendable (ClientSession, inout ByteBuffer) -> Void = { session, out in
            guard isSubscribed(session) else { return }
            out.writeRESPPushHeader(count, session.protocolVersion)
            out.writeImmutableBuffer(body)
        }
        for session in sessions {
            if session === current {
                write(session, &reply)
            } else {
                session.outlet?.send(write)
            }
        }
        return sessions.count
    }
}
