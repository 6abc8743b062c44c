import CacheCore
import Foundation
import Glibc
import Testing

/// A scratch directory removed when the value goes.
final class ScratchDirectory {
    let path: String

    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("cached-snapshot-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    func file(_ name: String) -> String { path + "/" + name }
}

/// Every key of every database: database → key → (value, expiry).
func contents(of keyspace: Keyspace) -> [Int: [[UInt8]: ([UInt8], Int64?)]] {
    var result: [Int: [[UInt8]: ([UInt8], Int64?)]] = [:]
    for (index, database) in keyspace.databases.enumerated() {
        for shard in database.shards {
            shard.lock.withLock {
                shard.forEach { entry in
                    result[index, default: [:]][Array(entry.key)] = (Array(entry.value), entry.expiry)
                }
            }
        }
    }
    return result
}

func sameContents(_ a: [Int: [[UInt8]: ([UInt8], Int64?)]], _ b: [Int: [[UInt8]: ([UInt8], Int64?)]]) -> Bool {
    guard a.keys.sorted() == b.keys.sorted() else { return false }
    for (db, keys) in a {
        guard let other = b[db], other.count == keys.count else { return false }
        for (key, (value, expiry)) in keys {
            guard let (otherValue, otherExpiry) = other[key], otherValue == value, otherExpiry == expiry else { return false }
        }
    }
    return true
}

extension Keyspace {
    func put(_ db: Int, _ key: [UInt8], _ value: [UInt8], expiry: Int64? = nil) {
        databases[db].shard(for: hashOf(key)).put(key, value, expiry: expiry)
    }
}

@Suite("CRC-32C")
struct CRC32CTests {
    /// One bit at a time, straight from the definition.
    static func reference(_ bytes: [UInt8]) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            c ^= UInt32(byte)
            for _ in 0..<8 { c = c & 1 != 0 ? (c >> 1) ^ 0x82F6_3B78 : c >> 1 }
        }
        return ~c
    }

    @Test("the check value of \"123456789\" is E3069283")
    func checkValue() {
        #expect(CRC32C.checksum(bytes("123456789")) == 0xE306_9283)
        #expect(CRC32C.checksum([]) == 0)
    }

    @Test("eight bytes at a time agrees with one bit at a time, for every length and alignment up to 80")
    func slicingAgrees() {
        var generator = SeededGenerator(seed: 7)
        let data = (0..<96).map { _ in UInt8.random(in: 0...255, using: &generator) }
        for start in 0..<8 {
            for length in 0...80 {
                let slice = Array(data[start..<(start + length)])
                #expect(CRC32C.checksum(slice) == Self.reference(slice), "start \(start) length \(length)")
            }
        }
    }

    @Test("updating piece by piece equals one pass")
    func incremental() {
        let data = (0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let whole = CRC32C.checksum(data)
        var crc: UInt32 = 0
        for piece in stride(from: 0, to: data.count, by: 77) {
            crc = Array(data[piece..<min(piece + 77, data.count)]).withUnsafeBytes { CRC32C.update(crc, $0) }
        }
        #expect(crc == whole)
    }
}

@Suite("Snapshot files")
struct SnapshotFileTests {
    /// A keyspace of 4 databases with awkward keys: binary, empty, a 3 MB value, TTLs, 20 000 small keys.
    static func populated() -> Keyspace {
        let keyspace = Keyspace(databases: 4)
        keyspace.put(0, bytes("plain"), bytes("value"))
        keyspace.put(0, [], bytes("the empty key"))
        keyspace.put(0, bytes("empty value"), [])
        keyspace.put(0, [0, 1, 2, 0xFF, 0x0D, 0x0A], [0, 0, 0])
        keyspace.put(0, bytes("ttl"), bytes("expires"), expiry: start + 60_000)
        keyspace.put(2, bytes("big"), [UInt8](repeating: 0xAB, count: 3 << 20), expiry: start + 3_600_000)
        for i in 0..<20_000 { keyspace.put(3, key(i), bytes("v\(i)"), expiry: i % 3 == 0 ? start + Int64(i) + 1 : nil) }
        return keyspace
    }

