import NIOCore
import RESP

/// Every error reply the server sends, in Redis 7.0's exact wording. Clients match on these strings.
package enum ReplyError {
    package static let syntax: StaticString = "ERR syntax error"
    package static let notInteger: StaticString = "ERR value is not an integer or out of range"
    package static let notFloat: StaticString = "ERR value is not a valid float"
    package static let overflow: StaticString = "ERR increment or decrement would overflow"
    package static let noSuchKey: StaticString = "ERR no such key"
    package static let dbIndexOutOfRange: StaticString = "ERR DB index is out of range"
    package static let invalidDBIndex: StaticString = "ERR invalid DB index"
    package static let sameObject: StaticString = "ERR source and destination objects are the same"
    package static let busyKey: StaticString = "BUSYKEY Target key name already exists."
    package static let wrongType: StaticString = "WRONGTYPE Operation against a key holding the wrong kind of value"
    package static let stringTooLong: StaticString = "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
    package static let outOfMemory: StaticString = "OOM command not allowed when used memory > 'maxmemory'."
    package static let noAuth: StaticString = "NOAUTH Authentication required."
    /// Redis's reply to a write while its background saves fail (`stop-writes-on-bgsave-error`), word for word:
    /// clients and tools recognize it.
    package static let backgroundSaveFailed: StaticString =
        "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error."
    package static let wrongPass: StaticString =
        "WRONGPASS invalid username-password pair or user is disabled."
    package static let authNotConfigured: StaticString =
        "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"
    package static let expireOptionsNXXX: StaticString =
        "ERR NX and XX, GT or LT options at the same time are not compatible"
    package static let expireOptionsGTLT: StaticString = "ERR GT and LT options at the same time are not compatible"
    package static let noProto: StaticString = "NOPROTO unsupported protocol version"
    /// `getIntFromObjectOrReply`'s error for an integer beyond 32 bits (SELECT, MOVE).
    package static let notInt32: StaticString =
        "ERR value is out of range, value must between -2147483648 and 2147483647"

    /// A RESP2 client with subscriptions ran a command other than (P)SUBSCRIBE, (P)UNSUBSCRIBE, PING, QUIT
    /// or RESET (`name` is the full name, `client|id` for a subcommand).
    package static func subscribedContext(_ name: String) -> String {
        "ERR Can't execute '\(name)': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
    }

    /// `ERR wrong number of arguments for 'name' command`
    package static func wrongArity(_ name: String) -> String {
        "ERR wrong number of arguments for '\(name)' command"
    }

    /// `ERR invalid expire time in 'name' command`
    package static func invalidExpire(_ name: String) -> String {
        "ERR invalid expire time in '\(name)' command"
    }

    /// `ERR unknown subcommand 'x'. Try NAME HELP.`, the subcommand as Redis prints it (`%.128s`).
    /// `command` is the name the client typed (a renamed container's new name, as Redis says it).
    package static func unknownSubcommand(_ sub: UnsafeRawBufferPointer, of command: String) -> [UInt8] {
        quoting("ERR unknown subcommand '", sub, limit: 128, "'. Try \(command.uppercased()) HELP.")
    }

    /// `ERR unknown subcommand or wrong number of arguments for 'x'. Try NAME HELP.`: Redis's answer to a known
    /// subcommand with more arguments than it takes, when its arity lets them through (CLIENT PAUSE, ACL CAT...).
    package static func subcommandSyntax(_ sub: UnsafeRawBufferPointer, of command: String) -> [UInt8] {
        quoting(
            "ERR unknown subcommand or wrong number of arguments for '", sub, limit: 128,
            "'. Try \(command.uppercased()) HELP.")
    }

    /// `prefix`, a client's argument as C's `%s` (or `%.Ns`) prints it — its bytes up to a NUL, whatever they
    /// are — and `suffix`: how Redis's messages quote what a client sent.
    package static func quoting(
        _ prefix: String, _ argument: UnsafeRawBufferPointer, limit: Int = .max, _ suffix: String = ""
    ) -> [UInt8] {
        Array(prefix.utf8) + cString(argument, limit: limit) + Array(suffix.utf8)
    }

    /// `ERR unknown command 'x', with args beginning with: 'a' 'b' `, as Redis previews the arguments:
    /// each one as C prints a string (cut at a NUL byte), the whole preview about 128 bytes.
    package static func unknownCommand(_ arguments: Arguments) -> [UInt8] {
        var preview: [UInt8] = []
        var i = 1
        while i < arguments.count && preview.count < 128 {
            preview += Array("'".utf8) + cString(arguments[i], limit: 128 - preview.count) + Array("' ".utf8)
            i += 1
        }
        return Array("ERR unknown command '".utf8) + cString(arguments[0], limit: 128)
            + Array("', with args beginning with: ".utf8) + preview
    }

    /// Bytes as C's `%.Ns` prints them: cut at a NUL byte and at `limit` bytes.
    static func cString(_ bytes: UnsafeRawBufferPointer, limit: Int) -> [UInt8] {
        var end = 0
        while end < bytes.count && end < limit && bytes[end] != 0 { end += 1 }
        return Array(bytes[0..<end])
    }
}
