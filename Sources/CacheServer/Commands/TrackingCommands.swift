import CacheCore
import NIOCore
import RESP

/// CLIENT TRACKING, CLIENT CACHING and CLIENT TRACKINGINFO: server-assisted client-side caching.
extension ConnectionCommands {
    /// `CLIENT TRACKING ON|OFF [REDIRECT id] [BCAST] [PREFIX p ...] [OPTIN] [OPTOUT] [NOLOOP]`, with Redis
    /// 7.0's checks in its order.
    static func clientTracking(_ c: inout CommandContext) {
        let a = c.arguments
        var options = TrackingOptions()
        var prefixes: [[UInt8]] = []
        var j = 3
        while j < a.count {
            let more = a.count - 1 - j
            if a.matches(j, "redirect") && more > 0 {
                j += 1
                guard options.redirect == 0 else {
                    return c.error("ERR A client can only redirect to a single other client")
                }
                guard let id = c.integerArgument(j) else { return }
                guard c.server.clients.session(id: id) != nil else {
                    return c.error("ERR The client ID you want redirect to does not exist")
                }
                options.redirect = id
            } else if a.matches(j, "bcast") {
                options.bcast = true
            } else if a.matches(j, "optin") {
                options.optin = true
            } else if a.matches(j, "optout") {
                options.optout = true
            } else if a.matches(j, "noloop") {
                options.noloop = true
            } else if a.matches(j, "prefix") && more > 0 {
                j += 1
                prefixes.append(a.bytes(j))
            } else {
                return c.error(ReplyError.syntax)
            }
            j += 1
        }
        if a.matches(2, "off") {
            if c.session.tracking != nil {
                c.server.tracking.disable(c.session.id)
                c.session.tracking = nil
                c.session.cachingGiven = false
            }
            return c.ok()
        }
        guard a.matches(2, "on") else { return c.error(ReplyError.syntax) }
        let current = c.session.tracking
        if !options.bcast && !prefixes.isEmpty {
            return c.error("ERR PREFIX option requires BCAST mode to be enabled")
        }
        if let current, current.bcast != options.bcast {
            return c.error(
                "ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode."
            )
        }
        if options.bcast && (options.optin || options.optout) {
            return c.error("ERR OPTIN and OPTOUT are not compatible with BCAST")
        }
        if options.optin && options.optout {
            return c.error("ERR You can't specify both OPTIN mode and OPTOUT mode")
        }
        if let current, (options.optin && current.optout) || (options.optout && current.optin) {
            return c.error(
                "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode."
            )
        }
        if options.bcast {
            guard let error = prefixCollision(prefixes, existing: current?.prefixes ?? []) else {
                // BCAST without PREFIX is the empty prefix: every key.
                let added = prefixes.isEmpty ? [[]] : prefixes
                options.prefixes = Array(Set((current?.prefixes ?? []) + added)).sorted { $0.lexicographicallyPrecedes($1) }
                return enableTracking(&c, options)
            }
            return c.error(error)
        }
        enableTracking(&c, options)
    }

    private static func enableTracking(_ c: inout CommandContext, _ options: TrackingOptions) {
        c.session.tracking = options
        c.server.tracking.enable(c.session, options)
        c.ok()
    }

    /// Redis's `checkPrefixCollisionsOrReply`: two prefixes collide when one starts with the other, since both
    /// would report the same keys.
    private static func prefixCollision(_ prefixes: [[UInt8]], existing: [[UInt8]]) -> String? {
        func overlap(_ x: [UInt8], _ y: [UInt8]) -> Bool { x.starts(with: y) || y.starts(with: x) }
        func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }
        for (i, prefix) in prefixes.enumerated() {
            if let old = existing.first(where: { overlap($0, prefix) }) {
                return "ERR Prefix '\(text(prefix))' overlaps with an existing prefix '\(text(old))'. Prefixes for a single client must not overlap."
            }
            if let other = prefixes[(i + 1)...].first(where: { overlap($0, prefix) }) {
                return "ERR Prefix '\(text(prefix))' overlaps with another provided prefix '\(text(other))'. Prefixes for a single client must not overlap."
            }
        }
        return nil
    }

    /// `CLIENT CACHING YES|NO`: whether the next command's keys are tracked, in OPTIN or OPTOUT mode.
    static func clientCaching(_ c: inout CommandContext) {
        guard let options = c.session.tracking else {
            return c.error(
                "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled"
            )
        }
        if c.arguments.matches(2, "yes") {
            guard options.optin else {
                return c.error("ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.")
            }
        } else if c.arguments.matches(2, "no") {
            guard options.optout else {
                return c.error("ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.")
            }
        } else {
            return c.error(ReplyError.syntax)
        }
        c.session.cachingGiven = true
        c.ok()
    }

    /// `CLIENT TRACKINGINFO`: a map of `flags` (a set), `redirect` and `prefixes`.
    static func trackingInfo(_ c: inout CommandContext) {
        let options = c.session.tracking
        var flags = [options == nil ? "off" : "on"]
        if let options {
            if options.bcast { flags.append("bcast") }
            if options.optin { flags.append("optin") }
            if options.optin && c.session.cachingGiven { flags.append("caching-yes") }
            if options.optout { flags.append("optout") }
            if options.optout && c.session.cachingGiven { flags.append("caching-no") }
            if options.noloop { flags.append("noloop") }
            if c.server.tracking.hasBrokenRedirect(c.session.id) { flags.append("broken_redirect") }
        }
        c.reply.writeRESPMapHeader(3, c.version)
        c.bulk("flags")
        c.reply.writeRESPSetHeader(flags.count, c.version)
        for flag in flags { c.bulk(flag) }
        c.bulk("redirect")
        c.integer(options?.redirect ?? -1)
        c.bulk("prefixes")
        let prefixes = options?.prefixes ?? []
        c.arrayHeader(prefixes.count)
        for prefix in prefixes { c.reply.writeRESPBulkString(prefix) }
    }
}
