import Foundation
import Glibc

/// A TCP port on 127.0.0.1 that nothing listens on right now.
public func freeLoopbackPort() throws -> Int {
    let fd = try loopbackSocket()
    defer { close(fd) }
    try bindLoopback(fd, port: 0)
    return try boundPort(fd)
}

/// A socket bound to a port of 127.0.0.1 that does not listen, and that port: a connection to it is refused for
/// as long as the socket stays open (no other program can listen there meanwhile). The caller closes it.
public func refusingLoopbackPort() throws -> (fd: Int32, port: Int) {
    let fd = try loopbackSocket()
    do {
        try bindLoopback(fd, port: 0)
        return (fd, try boundPort(fd))
    } catch {
        close(fd)
        throw error
    }
}

/// A TCP port `p` on 127.0.0.1 such that nothing listens on `p` nor on `p + offset` right now (a Redis Cluster node
/// listens on its port and on port + 10000 for its cluster bus). Both are below Linux's ephemeral port range, so
/// that outgoing connections do not take them in the meantime.
public func freeLoopbackPort(alsoFreeAt offset: Int) throws -> Int {
    for _ in 0..<500 {
        let port = Int.random(in: 15000..<(32768 - offset))
        guard let first = try? listenOnLoopback(port: port) else { continue }
        defer { close(first.fd) }
        guard let second = try? listenOnLoopback(port: port + offset) else { continue }
        close(second.fd)
        return port
    }
    throw TestEnvironmentError("found no free loopback port p with p + \(offset) free too")
}

/// A socket listening on 127.0.0.1:`port` (0 for any free port), and the port it got. The caller closes it.
/// - Parameter reuseAddress: sets `SO_REUSEADDR`, to listen again on a port whose connections linger in TIME_WAIT.
public func listenOnLoopback(port: Int = 0, backlog: Int32 = 16, reuseAddress: Bool = false) throws -> (fd: Int32, port: Int) {
    let fd = try loopbackSocket()
    do {
        if reuseAddress {
            var one: Int32 = 1
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        }
        try bindLoopback(fd, port: port)
        guard listen(fd, backlog) == 0 else { throw TestEnvironmentError("listen() on port \(port) failed: errno \(errno)") }
        return (fd, try boundPort(fd))
    } catch {
        close(fd)
        throw error
    }
}

/// A blocking TCP connection to `host`:`port` (with `TCP_NODELAY`), as a file descriptor; `host` is an IPv4
/// address of the loopback range.
public func connectLoopback(port: Int, host: String = "127.0.0.1") throws -> Int32 {
    let fd = try loopbackSocket()
    var addr = loopbackAddress(port: port, host: host)
    let rc = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard rc == 0 else {
        close(fd)
        throw TestEnvironmentError("connect to \(host):\(port) failed: errno \(errno)")
    }
    var one: Int32 = 1
    setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    return fd
}

/// A blocking connection to the Unix socket at `path`, as a file descriptor.
public func connectUnixSocket(path: String) throws -> Int32 {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestEnvironmentError("socket failed: errno \(errno)") }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
        close(fd)
        throw TestEnvironmentError("the socket path is too long: \(path)")
    }
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
    let rc = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    guard rc == 0 else {
        let error = errno
        close(fd)
        throw TestEnvironmentError("connect to \(path) failed: errno \(error)")
    }
    return fd
}

/// Whether a TCP connection to `host`:`port` is accepted (it is closed at once).
public func acceptsConnections(port: Int, host: String = "127.0.0.1") -> Bool {
    guard let fd = try? connectLoopback(port: port, host: host) else { return false }
    close(fd)
    return true
}

/// The address `host`:`port` (127.0.0.1 unless another IPv4 address is given).
public func loopbackAddress(port: Int, host: String = "127.0.0.1") -> sockaddr_in {
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = in_port_t(UInt16(port).bigEndian)
    addr.sin_addr.s_addr = inet_addr(host)
    return addr
}

/// The local port a socket is bound to.
public func boundPort(_ fd: Int32) throws -> Int {
    var addr = sockaddr_in()
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    let rc = withUnsafeMutablePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
    }
    guard rc == 0 else { throw TestEnvironmentError("getsockname() failed: errno \(errno)") }
    return Int(UInt16(bigEndian: addr.sin_port))
}

private func loopbackSocket() throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestEnvironmentError("socket() failed: errno \(errno)") }
    return fd
}

private func bindLoopback(_ fd: Int32, port: Int) throws {
    var addr = loopbackAddress(port: port)
    let bound = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard bound == 0 else { throw TestEnvironmentError("bind() to 127.0.0.1:\(port) failed: errno \(errno)") }
}
