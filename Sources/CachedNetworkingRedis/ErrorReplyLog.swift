import CachedNetworking
import Logging
import Synchronization

/// Where a store's error replies become ``CacheStoreError/Kind/server`` errors, and where the server's ACL
/// refusals are logged: a user whose ACL refuses a command the store sends (`NOPERM`: the command, or the keys of
/// a namespace the user may not touch) gets that reply on every such call. Each call fails like any other store
/// error (the cache fails open: the request goes to the origin); the log says so once per command name and store,
/// at warning level, rather than once per request.
final class ErrorReplyLog: Sendable {
    private let logger: Logger
    /// The user the store authenticates as, for the warning.
    private let user: String
    /// Command names already warned about.
    private let warned = Mutex<Set<String>>([])

    init(logger: Logger, username: String?) {
        self.logger = logger
        self.user = username ?? "default"
    }

    /// `text`, the error reply to `command`, as a ``CacheStoreError/Kind/server``, logged first if it is the first
    /// `NOPERM` for the command's name.
    func error(_ text: String, answering command: RESPCommand) -> CacheStoreError {
        noteRefusal(text, answering: command)
        return CacheStoreError(.server, text)
    }

    /// Logs the first `NOPERM` for each command's name among `replies`, the replies to `commands` in order (which
    /// the caller reads as it would without this).
    func note(_ replies: [RESPReply], answering commands: [RESPCommand]) {
        for (reply, command) in zip(replies, commands) {
            if case .error(let text) = reply { noteRefusal(text, answering: command) }
        }
    }

    /// Command names warned about so far (for tests).
    var warnedCommands: Set<String> { warned.withLock { $0 } }

    private func noteRefusal(_ text: String, answering command: RESPCommand) {
        guard text.hasPrefix("NOPERM") else { return }
        let name = command.name
        guard warned.withLock({ $0.insert(name).inserted }) else { return }
        logger.warning(
            "the server's ACL refuses a command the cache store sends: such calls fail, and the cache goes to the origin (logged once per command)",
            metadata: ["command": "\(name)", "user": "\(user)", "reply": "\(text)"])
    }
}
