import CJemalloc
import Glibc
import Synchronization

/// Where entries live: jemalloc, with entries that have a TTL in an arena of their own.
///
/// Keys that expire together were mostly written together, and in a shared heap they sit interleaved with
/// keys that never expire, so freeing them frees no whole page and resident memory stays where it was. Kept
/// in their own arena (and never passed through a thread cache, which would hand their memory to other
/// allocations), they leave whole pages empty when they expire, and ``purgeVolatile()`` returns those pages.
/// jemalloc's size classes also fit entries closely: a 116-byte entry takes 128 bytes, with no chunk header.
@usableFromInline package enum EntryMemory {
    /// The arena of entries with a TTL, created on first use.
    @usableFromInline static let volatileFlags: Int32 = {
        var arena: UInt32 = 0
        var size = MemoryLayout<UInt32>.size
        let rc = mallctl("arenas.create", &arena, &size, nil, 0)
        precondition(rc == 0, "jemalloc could not create an arena (mallctl arenas.create: \(rc))")
        return cached_jemalloc_arena_flags(arena)
    }()

    @usableFromInline static let volatileArena: UInt32 = {
        UInt32((volatileFlags >> 20) - 1)
    }()

    /// jemalloc's smallest size class of blocks with pages of their own ("large" extents): four pages.
    @usableFromInline static let smallestLargeSize: Int = {
        var size = 0
        var length = MemoryLayout<Int>.size
        guard mallctl("arenas.lextent.0.size", &size, &length, nil, 0) == 0, size > 0 else { return 16 * 1024 }
        return size
    }()

    /// Allocates `size` bytes, in the TTL arena when `volatile`. Nil when memory is exhausted.
    ///
    /// The result is 16-byte aligned, as table slots require: jemalloc aligns each allocation to its size
    /// class, and every class from 16 bytes up is a multiple of 16, so requests are rounded up to 16.
    ///
    /// Entries are always jemalloc's (`mallocx`, never `malloc`), because ``allocatedSize(_:)`` asks jemalloc
    /// about them: `malloc` is jemalloc's only while nothing else interposes it, and a sanitizer's runtime does.
    @inlinable @inline(__always)
    package static func allocate(_ size: Int, volatile: Bool) -> UnsafeMutableRawPointer? {
        let request = max(size, 16)
        return mallocx(request, volatile ? volatileFlags : 0)
    }

    /// Frees what ``allocate(_:volatile:)`` returned, with the same `volatile`.
    @inlinable @inline(__always)
    package static func free(_ pointer: UnsafeMutableRawPointer, volatile: Bool) {
        dallocx(pointer, volatile ? volatileFlags : 0)
    }

    /// Frees an entry whatever arena it came from, bypassing the thread cache (which would hand a block of
    /// the TTL arena to other allocations): a large entry that gained or lost its TTL in place.
    @inlinable @inline(__always)
    package static func freeUncached(_ pointer: UnsafeMutableRawPointer) {
        dallocx(pointer, cached_jemalloc_uncached_flags())
    }

    /// The bytes the allocator really set aside for `pointer` (its size class).
    @inlinable @inline(__always)
    package static func allocatedSize(_ pointer: UnsafeMutableRawPointer) -> Int {
        sallocx(pointer, 0)
    }

    /// Tables of at least this many bytes (a page) are mapped from the system directly, so that the memory of a
    /// table that grew, shrank or was emptied goes back at once instead of lingering in an arena that entries
    /// with a TTL cannot use. Table sizes are powers of two, so a mapped table fills its pages exactly. (With
    /// 64 KiB here, loading a million keys with a TTL left about 8 MB of outgrown tables resident for the
    /// second until the allocator's decay returned them.)
    package static let mappedTableBytes = max(4096, sysconf(Int32(_SC_PAGESIZE)))

    /// Bytes of tables mapped from the system (outside the allocator's statistics).
    package static let mappedBytes = Atomic<Int>(0)

    /// Heap bytes that are not the dataset's: the allocator's allocated bytes plus mapped tables, less
    /// `datasetBytes` (connection buffers, parser state, allocator thread caches). Never negative.
    package static func overheadBytes(datasetBytes: Int, statistics: AllocatorStatistics = .current()) -> Int {
        max(0, statistics.allocated + mappedBytes.load(ordering: .relaxed) - datasetBytes)
    }

    /// A zeroed table of `slots` 64-bit slots.
    package static func allocateTable(slots: Int) -> UnsafeMutablePointer<UInt64> {
        let bytes = slots * MemoryLayout<UInt64>.stride
        if bytes >= mappedTableBytes {
            // Fresh anonymous pages read as zero, and cost nothing until they are touched.
            let raw = mmap(nil, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
            precondition(raw != MAP_FAILED, "out of memory: could not map \(bytes) bytes for a table")
            mappedBytes.add(bytes, ordering: .relaxed)
            return raw!.bindMemory(to: UInt64.self, capacity: slots)
        }
        guard let raw = calloc(slots, MemoryLayout<UInt64>.stride) else {
            preconditionFailure("out of memory: could not allocate \(bytes) bytes for a table")
        }
        return raw.bindMemory(to: UInt64.self, capacity: slots)
    }

    /// Frees a table from ``allocateTable(slots:)`` with the same `slots`.
    package static func freeTable(_ table: UnsafeMutablePointer<UInt64>, slots: Int) {
        let bytes = slots * MemoryLayout<UInt64>.stride
        if bytes >= mappedTableBytes {
            munmap(table, bytes)
            mappedBytes.subtract(bytes, ordering: .relaxed)
        } else {
            CJemalloc.free(table)
        }
    }

    /// Returns the TTL arena's empty pages to the system (after the sweeper reclaimed many keys).
    package static func purgeVolatile() {
        let name = "arena.\(volatileArena).purge"
        _ = mallctl(name, nil, nil, nil, 0)
    }

    /// Sets how long freed pages may stay resident before they are returned, for every arena (existing and
    /// future). jemalloc's default is 10 s; a cache server wants memory back sooner than that. The time only
    /// passes while something triggers decay: the server's sweeper calls ``decayAll()`` on every cycle while
    /// the dataset changes and for two seconds after, and once a second otherwise.
    package static func configureDecay(milliseconds: Int) {
        var value = milliseconds
        let size = MemoryLayout<Int>.size
        _ = mallctl("arenas.dirty_decay_ms", nil, nil, &value, size)
        _ = mallctl("arenas.muzzy_decay_ms", nil, nil, &value, size)
        var count: UInt32 = 0
        var countSize = MemoryLayout<UInt32>.size
        guard mallctl("arenas.narenas", &count, &countSize, nil, 0) == 0 else { return }
        for arena in 0..<count {
            _ = mallctl("arena.\(arena).dirty_decay_ms", nil, nil, &value, size)
            _ = mallctl("arena.\(arena).muzzy_decay_ms", nil, nil, &value, size)
        }
    }

    /// Returns pages that have been free for longer than the decay time, in every arena.
    package static func decayAll() {
        _ = mallctl("arena.4096.decay", nil, nil, nil, 0)
    }

    /// Returns every arena's empty pages to the system (after FLUSHALL).
    package static func purgeAll() {
        // MALLCTL_ARENAS_ALL is 4096 in jemalloc 5.
        _ = mallctl("arena.4096.purge", nil, nil, nil, 0)
    }
}

/// What the allocator reports about the whole process's heap (INFO memory's `allocator_*` fields).
package struct AllocatorStatistics: Sendable {
    /// Bytes handed out to the program.
    package var allocated = 0
    /// Bytes in pages that hold at least one allocation.
    package var active = 0
    /// Bytes in physically resident pages the allocator maps, including its own metadata.
    package var resident = 0
    /// Bytes of the allocator's own bookkeeping.
    package var metadata = 0
    /// Bytes mapped by the allocator.
    package var mapped = 0

    /// Reads the current figures (it refreshes jemalloc's statistics epoch first).
    package static func current() -> AllocatorStatistics {
        var epoch: UInt64 = 1
        var newEpoch: UInt64 = 1
        var epochSize = MemoryLayout<UInt64>.size
        _ = mallctl("epoch", &epoch, &epochSize, &newEpoch, epochSize)
        func read(_ name: String) -> Int {
            var value = 0
            var size = MemoryLayout<Int>.size
            return mallctl(name, &value, &size, nil, 0) == 0 ? value : 0
        }
        return AllocatorStatistics(
            allocated: read("stats.allocated"),
            active: read("stats.active"),
            resident: read("stats.resident"),
            metadata: read("stats.metadata"),
            mapped: read("stats.mapped"))
    }
}
