import CachedTLS
import Logging
import NIOCore
import RESP

/// CONFIG GET / SET / RESETSTAT / REWRITE.
package enum ConfigCommands {
    /// Parameters whose values are secrets: SLOWLOG shows `(redacted)` for them, as Redis does.
    static let sensitiveParameters: Set<String> = ["requirepass", "tls-key-file-pass", "tls-client-key-file-pass"]

    /// CONFIG SET's secrets: the values of the ``sensitiveParameters`` (as Redis, which does not log them).
    static func setSecrets(_ arguments: Arguments) -> Set<Int> {
        var secrets: Set<Int> = []
        for j in stride(from: 2, to: arguments.count - 1, by: 2)
        where sensitiveParameters.contains(arguments.string(j).lowercased()) {
            secrets.insert(j + 1)
        }
        return secrets
    }

    /// CONFIG GET pattern ...
    static func get(_ c: inout CommandContext) {
        let a = c.arguments
        let patterns = (2..<a.count).map { a.string($0) }
        let pairs = c.server.config.configGet(patterns)
        c.reply.writeRESPMapHeader(pairs.count, c.version)
        for (name, value) in pairs {
            c.bulk(name)
            c.bulk(value)
        }
    }

    /// CONFIG SET name value ...: all the changes or none.
    static func set(_ c: inout CommandContext) {
        let a = c.arguments
        guard a.count % 2 == 0 else { return c.error(ReplyError.syntax) }
        let changes = stride(from: 2, to: a.count, by: 2).map { (name: a.string($0), value: a.string($0 + 1)) }
        do throws(ConfigurationDirectiveError) {
            let logger = c.server.logger
            try c.server.updateConfiguration { config throws(ConfigurationDirectiveError) in
                var updated = config
                let protected = config.enableProtectedConfigs
                try updated.configSet(
                    changes, allowProtected: protected == .yes || (protected == .local && c.session.isLocal))
                try apply(updated, over: config, changes, c.server, logger: logger)
                config = updated
            }
            if changes.contains(where: { ["maxmemory", "maxmemory-policy"].contains($0.name.lowercased()) }) {
                c.server.warnIfMaxMemoryTooSmall()
                c.server.refreshMemoryOverheadIfOwn()
                // Which databases hold keys, for eviction to choose among them from the first write on.
                c.server.keyspace.refreshDatabasesInUse()
                // As Redis: a lower limit evicts at once, not at the next write.
                if c.server.evictToLimit(now: c.now) == .nothingToEvict {
                    c.server.logger.warning(
                        "maxmemory is below the memory in use and the policy cannot evict enough: writes that need memory are refused until it is raised",
                        metadata: ["maxmemory": "\(c.server.config.maxMemory)", "maxmemory-policy": "\(c.server.config.maxMemoryPolicy.rawValue)"])
                }
            }
            c.ok()
        } catch {
            c.error(error.configSetReply)
        }
    }

    static func resetStatistics(_ c: inout CommandContext) {
        ServerCommands.resetStatistics(c.server)
        c.ok()
    }

    static func rewrite(_ c: inout CommandContext) {
        let file = c.server.config.configFile
        if file.isEmpty { return c.error("ERR The server is running without a config file") }
        c.error("ERR CONFIG REWRITE is not supported by this server: make the change in \(file) too")
    }

    static func help(_ c: inout CommandContext) {
        ConnectionCommands.help(&c, [
            "GET <pattern>", "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>", "    Set the configuration <directive> to <value>.",
            "RESETSTAT", "    Reset statistics reported by the INFO command.",
            "REWRITE", "    Rewrite the configuration file.",
        ])
    }

    /// What CONFIG SET does beyond storing values, as Redis's apply functions: the open files limit for
    /// `maxclients`, the TLS settings for `tls-*`, the listeners for `port`, `bind` and `tls-port`.
    private enum Effect {
        case openFilesLimit, tls, listeners
    }

    /// Puts `updated` (the configuration after `changes`) in force over `previous`, as Redis applies a CONFIG
    /// SET: each effect once, in the order of the first of its parameters given. When one fails, those done are
    /// undone (the server listens and serves TLS as before) and the whole CONFIG SET is refused, naming the
    /// parameter of the one that failed.
    private static func apply(
        _ updated: ServerConfiguration, over previous: ServerConfiguration,
        _ changes: [(name: String, value: String)], _ server: ServerState, logger: Logger
    ) throws(ConfigurationDirectiveError) {
        var effects: [Effect] = []
        for change in changes {
            guard let name = ConfigurationDirective.named(change.name)?.name else { continue }
            let wanted: [Effect]
            switch name {
            case "maxclients": wanted = [.openFilesLimit]
            case "port", "bind": wanted = [.listeners]
            // A new TLS port serves the TLS settings loaded for it.
            case "tls-port": wanted = [.tls, .listeners]
            case _ where ConfigurationDirective.tlsSettings.contains(name): wanted = [.tls]
            default: wanted = []
            }
            for effect in wanted where !effects.contains(effect) {
                // Loaded before the listeners change when a TLS port may open (`port` given before `tls-port`).
                if effect == .tls && name == "tls-port", let listeners = effects.firstIndex(of: .listeners) {
                    effects.insert(.tls, at: listeners)
                } else {
                    effects.append(effect)
                }
            }
        }
        let listenersChange =
            updated.port != previous.port || updated.bind != previous.bind || updated.tlsPort != previous.tlsPort
        let previousTLS = server.tlsContext
        var done: [Effect] = []
        do throws(ConfigurationDirectiveError) {
            for effect in effects {
                switch effect {
                case .openFilesLimit:
                    if updated.maxClients > previous.maxClients {
                        try raiseOpenFilesLimit(for: updated.maxClients, logger: logger)
                    }
                case .tls:
                    // A connection accepted meanwhile on an existing TLS port keeps what it started with.
                    if let tls = try loadTLS(updated, changes, server) { server.tlsContext = tls }
                case .listeners:
                    if listenersChange { try listen(as: updated, changes, server) }
                }
                done.append(effect)
            }
        } catch {
            if case .invalidValue(let name, _) = error {
                logger.warning(
                    "Failed applying new configuration. Possibly related to new \(name) setting. Restoring previous settings.")
            }
            for effect in done.reversed() {
                switch effect {
                case .openFilesLimit:
                    break  // a higher open files limit does no harm (Redis keeps it too)
                case .tls:
                    server.tlsContext = previousTLS
                case .listeners:
                    if listenersChange && !server.listen(as: previous) {
                        logger.warning("Could not listen again where the server listened before the refused CONFIG SET")
                    }
                }
            }
            throw error
        }
    }

    /// As Redis: CONFIG SET of `port`, `tls-port` or `bind` listens there at once; when it cannot, the whole
    /// CONFIG SET is refused, naming the first of them in the order given.
    private static func listen(
        as config: ServerConfiguration, _ changes: [(name: String, value: String)], _ server: ServerState
    ) throws(ConfigurationDirectiveError) {
        guard !server.listen(as: config) else { return }
        let name = firstChanged(changes, among: ["port", "tls-port", "bind"]) ?? "port"
        throw .invalidValue(
            directive: name,
            reason: name == "bind" ? "Failed to bind to specified addresses." : "Unable to listen on this port. Check server logs.")
    }

    /// As Redis: when the server uses TLS (`tls-port` set) and CONFIG SET changes a `tls-*` setting, or sets
    /// `tls-port` while none were loaded, the TLS settings are loaded again (new connections use them); when they
    /// cannot be, the whole CONFIG SET is refused. Nil when nothing was to be loaded.
    private static func loadTLS(
        _ config: ServerConfiguration, _ changes: [(name: String, value: String)], _ server: ServerState
    ) throws(ConfigurationDirectiveError) -> TLSContext? {
        guard config.usesTLS else { return nil }
        // Loaded again when a tls-* directive is set (even to the same file: a certificate replaced in place),
        // and when those loaded last are not the ones now configured (changed while no TLS port was open).
        let settingChanged = firstChanged(changes, among: ConfigurationDirective.tlsSettings)
        guard settingChanged != nil || server.tlsContext?.configuration != config.tlsServerSettings else { return nil }
        do {
            return try config.makeTLSContext()
        } catch {
            let name = firstChanged(changes, among: ConfigurationDirective.tlsSettings.union(["tls-port"])) ?? "tls-port"
            server.logger.warning("\(error)")
            throw .invalidValue(directive: name, reason: "Unable to update TLS configuration. Check server logs.")
        }
    }

    /// The canonical name of the first directive of `changes`, in the order given, that is one of `names`.
    private static func firstChanged(_ changes: [(name: String, value: String)], among names: Set<String>) -> String? {
        changes.lazy.compactMap { ConfigurationDirective.named($0.name)?.name }.first { names.contains($0) }
    }

    /// As Redis does when CONFIG SET raises maxclients: raises the open files limit to fit, and refuses the
    /// change (naming the most the system allows) when it cannot.
    private static func raiseOpenFilesLimit(for maxClients: Int, logger: Logger) throws(ConfigurationDirectiveError) {
        let outcome = OpenFilesLimit.adjust(maxClients: maxClients)
        guard outcome.maxClients >= maxClients else {
            // The startup messages ("maxclients has been reduced to ...") would not be true here: the change is
            // refused and the previous value stays.
            logger.warning(
                "CONFIG SET maxclients refused: the system allows open files for at most \(outcome.maxClients) clients; keeping the previous settings",
                metadata: ["requested": "\(maxClients)"])
            throw .invalidValue(
                directive: "maxclients",
                reason: "The operating system is not able to handle the specified number of clients, try with \(outcome.maxClients)")
        }
        for message in outcome.messages {
            if outcome.raised { logger.notice("\(message)") } else { logger.warning("\(message)") }
        }
    }
}
