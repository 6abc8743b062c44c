import CachedTestSupport
import Foundation
import Glibc
import NIOCore
import RESP

// MARK: normalising replies for the `?`, `??` and `~` comparisons

/// A reply as a tree, re-encoded after normalisation to compare replies that may legitimately differ.
indirect enum ReplyNode: Equatable {
    struct Malformed: Error, CustomStringConvertible {
        let offset: Int
        let reason: String
        var description: String { "malformed reply at byte \(offset): \(reason)" }
    }

    case line(type: UInt8, text: [UInt8])
    case blob(type: UInt8, payload: [UInt8]?)
    case aggregate(type: UInt8, elements: [ReplyNode]?)

    /// Parses one complete reply, as cut by `RESPValue.frameLength(in:limits:)`.
    static func parse(_ bytes: [UInt8]) throws -> ReplyNode {
        var offset = 0
        let node = try parse(bytes, &offset)
        guard offset == bytes.count else { throw Malformed(offset: offset, reason: "trailing bytes") }
        return node
    }

    private static func parse(_ bytes: [UInt8], _ offset: inout Int) throws -> ReplyNode {
        let start = offset
        guard var cr = bytes[start...].firstIndex(of: 0x0D) else {
            throw Malformed(offset: start, reason: "no CRLF")
        }
        let type = bytes[start]
        let text = Array(bytes[(start + 1)..<cr])
        cr += 2
        offset = cr
        switch type {
        case UInt8(ascii: "$"), UInt8(ascii: "!"), UInt8(ascii: "="):
            guard let n = RESPInteger.parse(text), n >= -1 else {
                throw Malformed(offset: start, reason: "bad blob length")
            }
            if n == -1 { return .blob(type: type, payload: nil) }
            let payload = Array(bytes[offset..<(offset + n)])
            offset += n + 2
            return .blob(type: type, payload: payload)
        case UInt8(ascii: "*"), UInt8(ascii: "~"), UInt8(ascii: ">"), UInt8(ascii: "%"), UInt8(ascii: "|"):
            guard let n = RESPInteger.parse(text), n >= -1 else {
                throw Malformed(offset: start, reason: "bad aggregate length")
            }
            if n == -1 { return .aggregate(type: type, elements: nil) }
            let isPairs = type == UInt8(ascii: "%") || type == UInt8(ascii: "|")
            var elements: [ReplyNode] = []
            for _ in 0..<(isPairs ? 2 * n : n) { elements.append(try parse(bytes, &offset)) }
            if type == UInt8(ascii: "|") { elements.append(try parse(bytes, &offset)) }
            return .aggregate(type: type, elements: elements)
        default:
            return .line(type: type, text: text)
        }
    }

    var isScalar: Bool {
        if case .aggregate = self { return false }
        return true
    }

    func normalized(_ comparison: ReplyComparison) -> ReplyNode {
        let hidden = Array("?".utf8)
        switch self {
        case .line(let type, let text):
            if comparison.contains(.shapeOnly) || (comparison.contains(.ignoreIntegers) && type == UInt8(ascii: ":")) {
                return .line(type: type, text: hidden)
            }
            return .line(type: type, text: text)
        case .blob(let type, let payload):
            if comparison.contains(.shapeOnly), payload != nil { return .blob(type: type, payload: hidden) }
            return self
        case .aggregate(let type, let elements):
            guard var elements = elements?.map({ $0.normalized(comparison) }) else { return self }
            if comparison.contains(.unordered), elements.allSatisfy(\.isScalar) {
                if type == UInt8(ascii: "%") {
                    var pairs: [(key: ReplyNode, value: ReplyNode)] = []
                    for i in stride(from: 0, to: elements.count, by: 2) { pairs.append((elements[i], elements[i + 1])) }
                    pairs.sort { ($0.key.encoded + $0.value.encoded).lexicographicallyPrecedes($1.key.encoded + $1.value.encoded) }
                    elements = pairs.flatMap { [$0.key, $0.value] }
                } else if type != UInt8(ascii: "|") {
                    elements.sort { $0.encoded.lexicographicallyPrecedes($1.encoded) }
                }
            }
            return .aggregate(type: type, elements: elements)
        }
    }

    var encoded: [UInt8] {
        switch self {
        case .line(let type, let text):
            return [type] + text + [0x0D, 0x0A]
        case .blob(let type, let payload):
            guard let payload else { return [type] + Array("-1\r\n".utf8) }
            return [type] + Array("\(payload.count)\r\n".utf8) + payload + [0x0D, 0x0A]
        case .aggregate(let type, let elements):
            guard let elements else { return [type] + Array("-1\r\n".utf8) }
            let pairs = type == UInt8(ascii: "%") || type == UInt8(ascii: "|")
            let count = type == UInt8(ascii: "|") ? (elements.count - 1) / 2 : (pairs ? elements.count / 2 : elements.count)
            return [type] + Array("\(count)\r\n".utf8) + elements.flatMap(\.encoded)
        }
    }
}

