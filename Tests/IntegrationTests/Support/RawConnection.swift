import CachedTestSupport
import Foundation
import Glibc

/// A plain TCP connection for sending exact request bytes (inline commands, pipelines, split writes) and
/// reading the exact reply bytes. Every read has a deadline, so a silent server fails the test.
final class RawConnection {
    let fd: Int32
    private var pending: [UInt8] = []

    init(port: Int) throws { fd = try connectLoopback(port: port) }
    deinit { close(fd) }

    func send(_ text: String) throws { try send(Array(text.utf8)) }

    func send(_ bytes: [UInt8]) throws {
        guard let failure = trySend(bytes) else { return }
        throw TestEnvironmentError("write to the server failed: errno \(failure)")
    }

    /// Sends `bytes`, returning nil, or the errno of a write the server refused (EPIPE, ECONNRESET once it has
    /// closed the connection). Never raises SIGPIPE.
    func trySend(_ bytes: [UInt8]) -> Int32? {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return errno }
            sent += n
        }
        return nil
    }

    /// Makes closing this connection reset it (RST) instead of shutting it down, as a killed client's does
    /// when unread data is pending or the kernel aborts it.
    func resetOnClose() {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
    }

    /// This end's address as the server shows it (`127.0.0.1:54321`).
    var localAddress: String {
        var addr = sockaddr_in()
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        return "127.0.0.1:\(UInt16(bigEndian: addr.sin_port))"
    }

    /// Exactly `count` bytes of reply.
    func read(count: Int, timeout: TimeInterval = 10) throws -> [UInt8] {
        let deadline = Date().addingTimeInterval(timeout)
        while pending.count < count {
            guard try fill(until: deadline) else {
                throw TestEnvironmentError(
                    "the server closed the connection after \(pending.count) of \(count) expected bytes: "
                        + String(decoding: pending, as: UTF8.self).debugDescription)
            }
        }
        defer { pending.removeFirst(count) }
        return Array(pending.prefix(count))
    }

    /// Reply bytes up to and including the first occurrence of `terminator`.
    func read(through terminator: String, timeout: TimeInterval = 10) throws -> [UInt8] {
        let deadline = Date().addingTimeInterval(timeout)
        let marker = Array(terminator.utf8)
        while true {
            if let range = pending.firstRange(of: marker) {
                defer { pending.removeFirst(range.upperBound) }
                return Array(pending[..<range.upperBound])
            }
            guard try fill(until: deadline) else {
                throw TestEnvironmentError("the server closed the connection before sending \(terminator.debugDescription)")
            }
        }
    }

    /// `count` whole replies, decoded by hiredis.
    func readReplies(_ count: Int, timeout: TimeInterval = 10) throws -> [RedisReply] {
        let deadline = Date().addingTimeInterval(timeout)
        let decoder = HiredisReplyReader()
        try decoder.feed(pending)
        pending.removeAll()
        var replies: [RedisReply] = []
        while replies.count < count {
            if let reply = try decoder.next() {
                replies.append(reply)
                continue
            }
            guard try fill(until: deadline) else {
                throw TestEnvironmentError("the server closed the connection after \(replies.count) of \(count) replies")
            }
            try decoder.feed(pending)
            pending.removeAll()
        }
        return replies
    }

    /// Everything the server sends until it closes the connection (within `timeout`).
    func readUntilClosed(timeout: TimeInterval = 10) throws -> [UInt8] {
        let deadline = Date().addingTimeInterval(timeout)
        while try fill(until: deadline) {}
        defer { pending.removeAll() }
        return pending
    }

    /// Whether the server closes the connection (reads end of file) within `timeout`, discarding any bytes.
    func closedByServer(within timeout: TimeInterval = 5) throws -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        do {
            while try fill(until: deadline) { pending.removeAll() }
            return true
        } catch is ReadTimedOut {
            return false
        }
    }

    /// Whether the server stays silent (sends nothing and keeps the connection open) for `interval`.
    func silent(for interval: TimeInterval) throws -> Bool {
        guard pending.isEmpty else { return false }
        do {
            // Bytes, or the end of the connection, before the interval is over.
            _ = try fill(until: Date().addingTimeInterval(interval))
            return false
        } catch is ReadTimedOut {
            return true
        }
    }

    /// Reads what is available into `pending`; false at end of file.
    private func fill(until deadline: Date) throws -> Bool {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while true {
            let remaining = deadline.timeIntervalSinceNow
            guard remaining > 0 else { throw ReadTimedOut(pendingBytes: pending) }
            let ready = poll(&pfd, 1, Int32(min(remaining * 1000, 1000)) + 1)
            if ready < 0 && errno == EINTR { continue }
            if ready > 0 { break }
        }
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        if n < 0 {
            if errno == ECONNRESET { return false }
            throw TestEnvironmentError("read from the server failed: errno \(errno)")
        }
        if n == 0 { return false }
        pending += buffer[0..<n]
        return true
    }
}

/// No reply arrived before the deadline.
struct ReadTimedOut: Error, CustomStringConvertible {
    let pendingBytes: [UInt8]
    var description: String {
        "no complete reply from the server in time; received so far: "
            + String(decoding: pendingBytes, as: UTF8.self).debugDescription
    }
}

extension Array where Element == UInt8 {
    /// A command in the RESP multibulk form every client sends.
    static func respCommand(_ arguments: [String]) -> [UInt8] {
        var out = Array("*\(arguments.count)\r\n".utf8)
        for argument in arguments {
            out += Array("$\(argument.utf8.count)\r\n".utf8) + Array(argument.utf8) + [13, 10]
        }
        return out
    }
}
