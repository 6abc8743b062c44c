import Logging
import Synchronization

/// Cross-protocol scripting: any web page can make a browser send an HTTP request to `127.0.0.1:6379`. RESP's
/// inline form reads each line of it as a command (`POST / HTTP/1.1`, `Host: …`, then the body's lines), so a
/// request whose body is `FLUSHALL` would run it. As Redis does, a connection whose command is named `POST` or
/// `Host:` (any case) is closed at once: nothing after it runs and no reply still waiting to be sent goes out.
///
/// Neither name is a command, so the check runs only when a command is not found: the path of every real
/// command does not pay for it.
package final class CrossProtocolGuard: Sendable {
    /// Seconds since the epoch of the last warning logged; Redis logs at most one a minute.
    private let lastWarning = Atomic<Int64>(Int64.min / 2)

    package init() {}

    /// Whether `name` is `POST` or `Host:`, compared without regard to case.
    package static func isHTTPCommandName(_ name: UnsafeRawBufferPointer) -> Bool {
        switch name.count {
        case 4: return matches(name, "post")
        case 5: return matches(name, "host:")
        default: return false
        }
    }

    private static func matches(_ name: UnsafeRawBufferPointer, _ lowercase: StaticString) -> Bool {
        lowercase.withUTF8Buffer { expected in
            for i in 0..<expected.count {
                let byte = name[i]
                let lowered = byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
                if lowered != expected[i] { return false }
            }
            return true
        }
    }

    /// Logs Redis's warning, at most once a minute.
    package func warn(logger: Logger, client: String, nowMilliseconds: Int64) {
        let now = nowMilliseconds / 1000
        let last = lastWarning.load(ordering: .relaxed)
        guard abs(now - last) > 60, lastWarning.compareExchange(expected: last, desired: now, ordering: .relaxed).exchanged
        else { return }
        logger.warning(
            "Possible SECURITY ATTACK detected. It looks like somebody is sending POST or Host: commands to Redis. This is likely due to an attacker attempting to use Cross Protocol Scripting to compromise your Redis instance. Connection aborted.",
            metadata: ["client": "\(client)"])
    }
}