    @Test("a save and a load give back every key with its value and absolute expiry, in its database")
    func roundTrip() throws {
        let dir = try ScratchDirectory()
        let path = dir.file("cached.snapshot")
        let original = Self.populated()

        let saved = try SnapshotWriter.save(original, to: path, now: start)
        let loaded = Keyspace(databases: 4)
        let summary = try #require(try SnapshotReader.load(path, into: loaded, now: start))

        #expect(saved.keys == 20_006)
        #expect(summary.keys == 20_006 && summary.expired == 0 && summary.damage == nil)
        #expect(summary.bytes == saved.bytes)
        #expect(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int == saved.bytes)
        #expect(summary.created == start)
        #expect(sameContents(contents(of: loaded), contents(of: original)))
        #expect(loaded.databases[1].count == 0)
        #expect(!FileManager.default.fileExists(atPath: SnapshotWriter.temporaryPath(for: path)))
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o600, "snapshots hold the data: readable by the server's user only")
    }

    @Test("an empty keyspace saves to a valid file that loads nothing")
    func emptyKeyspace() throws {
        let dir = try ScratchDirectory()
        let path = dir.file("s")
        let saved = try SnapshotWriter.save(Keyspace(databases: 2), to: path, now: start)
        #expect(saved.keys == 0 && saved.bytes == SnapshotFormat.headerSize + 9 + 20 + 4)
        let summary = try #require(try SnapshotReader.load(path, into: Keyspace(databases: 2), now: start))
        #expect(summary.keys == 0 && summary.damage == nil)
    }

    @Test("keys expired when saved are left out; keys that expire before the load are dropped and counted")
    func expiry() throws {
        let dir = try ScratchDirectory()
        let path = dir.file("s")
        let keyspace = Keyspace(databases: 1)
        keyspace.put(0, bytes("gone before the save"), bytes("x"), expiry: start - 1)
        keyspace.put(0, bytes("gone before the load"), bytes("x"), expiry: start + 1_000)
        keyspace.put(0, bytes("alive at its last millisecond"), bytes("x"), expiry: start + 5_000)
        keyspace.put(0, bytes("forever"), bytes("x"))

        let saved = try SnapshotWriter.save(keyspace, to: path, now: start)
        let loaded = Keyspace(databases: 1)
        let summary = try #require(try SnapshotReader.load(path, into: loaded, now: start + 5_000))

        #expect(saved.keys == 3)
        #expect(summary.keys == 2 && summary.expired == 1)
        #expect(Set(contents(of: loaded)[0]!.keys) == [bytes("alive at its last millisecond"), bytes("forever")])
    }

    @Test("no file: load returns nil and changes nothing")
    func missingFile() throws {
        let dir = try ScratchDirectory()
        let keyspace = Keyspace(databases: 1)
        keyspace.put(0, bytes("k"), bytes("v"))
        #expect(try SnapshotReader.load(dir.file("none"), into: keyspace, now: start) == nil)
        #expect(keyspace.totalKeys == 1)
    }

    /// A small file: one database block, one entries block of 3 keys, the end block.
    private func smallFile(_ dir: ScratchDirectory) throws -> (path: String, bytes: [UInt8]) {
        let path = dir.file("small")
        let keyspace = Keyspace(databases: 2)
        keyspace.put(1, bytes("a"), bytes("1"))
        keyspace.put(1, bytes("b"), bytes("22"), expiry: start + 10_000)
        keyspace.put(1, bytes("c"), [])
        _ = try SnapshotWriter.save(keyspace, to: path, now: start)
        return (path, Array(try Data(contentsOf: URL(fileURLWithPath: path))))
    }

    private func expectRefused(_ bytes: [UInt8], at path: String, kind: SnapshotError.Kind = .corrupt, _ what: String) {
        _ = FileManager.default.createFile(atPath: path, contents: Data(bytes))
        let keyspace = Keyspace(databases: 2)
        do {
            _ = try SnapshotReader.load(path, into: keyspace, now: start)
            Issue.record("\(what): loaded")
        } catch {
            #expect(error.kind == kind, "\(what): \(error)")
        }
        #expect(keyspace.totalKeys == 0, "\(what): a refused file leaves nothing behind")
    }

    @Test("every single flipped bit anywhere in the file is refused as corrupt, and nothing is loaded")
    func everyFlippedBit() throws {
        let dir = try ScratchDirectory()
        let (path, original) = try smallFile(dir)
        let damaged = dir.file("damaged")
        for offset in 0..<original.count {
            for bit in [0, 3, 7] {
                var bytes = original
                bytes[offset] ^= UInt8(1 << bit)
                expectRefused(bytes, at: damaged, "bit \(bit) of byte \(offset)")
            }
        }
        #expect(try SnapshotReader.load(path, into: Keyspace(databases: 2), now: start)?.keys == 3)
    }

    @Test("a file cut at any length is refused as corrupt")
    func everyTruncation() throws {
        let dir = try ScratchDirectory()
        let (_, original) = try smallFile(dir)
        for length in 0..<original.count {
            expectRefused(Array(original[0..<length]), at: dir.file("cut"), "cut to \(length) bytes")
        }
    }

    @Test("bytes after the end block, or a repeated block, are refused")
    func extraBytes() throws {
        let dir = try ScratchDirectory()
        let (_, original) = try smallFile(dir)
        expectRefused(original + [0], at: dir.file("x"), "one byte appended")
        expectRefused(original + original[SnapshotFormat.headerSize...], at: dir.file("x"), "blocks appended twice")
    }

    @Test("a removed or repeated block with a valid checksum is caught by the end block")
    func blockChain() throws {
        let dir = try ScratchDirectory()
        let (_, original) = try smallFile(dir)
        // Blocks: database (9 + 4 + 4 bytes) at 32, then entries, then end (9 + 20 + 4).
        let databaseBlock = Array(original[32..<49])
        let endStart = original.count - 33
        let entries = Array(original[49..<endStart])
        let end = Array(original[endStart...])
        let header = Array(original[0..<32])
        expectRefused(header + databaseBlock + end, at: dir.file("x"), "the entries block removed")
        expectRefused(header + databaseBlock + entries + entries + end, at: dir.file("x"), "the entries block twice")
        expectRefused(header + databaseBlock + databaseBlock + entries + end, at: dir.file("x"), "the database block twice")
    }

    @Test("a later format version is refused as unsupported, naming both versions")
    func newerVersion() throws {
        let dir = try ScratchDirectory()
        let (_, original) = try smallFile(dir)
        var bytes = original
        bytes[8] = 2
        let crc = CRC32C.checksum(Array(bytes[0..<28]))
        withUnsafeBytes(of: crc.littleEndian) { for i in 0..<4 { bytes[28 + i] = $0[i] } }
        let path = dir.file("v2")
        expectRefused(bytes, at: path, kind: .unsupportedVersion, "version 2")
        let error = #expect(throws: SnapshotError.self) { try SnapshotReader.load(path, into: Keyspace(databases: 2), now: start) }
        #expect(error?.description.contains("format version 2; this cached-server reads version 1") == true)
    }

    @Test("a database the server does not have is refused as incompatible")
    func tooFewDatabases() throws {
        let dir = try ScratchDirectory()
        let (path, _) = try smallFile(dir)  // keys in database 1
        let keyspace = Keyspace(databases: 1)
        let error = #expect(throws: SnapshotError.self) { try SnapshotReader.load(path, into: keyspace, now: start) }
        #expect(error?.kind == .incompatible)
        #expect(error?.reason.contains("holds database 1, but this server has 1 databases") == true, "\(String(describing: error))")
    }

    @Test("told to keep the intact part, a load cut short keeps every key of the blocks before the damage")
    func keepIntactPart() throws {
        let dir = try ScratchDirectory()
        let path = dir.file("s")
        let keyspace = Keyspace(databases: 1)
        // About 3 MB of keys: several entries blocks of at least 1 MiB.
        for i in 0..<30_000 { keyspace.put(0, key(i), [UInt8](repeating: UInt8(i & 0xFF), count: 100)) }
        let saved = try SnapshotWriter.save(keyspace, to: path, now: start)
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        _ = FileManager.default.createFile(atPath: path, contents: Data(bytes[0..<(bytes.count - 200_000)]))

        let loaded = Keyspace(databases: 1)
        let summary = try #require(try SnapshotReader.load(path, into: loaded, now: start, keepIntactPart: true))

        #expect(summary.damage?.kind == .corrupt, "\(String(describing: summary.damage))")
        #expect(summary.keys > 10_000 && summary.keys < saved.keys, "\(summary.keys) of \(saved.keys), \(bytes.count) bytes: \(String(describing: summary.damage))")
        #expect(loaded.totalKeys == summary.keys)
        let original = contents(of: keyspace)[0]!
        for (key, (value, _)) in contents(of: loaded)[0]! {
            #expect(original[key]?.0 == value)
        }
    }

    @Test("a save into a directory that does not exist fails with the system's reason and leaves the old file")
    func saveFails() throws {
        let dir = try ScratchDirectory()
        let keyspace = Keyspace(databases: 1)
        keyspace.put(0, bytes("k"), bytes("v"))
        let error = #expect(throws: SnapshotError.self) {
            try SnapshotWriter.save(keyspace, to: dir.file("missing/s"), now: start)
        }
        #expect(error?.kind == .io)
        #expect(error?.description.contains("No such file or directory") == true, "\(String(describing: error))")
        // A save over an existing snapshot replaces it whole.
        let path = dir.file("s")
        _ = try SnapshotWriter.save(keyspace, to: path, now: start)
        keyspace.put(0, bytes("k2"), bytes("v2"))
        _ = try SnapshotWriter.save(keyspace, to: path, now: start)
        #expect(try SnapshotReader.load(path, into: Keyspace(databases: 1), now: start)?.keys == 2)
    }

    @Test("a stale temporary file from an interrupted save is overwritten by the next save")
    func staleTemporaryFile() throws {
        let dir = try ScratchDirectory()
        let path = dir.file("s")
        _ = FileManager.default.createFile(atPath: SnapshotWriter.temporaryPath(for: path), contents: Data(repeating: 7, count: 5000))
        let keyspace = Keyspace(databases: 1)
        keyspace.put(0, bytes("k"), bytes("v"))
        _ = try SnapshotWriter.save(keyspace, to: path, now: start)
        #expect(try SnapshotReader.load(path, into: Keyspace(databases: 1), now: start)?.keys == 1)
        #expect(!FileManager.default.fileExists(atPath: SnapshotWriter.temporaryPath(for: path)))
    }
}

