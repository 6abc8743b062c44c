import CacheCore
import NIOCore
import Synchronization

/// Keyspace notifications (`notify-keyspace-events`), as Redis's `notifyKeyspaceEvent`: each event of a class
/// that is on is published, through ``PubSubRegistry``, on `__keyspace@<db>__:<key>` with the event's name as
/// the message (`K`), then on `__keyevent@<db>__:<event>` with the key as the message (`E`).
///
/// Off by default. Every place a command may notify checks ``publishes(_:)`` — one relaxed load — and does
/// nothing more while the class is off. Keys the engine removes on its own (expired, evicted) come through the
/// keyspace's ``RemovalFeed``, which records them only while their class is on; they are published before the
/// next event of a command (a read that expired its key tells `expired` before its `keymiss`), after the
/// command that removed them, and by the sweeper.
package final class KeyspaceNotifier: Sendable {
    /// The classes that publish: empty unless `K` or `E` is on too, since then nothing would be published.
    private let active = Atomic<Int>(0)
    private let removals: RemovalFeed
    private let pubsub: PubSubRegistry
    /// Held while events are drained and sent, so that a removal drained by one thread (the sweeper) is sent
    /// before an event another thread publishes after it (a read's `keymiss` of that key): sending only hands
    /// messages to the subscribers' event loops, in the order they are sent.
    private let order = Mutex(())

    package init(removals: RemovalFeed, pubsub: PubSubRegistry) {
        self.removals = removals
        self.pubsub = pubsub
    }

    /// Applies `notify-keyspace-events`.
    package func configure(_ flags: KeyspaceEventFlags) {
        let on = flags.isDisjoint(with: [.keyspace, .keyevent]) ? [] : flags
        active.store(on.rawValue, ordering: .relaxed)
        removals.setNotifying(expired: on.contains(.expired), evicted: on.contains(.evicted))
    }

    /// Whether events of class `type` are published.
    @inline(__always)
    package func publishes(_ type: KeyspaceEventFlags) -> Bool {
        active.load(ordering: .relaxed) & type.rawValue != 0
    }

    /// Whether any class is on (checked once after every command, for keys the engine removed meanwhile).
    @inline(__always)
    package var isActive: Bool { active.load(ordering: .relaxed) != 0 }

    /// Publishes `event` about `key` of database `db`, after the removals recorded before it. A message for
    /// `current` (subscribed in RESP3) is written into `reply` at once, as PUBLISH's own message is.
    package func publish(
        _ event: StaticString, key: UnsafeRawBufferPointer, db: Int, current: ClientSession?, reply: inout ByteBuffer
    ) {
        order.withLock { _ in
            sendRemovals(current: current, reply: &reply)
            event.withUTF8Buffer { name in
                send(UnsafeRawBufferPointer(name), key: key, db: db, current: current, reply: &reply)
            }
        }
    }

    /// Publishes `expired` and `evicted` for the keys the engine removed since the last call.
    package func publishRemovals(current: ClientSession?, reply: inout ByteBuffer) {
        order.withLock { _ in sendRemovals(current: current, reply: &reply) }
    }

    private func sendRemovals(current: ClientSession?, reply: inout ByteBuffer) {
        for removal in removals.drainEvents() {
            let event: StaticString = removal.reason == .expired ? "expired" : "evicted"
            removal.key.withUnsafeBytes { key in
                event.withUTF8Buffer { name in
                    send(UnsafeRawBufferPointer(name), key: key, db: removal.database, current: current, reply: &reply)
                }
            }
        }
    }

    /// Publishes the removals recorded outside any command (the sweeper's).
    package func publishBackgroundRemovals() {
        guard isActive else { return }
        var unused = ByteBuffer()
        publishRemovals(current: nil, reply: &unused)
    }

    private func send(
        _ event: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, db: Int, current: ClientSession?,
        reply: inout ByteBuffer
    ) {
        let flags = KeyspaceEventFlags(rawValue: active.load(ordering: .relaxed))
        if flags.contains(.keyspace) {
            let channel = Array("__keyspace@\(db)__:".utf8) + Array(key)
            channel.withUnsafeBytes { _ = pubsub.publish(channel: $0, message: event, current: current, reply: &reply) }
        }
        if flags.contains(.keyevent) {
            let channel = Array("__keyevent@\(db)__:".utf8) + Array(event)
            channel.withUnsafeBytes { _ = pubsub.publish(channel: $0, message: key, current: current, reply: &reply) }
        }
    }
}
