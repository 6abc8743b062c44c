/// The layout of a snapshot file (`cached.snapshot`). It is this server's own format, not Redis's RDB.
///
/// All integers are little-endian. A file is a header followed by blocks:
///
///     header (32 bytes)
///       magic        8   89 43 53 4E 41 50 0D 0A  ("\x89CSNAP\r\n")
///       version      u32 1
///       flags        u32 0 (reserved; a reader refuses bits it does not know)
///       created      i64 wall-clock milliseconds since the epoch when the save began
///       databases    u32 the number of databases of the server that wrote it
///       header CRC   u32 CRC-32C of the 28 bytes above
///
///     block
///       type         u8  1 database, 2 entries, 255 end
///       length       u64 payload length in bytes
///       payload      length bytes
///       block CRC    u32 CRC-32C of type, length and payload
///
/// Payloads:
///
/// - **database**: `index u32`. The entries blocks that follow belong to this database.
/// - **entries**: `count u32`, then `count` records, each
///   `flags u8 (bit 0: has expiry) | key length varint | value length varint | expiry i64, if flagged | key | value`.
///   Varints are LEB128 (7 bits per byte, low bits first). The expiry is absolute, in Unix milliseconds.
/// - **end**: `keys u64 | blocks u64 | file digest u32`: the number of records in the file, the number of
///   blocks before this one, and the CRC-32C of the header CRC followed by every earlier block's CRC, in
///   order, so that a missing, repeated or reordered block is detected. Nothing may follow the end block.
package enum SnapshotFormat {
    package static let magic: [UInt8] = [0x89, 0x43, 0x53, 0x4E, 0x41, 0x50, 0x0D, 0x0A]
    package static let version: UInt32 = 1
    package static let headerSize = 32
    /// An entries block is sealed once its payload passes this size (a single large value can make it bigger).
    package static let blockTarget = 1 << 20

    package enum BlockType: UInt8 {
        case database = 1
        case entries = 2
        case end = 255
    }

    static let expiryFlag: UInt8 = 0x01
}

/// Why a snapshot could not be written or read.
package struct SnapshotError: Error, CustomStringConvertible, Equatable, Sendable {
    package enum Kind: Sendable, Equatable {
        /// A system call failed (`errno` is in the message).
        case io
        /// The file is damaged: a checksum, a length or a marker is wrong, or it ends early.
        case corrupt
        /// The file was written in a format version this server does not read.
        case unsupportedVersion
        /// The file is intact but does not fit this server (a database index past `databases`).
        case incompatible
        /// Memory ran out while loading.
        case outOfMemory
        /// The save or the load was called off before it finished (FLUSHALL during a background save, a
        /// shutdown while the snapshot loads at start).
        case cancelled
    }

    package let kind: Kind
    package let path: String
    /// Where in the file the problem was found, for damaged files.
    package let offset: Int?
    package let reason: String

    package init(_ kind: Kind, path: String, offset: Int? = nil, _ reason: String) {
        self.kind = kind
        self.path = path
        self.offset = offset
        self.reason = reason
    }

    package var description: String {
        var text = "\(path): \(reason)"
        if let offset { text += " (at byte \(offset))" }
        return text
    }
}