// MARK: readable bytes

enum Escaped {
    /// Bytes as a double-quoted string: printable ASCII as is, `\r \n \t \\ \"`, anything else `\xHH`.
    static func render(_ bytes: some Sequence<UInt8>) -> String {
        var out = "\""
        for b in bytes {
            switch b {
            case 0x0D: out += "\\r"
            case 0x0A: out += "\\n"
            case 0x09: out += "\\t"
            case UInt8(ascii: "\\"): out += "\\\\"
            case UInt8(ascii: "\""): out += "\\\""
            case 0x20...0x7E: out.unicodeScalars.append(Unicode.Scalar(b))
            default: out += String(format: "\\x%02x", b)
            }
        }
        return out + "\""
    }
}

// MARK: a blocking client connection

/// What a server sent in answer to one corpus entry.
enum Received: Equatable, CustomStringConvertible {
    /// Complete replies, concatenated; `closed` when the server closed the connection after them.
    case bytes([UInt8], closed: Bool)
    /// The server closed the connection before the expected replies were complete.
    case closedEarly([UInt8])
    /// The server sent nothing more for ``DifferentialConnection/timeout`` seconds.
    case timedOut([UInt8])
    /// The server sent bytes that are not RESP.
    case malformed([UInt8], String)

    var description: String {
        switch self {
        case .bytes(let b, let closed): return Escaped.render(b) + (closed ? " then closed the connection" : "")
        case .closedEarly(let b): return Escaped.render(b) + " then closed the connection before the reply was complete"
        case .timedOut(let b): return Escaped.render(b) + " then nothing for \(Int(DifferentialConnection.timeout)) s"
        case .malformed(let b, let why): return Escaped.render(b) + " (\(why))"
        }
    }

    /// Whether the connection can be used for the next entry.
    var isUsable: Bool {
        if case .bytes(_, closed: false) = self { return true }
        return false
    }
}

final class DifferentialConnection {
    static let timeout: TimeInterval = 5

    private let fd: Int32
    private var buffer = ByteBufferAllocator().buffer(capacity: 4096)

    init(port: Int) throws {
        fd = try connectLoopback(port: port)
        var tv = timeval(tv_sec: Int(Self.timeout), tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    /// Writes all of `bytes` in one `send` (the socket blocks, so it takes them all unless a signal interrupts
    /// it); false if the server already closed the connection. The corpus relies on it: a `!raw` pipeline arrives
    /// in one segment and is read at once (see ``CorpusParser/rawLimit``).
    func send(_ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return false }
            sent += n
        }
        return true
    }

    static func multibulk(_ arguments: [[UInt8]]) -> [UInt8] {
        var out = Array("*\(arguments.count)\r\n".utf8)
        for argument in arguments {
            out += Array("$\(argument.count)\r\n".utf8) + argument + [0x0D, 0x0A]
        }
        return out
    }

    /// Reads more bytes into the buffer: false on end of stream, nil on timeout.
    private func fill() -> Bool? {
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if n > 0 {
                buffer.writeBytes(chunk[0..<n])
                return true
            }
            if n == 0 { return false }
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EWOULDBLOCK { return nil }
            return false  // ECONNRESET and the like: the server is gone
        }
    }

    /// Reads exactly `count` replies, each cut at its exact end.
    func readReplies(_ count: Int) -> Received {
        var received: [UInt8] = []
        for _ in 0..<count {
            while true {
                let length: Int?
                do {
                    length = try RESPValue.frameLength(in: buffer)
                } catch {
                    return .malformed(received + Array(buffer.readableBytesView), "\(error)")
                }
                if let length {
                    received += buffer.readBytes(length: length)!
                    break
                }
                switch fill() {
                case true: continue
                case false: return .closedEarly(received + Array(buffer.readableBytesView))
                case nil: return .timedOut(received + Array(buffer.readableBytesView))
                }
            }
        }
        return .bytes(received, closed: false)
    }

    /// Reads everything until the server closes the connection.
    func readUntilClose() -> Received {
        while true {
            switch fill() {
            case true: continue
            case false: return .bytes(Array(buffer.readableBytesView), closed: true)
            case nil: return .timedOut(Array(buffer.readableBytesView))
            }
        }
    }
}