@Suite("Change counter")
struct ChangeCounterTests {
    @Test("inserts, overwrites, TTL changes, removals, expiry, FLUSHDB and SWAPDB all count; reads do not")
    func counts() {
        let keyspace = Keyspace(databases: 2)
        let shard = keyspace.databases[0].shard(for: hashOf(bytes("k")))
        #expect(keyspace.totalChanges == 0)
        shard.put(bytes("k"), bytes("v1"))  // insert
        shard.put(bytes("k"), bytes("v2"))  // overwritten in place
        shard.put(bytes("k"), bytes("longer"))  // replaced
        #expect(keyspace.totalChanges == 3)
        _ = shard.get(bytes("k"))
        #expect(keyspace.totalChanges == 3)
        shard.lock.withLock {
            bytes("k").withUnsafeBytes { k in
                let index = shard.find(k, hash: hashOf(bytes("k")))!
                shard.setExpiry(at: index, to: start + 10, hash: hashOf(bytes("k")))  // gains a TTL: rebuilt
            }
        }
        #expect(keyspace.totalChanges == 4)
        _ = shard.get(bytes("k"), now: start + 11)  // expires on access
        #expect(keyspace.totalChanges == 5)
        keyspace.put(0, bytes("a"), bytes("1"))
        keyspace.put(0, bytes("b"), bytes("1"))
        keyspace.databases[0].removeAll()
        #expect(keyspace.totalChanges == 9)
        let before = keyspace.totalChanges
        keyspace.swapDatabases(0, 1)
        #expect(keyspace.totalChanges > before)
    }
}
