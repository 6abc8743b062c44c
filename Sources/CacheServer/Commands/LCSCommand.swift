import CacheCore
import Glibc
import RESP

/// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]: the longest common subsequence of two strings
/// (a missing key is the empty string), by the textbook dynamic programme over a table of
/// (length1 + 1) × (length2 + 1) cells. Where several subsequences are longest, the one given, and its
/// ranges, are those Redis gives: the table is walked back from its end, a match taken whenever the bytes
/// agree, otherwise a step back in the first string when that keeps a longer subsequence, else in the second.
package enum LCSCommand {
    /// A run of matched bytes: positions in the first and in the second string, inclusive.
    package struct Range: Equatable {
        package var firstStart: Int
        package var firstEnd: Int
        package var secondStart: Int
        package var secondEnd: Int
        package var length: Int { firstEnd - firstStart + 1 }

        package init(firstStart: Int, firstEnd: Int, secondStart: Int, secondEnd: Int) {
            (self.firstStart, self.firstEnd, self.secondStart, self.secondEnd) = (firstStart, firstEnd, secondStart, secondEnd)
        }
    }

    static func lcs(_ c: inout CommandContext) {
        // The options first (their errors are answered after the keys are read, as Redis reads them first).
        var wantLength = false
        var wantIndexes = false
        var withMatchLength = false
        var minimumMatch = 0
        var optionError: StaticString?
        var i = 3
        let a = c.arguments
        while i < a.count && optionError == nil {
            if a.matches(i, "idx") {
                wantIndexes = true
            } else if a.matches(i, "len") {
                wantLength = true
            } else if a.matches(i, "withmatchlen") {
                withMatchLength = true
            } else if a.matches(i, "minmatchlen") && i + 1 < a.count {
                if let given = a.integer(i + 1) { minimumMatch = max(0, given) } else { optionError = ReplyError.notInteger }
                i += 1
            } else {
                optionError = ReplyError.syntax
            }
            i += 1
        }
        if optionError == nil && wantIndexes && wantLength {
            optionError = "ERR If you want both the length and indexes, please just use IDX."
        }
        // Both keys are read (a hit or a miss each) at one moment, and their values copied out only when the
        // command will run: the computation holds no lock.
        let limit = c.server.config.protoMaxBulkLength
        let read = values(&c) { firstCount, secondCount -> StaticString? in
            if let optionError { return optionError }
            if firstCount >= Int(UInt32.max) - 1 || secondCount >= Int(UInt32.max) - 1 {
                return "ERR String too long for LCS"
            }
            // Redis refuses a table larger than proto-max-bulk-len bytes (4 a cell), whatever is asked.
            let (cells, overflow) = (firstCount + 1).multipliedReportingOverflow(by: secondCount + 1)
            guard !overflow, cells <= limit / 4 else {
                return "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len"
            }
            return nil
        }
        let first: [UInt8]
        let second: [UInt8]
        switch read {
        case .failure(let refusal): return c.error(refusal.message)
        case .success(let values): (first, second) = values
        }
        // LEN alone needs two rows of the table, not all of it. Past the largest table the default limit allows,
        // the whole table is allocated as Redis does, so that one too large for memory is refused, not computed
        // for hours.
        if wantLength && (first.count + 1) * (second.count + 1) <= Self.twoRowCells {
            return c.integer(length(first, second))
        }
        // A subsequence is no longer than the shorter string: when that fits 16 bits, so does every cell, and
        // the table takes half the memory (and the time spent filling it, which is mostly memory traffic).
        let walked =
            min(first.count, second.count) < Int(UInt16.max)
            ? Table<UInt16>(first, second)?.walkBack(minimumMatch: minimumMatch)
            : Table<UInt32>(first, second)?.walkBack(minimumMatch: minimumMatch)
        guard let (common, ranges) = walked else {
            return c.error("ERR Insufficient memory, failed allocating transient memory for LCS")
        }
        if wantLength { return c.integer(common.count) }
        guard wantIndexes else {
            return common.withUnsafeBytes { c.bulk($0) }
        }
        c.reply.writeRESPMapHeader(2, c.version)
        c.bulk("matches")
        c.arrayHeader(ranges.count)
        for range in ranges {
            c.arrayHeader(withMatchLength ? 3 : 2)
            c.arrayHeader(2)
            c.integer(range.firstStart)
            c.integer(range.firstEnd)
            c.arrayHeader(2)
            c.integer(range.secondStart)
            c.integer(range.secondEnd)
            if withMatchLength { c.integer(range.length) }
        }
        c.bulk("len")
        c.integer(common.count)
    }

    /// The most cells LEN computes in two rows: the table of the default proto-max-bulk-len (512 MB).
    static let twoRowCells = (512 << 20) / 4

    /// Why LCS will not run, as its error reply.
    struct Refusal: Error {
        let message: StaticString
    }

    /// Copies of the values of the keys in arguments 1 and 2 (empty when missing), read under their shards'
    /// locks, taken together; `check` sees their lengths first and may refuse, and then nothing is copied.
    private static func values(
        _ c: inout CommandContext, check: (Int, Int) -> StaticString?
    ) -> Result<([UInt8], [UInt8]), Refusal> {
        let db = c.database
        var shards = ShardSet()
        shards.insert(Database.shardIndex(for: c.hash(1)))
        shards.insert(Database.shardIndex(for: c.hash(2)))
        shards.lock(in: db)
        defer { shards.unlock(in: db) }
        // Looked up in turn; the bytes are borrowed only once both lookups are done (a lookup may reclaim an
        // expired key and move the other's slot).
        for index in 1...2 {
            let hash = c.hash(index)
            _ = c.lookUpForRead(index, in: db.shard(for: hash), hash: hash)
        }
        func value(_ index: Int) -> UnsafeRawBufferPointer {
            let hash = c.hash(index)
            let shard = db.shard(for: hash)
            guard let slot = shard.find(c.arguments[index], hash: hash) else { return UnsafeRawBufferPointer(start: nil, count: 0) }
            return shard.entry(at: slot).value
        }
        let (first, second) = (value(1), value(2))
        if let refusal = check(first.count, second.count) { return .failure(Refusal(message: refusal)) }
        return .success((Array(first), Array(second)))
    }

    /// The length of the longest common subsequence, with two rows of the table instead of all of it.
    package static func length(_ first: [UInt8], _ second: [UInt8]) -> Int {
        guard !first.isEmpty && !second.isEmpty else { return 0 }
        var previous = [UInt32](repeating: 0, count: second.count + 1)
        var current = previous
        first.withUnsafeBufferPointer { a in
            second.withUnsafeBufferPointer { b in
                for x in a {
                    previous.withUnsafeBufferPointer { up in
                        current.withUnsafeMutableBufferPointer { row in
                            for j in 1...b.count {
                                row[j] = x == b[j - 1] ? up[j - 1] + 1 : max(up[j], row[j - 1])
                            }
                        }
                    }
                    swap(&previous, &current)
                }
            }
        }
        return Int(previous[second.count])
    }

    /// The whole table: cell (i, j) holds the length of the longest common subsequence of the first i bytes of
    /// the first string and the first j of the second.
    package final class Table<Cell: FixedWidthInteger & UnsignedInteger> {
        let first: [UInt8]
        let second: [UInt8]
        let width: Int
        let cells: UnsafeMutablePointer<Cell>

        /// The filled table, or nil when its memory cannot be had (Redis answers an error then, not a crash).
        package init?(_ first: [UInt8], _ second: [UInt8]) {
            self.first = first
            self.second = second
            width = second.count + 1
            let (count, overflow) = (first.count + 1).multipliedReportingOverflow(by: width)
            // Zeroed pages from the system: row 0 and column 0 must be 0, and the rest is written below.
            guard !overflow, let raw = calloc(count, MemoryLayout<Cell>.stride) else { return nil }
            cells = raw.bindMemory(to: Cell.self, capacity: count)
            let (t, width) = (cells, self.width)
            first.withUnsafeBufferPointer { a in
                second.withUnsafeBufferPointer { b in
                    guard !a.isEmpty && !b.isEmpty else { return }
                    for i in 1...a.count {
                        let row = i * width
                        let up = row - width
                        for j in 1...b.count {
                            t[row + j] = a[i - 1] == b[j - 1] ? t[up + j - 1] + 1 : max(t[up + j], t[row + j - 1])
                        }
                    }
                }
            }
        }

        deinit { free(cells) }

        func cell(_ i: Int, _ j: Int) -> Cell { cells[i * width + j] }

        /// The subsequence, and its runs of contiguous matches from the last to the first, those shorter than
        /// `minimumMatch` left out.
        package func walkBack(minimumMatch: Int) -> (common: [UInt8], ranges: [Range]) {
            var i = first.count
            var j = second.count
            var common = [UInt8](repeating: 0, count: Int(cell(i, j)))
            var filled = common.count
            var ranges: [Range] = []
            var run: Range?
            func close() {
                if let r = run, minimumMatch == 0 || r.length >= minimumMatch { ranges.append(r) }
                run = nil
            }
            while i > 0 && j > 0 {
                if first[i - 1] == second[j - 1] {
                    filled -= 1
                    common[filled] = first[i - 1]
                    i -= 1
                    j -= 1
                    if var r = run, r.firstStart == i + 1, r.secondStart == j + 1 {
                        r.firstStart = i
                        r.secondStart = j
                        run = r
                    } else {
                        close()
                        run = Range(firstStart: i, firstEnd: i, secondStart: j, secondEnd: j)
                    }
                    // A run that reached the start of either string is complete.
                    if i == 0 || j == 0 { close() }
                } else {
                    if cell(i - 1, j) > cell(i, j - 1) { i -= 1 } else { j -= 1 }
                    close()
                }
            }
            return (common, ranges)
        }
    }
}
