import Glibc
import NIOCore

/// Bytes sent straight to a connection's socket with one non-blocking `send`, without the channel's bookkeeping
/// for pending writes, its lifecycle checks and the reference counting around them (about a microsecond per
/// reply). The server accepts its connections itself, so it knows their sockets (``SocketListener``). Only while
/// the channel has nothing of the connection queued: the caller hands what the socket does not take to the
/// channel, and later bytes queue behind it there until the channel has written it.
package enum DirectSend {
    /// Sends what the socket `descriptor` takes of `buffer` now, moving its reader index past it; true when all
    /// of it went. Never blocks or raises SIGPIPE; a failed send takes nothing (the channel then reports the
    /// error).
    @inline(__always)
    package static func send(_ buffer: inout ByteBuffer, to descriptor: CInt) -> Bool {
        let sent = buffer.withUnsafeReadableBytes {
            Glibc.send(descriptor, $0.baseAddress, $0.count, CInt(MSG_DONTWAIT | MSG_NOSIGNAL))
        }
        if sent == buffer.readableBytes { return true }
        if sent > 0 { buffer.moveReaderIndex(forwardBy: sent) }
        return false
    }
}
