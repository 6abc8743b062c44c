import CacheCore
import NIOCore
import RESP

/// Sending client-side caching's invalidation messages, as Redis's `sendTrackingMessage` does.
extension ServerState {
    /// Sends the invalidations that `modified` keys and a flush cause (with the keys that expiry and eviction
    /// removed meanwhile), on behalf of `current`, whose command's reply starts at `replyStart` in `reply`.
    ///
    /// Messages for other connections go through their outlets. For `current` itself they go into `reply`:
    /// after the command's reply when they are its own invalidations (Redis defers those), before it when it
    /// only receives them as another client's redirect target.
    package func sendInvalidations(
        modified: [[UInt8]], flushed: Bool, current: ClientSession?, reply: inout ByteBuffer, replyStart: Int
    ) {
        var keys = modified
        keys += keyspace.removals.drain()
        guard !keys.isEmpty || flushed else { return }
        let list = tracking.invalidations(modified: keys, flushed: flushed, origin: current?.id)
        send(list, current: current, reply: &reply, replyStart: replyStart)
    }

    /// Sends the invalidations of the keys eviction (and expiry) removed before `current`'s command runs, as
    /// Redis's eviction before a command does: to every client that tracks them (NOLOOP does not apply: no
    /// client changed them), `current` included, whose messages go at the end of `reply`, ahead of its command's
    /// reply.
    package func sendRemovalInvalidations(current: ClientSession, reply: inout ByteBuffer) {
        let keys = keyspace.removals.drain()
        guard !keys.isEmpty else { return }
        let list = tracking.invalidations(modified: keys, flushed: false, origin: nil)
        send(list, current: current, reply: &reply, replyStart: reply.writerIndex)
    }

    /// Sends the BCAST invalidations collected since the last time, as Redis does before its event loop sleeps:
    /// called when a connection has run what it read, with the messages for `current` appended to `reply`.
    package func sendBroadcastInvalidations(current: ClientSession?, reply: inout ByteBuffer) {
        let list = tracking.pendingBroadcastInvalidations()
        guard !list.isEmpty else { return }
        send(list, current: current, reply: &reply, replyStart: reply.writerIndex)
    }

    /// Sends the keys expiry and eviction removed outside any command (the sweeper's), and, when the table
    /// holds more than `tableLimit` keys, invalidates the excess as Redis's `trackingLimitUsedSlots` does.
    package func sendBackgroundInvalidations(tableLimit: Int) {
        guard tracking.isActive else { return }
        var unused = ByteBuffer()
        sendInvalidations(modified: [], flushed: false, current: nil, reply: &unused, replyStart: 0)
        sendBroadcastInvalidations(current: nil, reply: &unused)
        let excess = tracking.keysOverLimit(tableLimit)
        if !excess.isEmpty {
            send(tracking.invalidations(modified: excess, flushed: false, origin: nil, broadcast: false),
                 current: nil, reply: &unused, replyStart: 0)
        }
    }

    private func send(
        _ list: [TrackingTable.Invalidation], current: ClientSession?, reply: inout ByteBuffer, replyStart: Int
    ) {
        guard !list.isEmpty else { return }
        var before = ByteBuffer()
        for invalidation in list {
            let tracker = invalidation.session
            let ownCommand = tracker === current
            var payload = ByteBuffer()
            if let keys = invalidation.keys {
                payload.writeRESPArrayHeader(keys.count)
                for key in keys { payload.writeRESPBulkString(key) }
            } else {
                payload.writeRESPNull(tracker.protocolVersion)
            }
            var destination = tracker
            if invalidation.redirect != 0 {
                guard let target = clients.session(id: invalidation.redirect) else {
                    tracking.markBrokenRedirect(tracker.id)
                    guard tracker.protocolVersion == .resp3 else { continue }
                    let redirect = invalidation.redirect
                    let broken: @Sendable (ClientSession, inout ByteBuffer) -> Void = { _, out in
                        out.writeRESPPushHeader(2, .resp3)
                        out.writeRESPBulkString("tracking-redir-broken")
                        out.writeRESPInteger(redirect)
                    }
                    if ownCommand && tracker.runningTransaction {
                        broken(tracker, &tracker.messagesAfterTransaction)
                    } else if ownCommand {
                        broken(tracker, &reply)
                    } else {
                        tracker.outlet?.send(broken)
                    }
                    continue
                }
                destination = target
            }
            let redirected = invalidation.redirect != 0
            let message = payload
            let write: @Sendable (ClientSession, inout ByteBuffer) -> Void = { session, out in
                Self.writeInvalidation(message, to: session, redirected: redirected, into: &out)
            }
            if destination === current {
                if destination.runningTransaction {
                    // Not inside EXEC's array: after it, as Redis holds them back.
                    write(destination, &destination.messagesAfterTransaction)
                } else if ownCommand {
                    write(destination, &reply)
                } else {
                    write(destination, &before)
                }
            } else {
                destination.outlet?.send(write)
            }
        }
        if before.readableBytes > 0 {
            // Put the messages in front of the command's reply.
            var replyBytes = ByteBuffer()
            replyBytes.writeImmutableBuffer(reply.getSlice(at: replyStart, length: reply.writerIndex - replyStart)!)
            reply.moveWriterIndex(to: replyStart)
            reply.writeBuffer(&before)
            reply.writeBuffer(&replyBytes)
        }
    }

    /// An invalidation as `session` receives it: a RESP3 push, or in RESP2 a message on
    /// `__redis__:invalidate` when it is subscribed and receives it as a redirect target; nothing otherwise.
    static func writeInvalidation(_ payload: ByteBuffer, to session: ClientSession, redirected: Bool, into out: inout ByteBuffer) {
        if session.protocolVersion == .resp3 {
            out.writeRESPPushHeader(2, .resp3)
            out.writeStaticString("$10\r\ninvalidate\r\n")
        } else if redirected && session.modes.contains(.subscribed) {
            out.writeStaticString("*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n")
        } else {
            return
        }
        out.writeImmutableBuffer(payload)
    }
}
