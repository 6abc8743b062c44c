import CacheCore
import NIOCore
import RESP

/// Pub/sub: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, PUBLISH, PUBSUB.
package enum PubSubCommands {
    static func subscribe(_ c: inout CommandContext) { subscribeGeneric(&c, patterns: false) }
    static func psubscribe(_ c: inout CommandContext) { subscribeGeneric(&c, patterns: true) }
    static func unsubscribe(_ c: inout CommandContext) { unsubscribeGeneric(&c, patterns: false) }
    static func punsubscribe(_ c: inout CommandContext) { unsubscribeGeneric(&c, patterns: true) }

    /// One confirmation per channel: `subscribe`, the channel, and the client's subscriptions now (a push in
    /// RESP3).
    static func subscribeGeneric(_ c: inout CommandContext, patterns: Bool) {
        for i in 1..<c.arguments.count {
            let name = c.arguments.bytes(i)
            var added = false
            c.session.updateSubscriptions { channels, patternSet in
                added = patterns ? patternSet.insert(name).inserted : channels.insert(name).inserted
            }
            if added {
                if patterns { c.session.notePatternSubscribed(name) }
                c.server.pubsub.add(c.session, to: name, isPattern: patterns)
            }
            confirm(&c, patterns ? "psubscribe" : "subscribe", name)
        }
    }

    /// With names, one confirmation for each; without, one for each subscription the client had (patterns in
    /// the order subscribed, as Redis 7.0; channels, which Redis keeps unordered, in byte order), or a single
    /// one with a null name when it had none.
    static func unsubscribeGeneric(_ c: inout CommandContext, patterns: Bool) {
        let kind: StaticString = patterns ? "punsubscribe" : "unsubscribe"
        var names: [[UInt8]]
        if c.arguments.count > 1 {
            names = (1..<c.arguments.count).map { c.arguments.bytes($0) }
        } else {
            names = patterns
                ? c.session.patternsInOrder : Array(c.session.channels).sorted { $0.lexicographicallyPrecedes($1) }
            if names.isEmpty {
                confirm(&c, kind, nil)
                return
            }
        }
        for name in names {
            var removed = false
            c.session.updateSubscriptions { channels, patternSet in
                removed = (patterns ? patternSet.remove(name) : channels.remove(name)) != nil
            }
            if removed {
                if patterns { c.session.notePatternUnsubscribed(name) }
                c.server.pubsub.remove(c.session.id, channels: patterns ? [] : [name], patterns: patterns ? [name] : [])
            }
            confirm(&c, kind, name)
        }
    }

    private static func confirm(_ c: inout CommandContext, _ kind: StaticString, _ name: [UInt8]?) {
        c.reply.writeRESPPushHeader(3, c.version)
        c.reply.writeRESPBulkString(kind.description)
        if let name { c.reply.writeRESPBulkString(name) } else { c.null() }
        let count = c.session.subscriptionCount
        c.integer(count.channels + count.patterns)
        // As Redis: confirmations are sent even while CLIENT REPLY is OFF or SKIP.
        c.sentRegardlessUntil = c.reply.writerIndex
    }

    static func publish(_ c: inout CommandContext) {
        let receivers = c.server.pubsub.publish(
            channel: c.arguments[1], message: c.arguments[2], current: c.session, reply: &c.reply)
        // The publisher's own messages (subscribed in RESP3) go out whatever CLIENT REPLY says; the count does not.
        c.sentRegardlessUntil = c.reply.writerIndex
        c.integer(receivers)
    }

    /// PUBSUB CHANNELS [pattern]
    static func channels(_ c: inout CommandContext) {
        let a = c.arguments
        // Its arity lets more arguments through than it takes.
        guard a.count <= 3 else { return c.reply.writeRESPError(bytes: ReplyError.subcommandSyntax(a[1], of: c.arguments.string(0))) }
        let names = c.server.pubsub.activeChannels(matching: a.count == 3 ? a.bytes(2) : nil)
        c.arrayHeader(names.count)
        for name in names { c.reply.writeRESPBulkString(name) }
    }

    /// PUBSUB NUMSUB [channel ...]
    static func numberOfSubscribers(_ c: inout CommandContext) {
        let a = c.arguments
        c.arrayHeader((a.count - 2) * 2)
        for i in 2..<a.count {
            c.bulk(a[i])
            c.integer(c.server.pubsub.subscriberCount(a.bytes(i)))
        }
    }

    /// PUBSUB NUMPAT
    static func numberOfPatterns(_ c: inout CommandContext) {
        c.integer(c.server.pubsub.counts.patterns)
    }

    static func help(_ c: inout CommandContext) {
        ConnectionCommands.help(&c, [
            "CHANNELS [<pattern>]",
            "    Return the currently active channels matching a <pattern> (default: '*').",
            "NUMPAT", "    Return number of subscriptions to patterns.",
            "NUMSUB [<channel> ...]",
            "    Return the number of subscribers for the specified channels, excluding",
            "    pattern subscriptions(default: no channels).",
        ])
    }
}
