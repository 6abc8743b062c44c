import Glibc

/// Tells systemd how the service is doing, as `sd_notify(3)` does: one datagram per message, sent to the
/// `AF_UNIX` socket named by `$NOTIFY_SOCKET` (a path, or an abstract-namespace name written `@name`).
///
/// With `Type=notify`, systemd considers the service started when `READY=1` arrives, shows `STATUS=` lines in
/// `systemctl status`, and knows a stop is under way after `STOPPING=1`.
public struct SystemdNotifier: Sendable {
    /// The socket address as `$NOTIFY_SOCKET` gives it.
    public let address: String

    /// A notifier for `address` (`/run/systemd/notify`, or `@name` for the abstract namespace).
    public init(address: String) {
        self.address = address
    }

    /// The notifier systemd asked for through `$NOTIFY_SOCKET`, or nil when it is not set (not started by
    /// systemd with `Type=notify`).
    public static func fromEnvironment() -> SystemdNotifier? {
        guard let value = getenv("NOTIFY_SOCKET"), value.pointee != 0 else { return nil }
        return SystemdNotifier(address: String(cString: value))
    }

    /// Sends `message` (lines such as `READY=1\nSTATUS=...`). Returns nil on success, or why it failed.
    @discardableResult
    public func notify(_ message: String) -> String? {
        var bytes = Array(address.utf8)
        let abstract = bytes.first == UInt8(ascii: "@")
        if abstract { bytes[0] = 0 }
        guard bytes.first == UInt8(ascii: "/") || abstract else {
            return "unsupported NOTIFY_SOCKET address \(address) (only paths and @abstract names are)"
        }
        var socketAddress = sockaddr_un()
        socketAddress.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: socketAddress.sun_path)
        guard bytes.count < capacity else { return "NOTIFY_SOCKET path too long" }
        withUnsafeMutableBytes(of: &socketAddress.sun_path) { path in
            for (i, byte) in bytes.enumerated() { path[i] = byte }
        }
        // A path is counted with its terminating zero; an abstract name is exactly its bytes.
        let length = MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + bytes.count + (abstract ? 0 : 1)

        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return "socket: \(String(cString: strerror(errno)))" }
        defer { close(fd) }
        let payload = Array(message.utf8)
        let sent = withUnsafePointer(to: &socketAddress) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                payload.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), address, socklen_t(length)) }
            }
        }
        guard sent == payload.count else { return "sendto \(address): \(String(cString: strerror(errno)))" }
        return nil
    }
}
