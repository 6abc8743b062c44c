#if canImport(Glibc)
import Glibc
#endif

/// A blocking TCP connection to another server, every step bounded by a deadline: MIGRATE's link to its
/// target. As in Redis, MIGRATE holds its event loop while it talks to the target.
final class OutboundConnection {
    /// Which step failed (or timed out), as MIGRATE reports it.
    enum Failure: Error {
        case connecting
        case writing
        case reading
    }

    private let descriptor: CInt
    /// Bytes read and not consumed yet.
    private var received: [UInt8] = []

    /// Connects to `host` (a name or an address) and `port`, waiting until `deadline` (monotonic nanoseconds).
    /// A connection the target refuses is reported when it is written to, as Redis reports it.
    init(host: String, port: Int, deadline: Int) throws(Failure) {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        guard (0...65535).contains(port), getaddrinfo(host, String(port), &hints, &found) == 0, let address = found else {
            throw .connecting
        }
        defer { freeaddrinfo(found) }
        let descriptor = socket(
            address.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue),
            0)
        guard descriptor >= 0 else { throw .connecting }
        self.descriptor = descriptor
        if connect(descriptor, address.pointee.ai_addr, address.pointee.ai_addrlen) != 0 && errno != EINPROGRESS {
            return  // refused at once: the first write fails
        }
        var one: CInt = 1
        setsockopt(descriptor, CInt(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<CInt>.size))
        guard Self.wait(descriptor, for: Int16(POLLOUT), until: deadline) else {
            close(descriptor)
            throw .connecting
        }
    }

    deinit { close(descriptor) }

    /// Sends all of `bytes` by `deadline`.
    func write(_ bytes: [UInt8], deadline: Int) throws(Failure) {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { send(descriptor, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
            if n > 0 {
                sent += n
            } else if n < 0 && (errno == EAGAIN || errno == EINTR) {
                guard Self.wait(descriptor, for: Int16(POLLOUT), until: deadline) else { throw .writing }
            } else {
                throw .writing
            }
        }
    }

    /// The next line the target sends (a simple reply: `+OK`, `-ERR ...`), without its CRLF, by `deadline`.
    func readLine(deadline: Int) throws(Failure) -> [UInt8] {
        while true {
            if let end = received.firstIndex(of: UInt8(ascii: "\n")) {
                var line = Array(received[..<end])
                received.removeFirst(end + 1)
                if line.last == UInt8(ascii: "\r") { line.removeLast() }
                return line
            }
            guard received.count < 64 * 1024 else { throw .reading }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let n = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                received += chunk[..<n]
            } else if n < 0 && (errno == EAGAIN || errno == EINTR) {
                guard Self.wait(descriptor, for: Int16(POLLIN), until: deadline) else { throw .reading }
            } else {
                throw .reading
            }
        }
    }

    /// Whether `descriptor` is ready for `events` before `deadline` (monotonic nanoseconds).
    private static func wait(_ descriptor: CInt, for events: Int16, until deadline: Int) -> Bool {
        var entry = pollfd(fd: descriptor, events: events, revents: 0)
        while true {
            let left = (deadline - monotonicNanoseconds()) / 1_000_000
            guard left > 0 else { return false }
            let ready = poll(&entry, 1, Int32(min(left, Int(Int32.max))))
            if ready > 0 { return true }
            if ready == 0 || errno != EINTR { return false }
        }
    }
}
