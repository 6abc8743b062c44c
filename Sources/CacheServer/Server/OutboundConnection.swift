import Glibc
import NIOCore
import RESP

/// A blocking TCP connection to another server, every step bounded by a deadline: MIGRATE's link to its
/// target. As in Redis, MIGRATE holds its event loop while it talks to the target. Used by one thread at a time
/// (``MigrateSockets`` hands it out).
package final class OutboundConnection: @unchecked Sendable {
    /// Which step failed, as MIGRATE reports it, and whether it ran out of time (rather than the connection
    /// failing: the target closed it, or refused it).
    package struct Failure: Error, Equatable {
        package enum Step: Sendable { case connecting, writing, reading }
        package let step: Step
        package let timedOut: Bool

        static let connecting = Failure(step: .connecting, timedOut: false)
        static func writing(timedOut: Bool) -> Failure { Failure(step: .writing, timedOut: timedOut) }
        static func reading(timedOut: Bool) -> Failure { Failure(step: .reading, timedOut: timedOut) }
    }

    private let descriptor: CInt
    /// Bytes read and not decoded yet.
    private var received = ByteBuffer()
    /// The target's replies to AUTH, SELECT and RESTORE are short: anything much longer is not one, and is not
    /// buffered (MIGRATE holds its event loop meanwhile).
    private var decoder = RESPValueDecoder(
        limits: RESPDecodingLimits(maxDepth: 2, maxBulkLength: OutboundConnection.replyLimit, maxAggregateCount: 16,
            maxLineLength: OutboundConnection.replyLimit))
    private static let replyLimit = 64 * 1024

    /// Connects to `host` (a name or an address) and `port`, waiting until `deadline` (monotonic nanoseconds).
    /// Each address the name resolves to is tried, as Redis does; a connection that is under way is taken,
    /// and one the target then refuses is reported when it is written to, as Redis reports it.
    package init(host: String, port: Int, deadline: Int) throws(Failure) {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        guard (0...65535).contains(port), getaddrinfo(host, String(port), &hints, &found) == 0 else { throw .connecting }
        defer { freeaddrinfo(found) }
        var chosen: CInt = -1
        var next = found
        while let address = next, chosen < 0 {
            next = address.pointee.ai_next
            let candidate = socket(
                address.pointee.ai_family,
                Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard candidate >= 0 else { continue }
            if connect(candidate, address.pointee.ai_addr, address.pointee.ai_addrlen) == 0 || errno == EINPROGRESS {
                chosen = candidate
            } else {
                close(candidate)
            }
        }
        guard chosen >= 0 else { throw .connecting }
        // From here on, deinit closes the socket, whether or not this initializer throws.
        self.descriptor = chosen
        var one: CInt = 1
        setsockopt(chosen, CInt(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<CInt>.size))
        guard Self.wait(chosen, for: Int16(POLLOUT), until: deadline) != 0 else { throw .connecting }
    }

    deinit { close(descriptor) }

    /// Whether bytes the target sent are waiting here, read from the socket and not consumed.
    package var hasUnreadBytes: Bool { received.readableBytes > 0 }

    /// Whether the connection can start a new exchange: nothing unread, here or in the socket, and the target has
    /// not closed it (a kept connection the target dropped while it was unused).
    package func isQuiet() -> Bool {
        guard !hasUnreadBytes else { return false }
        var byte: UInt8 = 0
        let n = recv(descriptor, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)
    }

    /// Sends all of `bytes`, each part within `step` nanoseconds of the one before (as Redis allows its timeout
    /// per write). What the target answers meanwhile is read and kept, so that a target that stops reading
    /// while its replies wait does not stall the transfer.
    func write(_ bytes: UnsafeRawBufferPointer, step: Int) throws(Failure) {
        var sent = 0
        var deadline = monotonicNanoseconds() &+ step
        while sent < bytes.count {
            let n = send(descriptor, bytes.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL))
            if n > 0 {
                sent += n
                deadline = monotonicNanoseconds() &+ step
            } else if n < 0 && (errno == EAGAIN || errno == EINTR) {
                let ready = Self.wait(descriptor, for: Int16(POLLOUT) | Int16(POLLIN), until: deadline)
                guard ready != 0 else { throw .writing(timedOut: true) }
                if ready & Int16(POLLIN) != 0 {
                    do { try receive() } catch { throw .writing(timedOut: false) }
                }
            } else {
                throw .writing(timedOut: false)
            }
        }
    }

    /// The next reply the target sends (decoded by the RESP module's decoder), within `step` nanoseconds. A
    /// reply that is not valid RESP fails the read, as a closed connection does.
    func readReply(step: Int) throws(Failure) -> RESPValue {
        let deadline = monotonicNanoseconds() &+ step
        while true {
            do {
                if let reply = try decoder.decode(buffer: &received) { return reply }
            } catch {
                throw .reading(timedOut: false)
            }
            guard received.readableBytes < 2 * Self.replyLimit else { throw .reading(timedOut: false) }
            guard Self.wait(descriptor, for: Int16(POLLIN), until: deadline) != 0 else { throw .reading(timedOut: true) }
            try receive()
        }
    }

    /// Reads what the target has sent (without waiting) into ``received``.
    private func receive() throws(Failure) {
        // What was decoded is dropped once it is most of the buffer (a reply keeps its bytes alive by itself).
        if received.readerIndex > 0 && received.readerIndex >= received.readableBytes { received.discardReadBytes() }
        received.reserveCapacity(minimumWritableBytes: 16 * 1024)
        let n = received.withUnsafeMutableWritableBytes { recv(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        if n > 0 {
            received.moveWriterIndex(forwardBy: n)
        } else if n == 0 || (errno != EAGAIN && errno != EINTR) {
            throw .reading(timedOut: false)
        }
    }

    /// The events `descriptor` is ready for before `deadline` (monotonic nanoseconds), or 0 when it is not.
    private static func wait(_ descriptor: CInt, for events: Int16, until deadline: Int) -> Int16 {
        var entry = pollfd(fd: descriptor, events: events, revents: 0)
        while true {
            let left = deadline &- monotonicNanoseconds()
            guard left > 0 else { return 0 }
            // Rounded up: a deadline less than a millisecond away still gets its poll.
            let ready = poll(&entry, 1, Int32(min((left + 999_999) / 1_000_000, Int(Int32.max))))
            if ready > 0 { return entry.revents == 0 ? events : entry.revents }
            if ready == 0 || errno != EINTR { return 0 }
        }
    }
}
