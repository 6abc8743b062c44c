import Glibc
import SystemPackage

/// What loading a snapshot did.
package struct SnapshotLoadSummary: Sendable, Equatable {
    /// Keys put in the keyspace.
    package var keys = 0
    /// Keys in the file whose time ran out before they were loaded (left out).
    package var expired = 0
    /// Bytes of the file.
    package var bytes = 0
    /// When the save that wrote the file began (Unix milliseconds), once the header was read.
    package var created: Int64?
    /// The damage found, when loading was told to keep what precedes it; nil for an intact file.
    package var damage: SnapshotError?
}

/// Reads a snapshot file (see ``SnapshotFormat``) into a keyspace.
package enum SnapshotReader {
    /// Loads the snapshot at `path` into `keyspace`, leaving out keys that expired before `now`.
    ///
    /// Every block's checksum is verified before any of its keys is stored. A damaged, truncated or
    /// unreadable file throws, after removing whatever was loaded, unless `keepIntactPart` is set: then the
    /// keys of the blocks before the damage stay, and the damage is returned in the summary.
    /// A file written by a newer format version, or holding a database this keyspace does not have, is
    /// treated the same way.
    ///
    /// `cancelled` is asked before each block: when it answers true the load stops with a
    /// ``SnapshotError/Kind/cancelled`` error, leaving what was loaded in place (the server is exiting).
    ///
    /// `keyLoadDelay` (`key-load-delay`) slows the load down on purpose, so that a load in progress can be
    /// caught: after each key stored it sleeps that many microseconds, or, when negative, 1 µs after every
    /// `-keyLoadDelay`-th key; 0 for none.
    ///
    /// - Returns: nil when there is no file at `path`.
    package static func load(
        _ path: String, into keyspace: Keyspace, now: Int64, keepIntactPart: Bool = false,
        cancelled: () -> Bool = { false }, keyLoadDelay: Int = 0
    ) throws(SnapshotError) -> SnapshotLoadSummary? {
        let file: FileDescriptor
        do {
            file = try FileDescriptor.open(FilePath(path), .readOnly, options: .closeOnExec)
        } catch Errno.noSuchFileOrDirectory {
            return nil
        } catch {
            let error = SnapshotWriter.ioError("could not open", path, error)
            if keepIntactPart { return SnapshotLoadSummary(damage: error) }
            throw error
        }
        defer { try? file.close() }
        var input = FileInput(file: file, path: path)
        var summary = SnapshotLoadSummary()
        do throws(SnapshotError) {
            try input.readSize()
            summary.bytes = input.size
            try load(
                &input, into: keyspace, now: now, summary: &summary, cancelled: cancelled, keyLoadDelay: keyLoadDelay)
            return summary
        } catch {
            if error.kind == .cancelled { throw error }
            guard keepIntactPart else {
                for database in keyspace.databases { database.removeAll() }
                throw error
            }
            summary.damage = error
            return summary
        }
    }

    private static func load(
        _ input: inout FileInput, into keyspace: Keyspace, now: Int64, summary: inout SnapshotLoadSummary,
        cancelled: () -> Bool, keyLoadDelay: Int
    ) throws(SnapshotError) {
        // Header. A file that does not start with the magic number is named as such, however short it is.
        let magicCount = min(input.size, SnapshotFormat.magic.count)
        let start = try input.peek(magicCount)
        guard SnapshotFormat.magic.starts(with: start) else {
            throw input.corrupt(at: 0, "not a cached-server snapshot (wrong magic number)")
        }
        let header = try input.read(SnapshotFormat.headerSize, what: "the header")
        let version = header.uint32(at: 8)
        let storedHeaderCRC = header.uint32(at: 28)
        guard CRC32C.checksum(Array(header[0..<28])) == storedHeaderCRC else {
            throw input.corrupt(at: 0, "the header's checksum does not match")
        }
        guard version == SnapshotFormat.version else {
            throw SnapshotError(
                .unsupportedVersion, path: input.path,
                "format version \(version); this cached-server reads version \(SnapshotFormat.version)")
        }
        guard header.uint32(at: 12) == 0 else {
            throw input.corrupt(at: 12, "unknown flags \(header.uint32(at: 12)) in the header")
        }
        summary.created = Int64(bitPattern: header.uint64(at: 16))
        var digest = chained(0, storedHeaderCRC)

        var blocks: UInt64 = 0
        var records: UInt64 = 0
        var database: Database?
        var payload: [UInt8] = []
        while true {
            if cancelled() { throw SnapshotError(.cancelled, path: input.path, "the load was called off") }
            let start = input.offset
            let prefix = try input.read(9, what: "a block header")
            guard let type = SnapshotFormat.BlockType(rawValue: prefix[0]) else {
                throw input.corrupt(at: start, "unknown block type \(prefix[0])")
            }
            let length = prefix.uint64(at: 1)
            guard length <= UInt64(input.size - input.offset), input.size - input.offset - Int(length) >= 4 else {
                throw input.corrupt(at: start, "a block of \(length) bytes runs past the end of the file (truncated?)")
            }
            try input.read(Int(length), into: &payload, what: "a block")
            let stored = try input.read(4, what: "a block checksum").uint32(at: 0)
            var crc = prefix.withUnsafeBytes { CRC32C.update(0, $0) }
            crc = payload.withUnsafeBytes { CRC32C.update(crc, $0) }
            guard crc == stored else { throw input.corrupt(at: start, "a block's checksum does not match") }

            switch type {
            case .database:
                guard payload.count == 4 else { throw input.corrupt(at: start, "a database block of \(payload.count) bytes") }
                let index = Int(payload.uint32(at: 0))
                guard index < keyspace.databases.count else {
                    throw SnapshotError(
                        .incompatible, path: input.path, offset: start,
                        "the snapshot holds database \(index), but this server has \(keyspace.databases.count) databases (see the databases directive)")
                }
                database = keyspace.databases[index]
            case .entries:
                guard let database else { throw input.corrupt(at: start, "keys before any database block") }
                let count = try decodeEntries(payload, blockStart: start, input: input) { key, value, expiry in
                    if let expiry, expiry < now {
                        summary.expired += 1
                        return true
                    }
                    guard store(key, value, expiry: expiry, in: database, now: now) else { return false }
                    summary.keys += 1
                    if keyLoadDelay != 0 { pause(keyLoadDelay, afterKey: summary.keys) }
                    return true
                }
                records += UInt64(count)
            case .end:
                guard payload.count == 20 else { throw input.corrupt(at: start, "an end block of \(payload.count) bytes") }
                guard payload.uint64(at: 0) == records, payload.uint64(at: 8) == blocks else {
                    throw input.corrupt(
                        at: start,
                        "the end block counts \(payload.uint64(at: 0)) keys in \(payload.uint64(at: 8)) blocks, the file holds \(records) in \(blocks)")
                }
                guard payload.uint32(at: 16) == digest else {
                    throw input.corrupt(at: start, "the file's checksum does not match (blocks missing, repeated or out of order)")
                }
                guard input.offset == input.size else {
                    throw input.corrupt(at: input.offset, "\(input.size - input.offset) bytes follow the end block")
                }
                return
            }
            digest = chained(digest, crc)
            blocks += 1
        }
    }

    /// `key-load-delay` after the `keys`-th key: `delay` microseconds, or, negative, 1 µs after every `-delay`-th.
    private static func pause(_ delay: Int, afterKey keys: Int) {
        if delay > 0 {
            usleep(useconds_t(clamping: delay))
        } else if keys % delay == 0 {
            usleep(1)
        }
    }

    /// Decodes the records of an entries payload, calling `body` with each; `body` returns false to stop
    /// (memory ran out). Returns the number of records.
    private static func decodeEntries(
        _ payload: [UInt8], blockStart: Int, input: FileInput,
        _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer, Int64?) -> Bool
    ) throws(SnapshotError) -> Int {
        let outcome: Result<Int, SnapshotError> = payload.withUnsafeBytes { raw in
            func corrupt(_ reason: String) -> Result<Int, SnapshotError> {
                .failure(input.corrupt(at: blockStart, reason))
            }
            guard raw.count >= 4 else { return corrupt("an entries block without its count") }
            let count = Int(UInt32(littleEndian: raw.loadUnaligned(as: UInt32.self)))
            var offset = 4
            for _ in 0..<count {
                guard offset < raw.count else { return corrupt("an entries block ends before its \(count) keys") }
                let flags = raw[offset]
                offset += 1
                guard flags & ~SnapshotFormat.expiryFlag == 0 else { return corrupt("unknown key flags \(flags)") }
                guard let keyCount = readVarint(raw, &offset), let valueCount = readVarint(raw, &offset) else {
                    return corrupt("a malformed length")
                }
                var expiry: Int64?
                if flags & SnapshotFormat.expiryFlag != 0 {
                    guard raw.count - offset >= 8 else { return corrupt("a key's expiry runs past its block") }
                    expiry = Int64(bitPattern: UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self)))
                    offset += 8
                }
                guard keyCount <= UInt64(raw.count - offset), valueCount <= UInt64(raw.count - offset - Int(keyCount)) else {
                    return corrupt("a key or value runs past its block")
                }
                let key = UnsafeRawBufferPointer(rebasing: raw[offset..<(offset + Int(keyCount))])
                offset += Int(keyCount)
                let value = UnsafeRawBufferPointer(rebasing: raw[offset..<(offset + Int(valueCount))])
                offset += Int(valueCount)
                guard body(key, value, expiry) else {
                    return .failure(SnapshotError(.outOfMemory, path: input.path, "out of memory while loading"))
                }
            }
            guard offset == raw.count else { return corrupt("\(raw.count - offset) bytes follow the keys of a block") }
            return .success(count)
        }
        return try outcome.get()
    }

    /// Stores one key as SET with PXAT would (replacing a key of the same name).
    private static func store(
        _ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer, expiry: Int64?, in database: Database, now: Int64
    ) -> Bool {
        let hash = Keyspace.hasher.hash(key)
        let shard = database.shard(for: hash)
        shard.lock.lock()
        defer { shard.lock.unlock() }
        let existing = shard.find(key, hash: hash)
        // Loaded keys count as accessed at load time (OBJECT IDLETIME, LRU), not at the clock's epoch.
        shard.clockNow = now
        return shard.setValue(key, hash: hash, value: value, ttl: expiry.map { .at($0) } ?? .clear, existing: existing)
    }

    private static func readVarint(_ raw: UnsafeRawBufferPointer, _ offset: inout Int) -> UInt64? {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while offset < raw.count && shift < 64 {
            let byte = raw[offset]
            offset += 1
            result |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 { return result }
            shift += 7
        }
        return nil
    }

    private static func chained(_ digest: UInt32, _ crc: UInt32) -> UInt32 {
        withUnsafeBytes(of: crc.littleEndian) { CRC32C.update(digest, $0) }
    }
}

