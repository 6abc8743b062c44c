import Glibc
import SystemPackage

/// What a save wrote.
package struct SnapshotSaveSummary: Sendable, Equatable {
    /// Keys written (keys already expired when their shard was copied are left out).
    package var keys: Int
    /// Bytes of the file.
    package var bytes: Int
}

/// Writes a keyspace to a snapshot file (see ``SnapshotFormat``) without ever exposing a partial file.
///
/// The data goes to `<path>.tmp` in the same directory, which is `fsync`ed, renamed over `path`, and then
/// the directory is `fsync`ed, so that at any moment (a crash, a `kill -9`, a power cut once the rename is
/// durable) `path` is either the previous complete snapshot or the new complete one.
///
/// Consistency: each shard is copied out under its own lock, briefly, so every key is written whole and
/// every shard is a point-in-time view; shards are copied one after another while clients keep writing, so
/// the file as a whole is not one point in time (a write to a shard already copied is not in it, a write to
/// a shard not yet copied is).
package enum SnapshotWriter {
    /// The name of the temporary file a save of `path` writes first.
    package static func temporaryPath(for path: String) -> String { path + ".tmp" }

    /// Saves every key of `keyspace` that has not expired at `now` to `path`. `cancelled` is asked before each
    /// shard: when it answers true the save stops, leaves the previous snapshot in place and throws a
    /// ``SnapshotError/Kind/cancelled`` error.
    package static func save(
        _ keyspace: Keyspace, to path: String, now: Int64, cancelled: () -> Bool = { false }
    ) throws(SnapshotError) -> SnapshotSaveSummary {
        let temporary = temporaryPath(for: path)
        let file = try systemCall("could not create", temporary) {
            try FileDescriptor.open(
                FilePath(temporary), .writeOnly, options: [.create, .truncate, .closeOnExec],
                permissions: .ownerReadWrite)
        }
        var output = BlockOutput(file: file, path: temporary)
        var isOpen = true
        do throws(SnapshotError) {
            try output.writeHeader(created: now, databases: keyspace.databases.count)
            var keys = 0
            var payload: [UInt8] = []
            payload.reserveCapacity(SnapshotFormat.blockTarget + 64 * 1024)
            for (index, database) in keyspace.databases.enumerated() {
                var started = false
                var count: UInt32 = 0
                payload.removeAll(keepingCapacity: true)
                appendUInt32(&payload, 0)  // the record count, filled in when the block is sealed
                for shard in database.shards {
                    if cancelled() { throw SnapshotError(.cancelled, path: temporary, "the save was called off") }
                    shard.lock.lock()
                    shard.forEach { entry in
                        if entry.isExpired(at: now) { return }
                        appendRecord(&payload, entry)
                        count += 1
                    }
                    shard.lock.unlock()
                    if count > 0 && !started {
                        var header: [UInt8] = []
                        appendUInt32(&header, UInt32(index))
                        try output.writeBlock(.database, header)
                        started = true
                    }
                    if payload.count >= SnapshotFormat.blockTarget {
                        keys += Int(count)
                        try sealEntries(&payload, count: count, output: &output)
                        count = 0
                    }
                }
                if count > 0 {
                    keys += Int(count)
                    try sealEntries(&payload, count: count, output: &output)
                }
            }
            var end: [UInt8] = []
            appendUInt64(&end, UInt64(keys))
            appendUInt64(&end, UInt64(output.blocks))
            appendUInt32(&end, output.digest)
            try output.writeBlock(.end, end)
            try output.flush()
            guard fsync(file.rawValue) == 0 else { throw ioError("could not fsync", temporary, Errno(rawValue: errno)) }
            isOpen = false
            try systemCall("could not close", temporary) { try file.close() }
            guard rename(temporary, path) == 0 else {
                throw ioError("could not rename \(temporary) to", path, Errno(rawValue: errno))
            }
            try syncDirectory(of: path)
            return SnapshotSaveSummary(keys: keys, bytes: output.written)
        } catch {
            if isOpen { try? file.close() }
            unlink(temporary)
            throw error
        }
    }

    /// Writes out an entries block with `count` records and starts the next one.
    private static func sealEntries(_ payload: inout [UInt8], count: UInt32, output: inout BlockOutput) throws(SnapshotError) {
        payload.withUnsafeMutableBytes { $0.storeBytes(of: count.littleEndian, as: UInt32.self) }
        try output.writeBlock(.entries, payload)
        payload.removeAll(keepingCapacity: true)
        appendUInt32(&payload, 0)
    }

    @inline(__always)
    private static func appendRecord(_ payload: inout [UInt8], _ entry: Entry) {
        let key = entry.key
        let value = entry.value
        let expiry = entry.expiry
        payload.append(expiry != nil ? SnapshotFormat.expiryFlag : 0)
        appendVarint(&payload, UInt64(key.count))
        appendVarint(&payload, UInt64(value.count))
        if let expiry { appendUInt64(&payload, UInt64(bitPattern: expiry)) }
        payload.append(contentsOf: key)
        payload.append(contentsOf: value)
    }

    /// Makes the rename in `path`'s directory durable.
    private static func syncDirectory(of path: String) throws(SnapshotError) {
        let directory = SnapshotWriter.directory(of: path)
        let file = try systemCall("could not open the directory", directory) {
            try FileDescriptor.open(FilePath(directory), .readOnly, options: [.directory, .closeOnExec])
        }
        defer { try? file.close() }
        guard fsync(file.rawValue) == 0 else {
            throw ioError("could not fsync the directory", directory, Errno(rawValue: errno))
        }
    }

    package static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// An ``SnapshotError/Kind/io`` error: `what` failed on `path`, for the reason `error` (an `Errno`, which
    /// reads as the system's explanation).
    static func ioError(_ what: String, _ path: String, _ error: any Error) -> SnapshotError {
        SnapshotError(.io, path: path, "\(what) \(path): \(error)")
    }

    /// `body`'s result, or its failure as an ``ioError(_:_:_:)``.
    @discardableResult
    static func systemCall<Result>(
        _ what: String, _ path: String, _ body: () throws -> Result
    ) throws(SnapshotError) -> Result {
        do {
            return try body()
        } catch {
            throw ioError(what, path, error)
        }
    }
}

