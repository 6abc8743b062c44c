import NIOCore
import RESP

/// CONFIG GET / SET / RESETSTAT / REWRITE.
package enum ConfigCommands {
    static func config(_ c: inout CommandContext) {
        let a = c.arguments
        if a.matches(1, "get") && a.count >= 3 {
            let patterns = (2..<a.count).map { a.string($0) }
            let pairs = c.server.config.configGet(patterns)
            c.reply.writeRESPMapHeader(pairs.count, c.version)
            for (name, value) in pairs {
                c.bulk(name)
                c.bulk(value)
            }
        } else if a.matches(1, "set") && a.count >= 4 {
            guard a.count % 2 == 0 else { return c.error(ReplyError.syntax) }
            let changes = stride(from: 2, to: a.count, by: 2).map { (name: a.string($0), value: a.string($0 + 1)) }
            do throws(ConfigurationDirectiveError) {
                try c.server.updateConfiguration { config throws(ConfigurationDirectiveError) in
                    try config.configSet(changes)
                }
                c.ok()
            } catch {
                c.error(error.configSetReply)
            }
        } else if a.matches(1, "resetstat") && a.count == 2 {
            ServerCommands.resetStatistics(c.server)
            c.ok()
        } else if a.matches(1, "rewrite") && a.count == 2 {
            c.error("ERR The server is running without a config file")
        } else if a.matches(1, "help") && a.count == 2 {
            ConnectionCommands.help(&c, "CONFIG", [
                "GET <pattern>", "    Return parameters matching the glob-like <pattern> and their values.",
                "SET <directive> <value>", "    Set the configuration <directive> to <value>.",
                "RESETSTAT", "    Reset statistics reported by the INFO command.",
                "REWRITE", "    Rewrite the configuration file.",
            ])
        } else {
            ConnectionCommands.subcommandError(&c)
        }
    }
}