/// Sequential reads of a snapshot file with positions for error messages.
private struct FileInput {
    let file: FileDescriptor
    let path: String
    var size = 0
    var offset = 0

    init(file: FileDescriptor, path: String) {
        self.file = file
        self.path = path
    }

    mutating func readSize() throws(SnapshotError) {
        size = Int(try SnapshotWriter.systemCall("could not stat", path) { try file.stat() }.size)
    }

    func corrupt(at offset: Int, _ reason: String) -> SnapshotError {
        SnapshotError(.corrupt, path: path, offset: offset, reason)
    }

    /// The next `count` bytes, without moving past them.
    mutating func peek(_ count: Int) throws(SnapshotError) -> [UInt8] {
        let start = offset
        defer { offset = start }
        return try read(count, what: "the header")
    }

    mutating func read(_ count: Int, what: String) throws(SnapshotError) -> [UInt8] {
        var bytes: [UInt8] = []
        try read(count, into: &bytes, what: what)
        return bytes
    }

    /// Reads exactly `count` bytes into `bytes` (replacing its contents).
    mutating func read(_ count: Int, into bytes: inout [UInt8], what: String) throws(SnapshotError) {
        guard size - offset >= count else {
            throw corrupt(at: offset, "the file ends in \(what) (truncated: \(size) bytes)")
        }
        if bytes.count != count {
            bytes.removeAll(keepingCapacity: true)
            bytes.append(contentsOf: repeatElement(0, count: count))
        }
        let failure: SnapshotError? = bytes.withUnsafeMutableBytes { raw in
            var done = 0
            while done < count {
                let n: Int
                do {
                    n = try file.read(
                        fromAbsoluteOffset: Int64(offset + done), into: UnsafeMutableRawBufferPointer(rebasing: raw[done...]))
                } catch {
                    return SnapshotWriter.ioError("could not read", path, error)
                }
                if n == 0 { return corrupt(at: offset + done, "the file ends in \(what) (truncated while reading)") }
                done += n
            }
            return nil
        }
        if let failure { throw failure }
        offset += count
    }
}

extension [UInt8] {
    fileprivate func uint32(at offset: Int) -> UInt32 {
        withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: UInt32.self)) }
    }

    fileprivate func uint64(at offset: Int) -> UInt64 {
        withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) }
    }
}