/// Blocks on their way to the file: checksummed, buffered, and counted for the end block.
private struct BlockOutput {
    let file: FileDescriptor
    let path: String
    var buffer: [UInt8] = []
    var written = 0
    var blocks = 0
    /// CRC-32C of the header CRC and every block CRC so far.
    var digest: UInt32 = 0

    init(file: FileDescriptor, path: String) {
        self.file = file
        self.path = path
        buffer.reserveCapacity(2 * SnapshotFormat.blockTarget)
    }

    mutating func writeHeader(created: Int64, databases: Int) throws(SnapshotError) {
        var header = SnapshotFormat.magic
        appendUInt32(&header, SnapshotFormat.version)
        appendUInt32(&header, 0)
        appendUInt64(&header, UInt64(bitPattern: created))
        appendUInt32(&header, UInt32(databases))
        let crc = CRC32C.checksum(header)
        appendUInt32(&header, crc)
        chain(crc)
        try write(header)
    }

    mutating func writeBlock(_ type: SnapshotFormat.BlockType, _ payload: [UInt8]) throws(SnapshotError) {
        var prefix: [UInt8] = [type.rawValue]
        appendUInt64(&prefix, UInt64(payload.count))
        var crc = prefix.withUnsafeBytes { CRC32C.update(0, $0) }
        crc = payload.withUnsafeBytes { CRC32C.update(crc, $0) }
        var suffix: [UInt8] = []
        appendUInt32(&suffix, crc)
        try write(prefix)
        try write(payload)
        try write(suffix)
        if type != .end {
            chain(crc)
            blocks += 1
        }
    }

    private mutating func chain(_ crc: UInt32) {
        var bytes: [UInt8] = []
        appendUInt32(&bytes, crc)
        digest = bytes.withUnsafeBytes { CRC32C.update(digest, $0) }
    }

    private mutating func write(_ bytes: [UInt8]) throws(SnapshotError) {
        if buffer.count + bytes.count > 2 * SnapshotFormat.blockTarget { try flush() }
        if bytes.count >= SnapshotFormat.blockTarget {
            try flush()
            try writeAll(bytes)
        } else {
            buffer.append(contentsOf: bytes)
        }
    }

    mutating func flush() throws(SnapshotError) {
        guard !buffer.isEmpty else { return }
        try writeAll(buffer)
        buffer.removeAll(keepingCapacity: true)
    }

    private mutating func writeAll(_ bytes: [UInt8]) throws(SnapshotError) {
        try SnapshotWriter.systemCall("could not write", path) { try file.writeAll(bytes) }
        written += bytes.count
    }
}

@inline(__always)
func appendUInt32(_ bytes: inout [UInt8], _ value: UInt32) {
    withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
}

@inline(__always)
func appendUInt64(_ bytes: inout [UInt8], _ value: UInt64) {
    withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
}

@inline(__always)
func appendVarint(_ bytes: inout [UInt8], _ value: UInt64) {
    var v = value
    while v >= 0x80 {
        bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
        v >>= 7
    }
    bytes.append(UInt8(v))
}
