/// Decompression of LZF, the compression Redis applies to strings of more than 20 bytes in RDB files and DUMP
/// payloads. A stream is a series of runs, each introduced by a control byte `c`:
///
/// - `c < 32`: `c + 1` literal bytes follow;
/// - otherwise a back reference: length `c >> 5` (7 means a further byte is added to it), plus 2; distance
///   `(c & 31) << 8` plus the next byte, plus 1, back from the end of what was produced so far (the copy may
///   overlap what it produces, as for a run of one repeated byte).
package enum LZF {
    /// The most bytes one input byte can stand for: a 3-byte back reference of the longest length (264 bytes).
    package static let maximumExpansion = 88

    /// `input` decompressed, when it produces exactly `count` bytes; nil for a malformed stream or another
    /// length.
    package static func decompress(_ input: UnsafeRawBufferPointer, count: Int) -> [UInt8]? {
        // As Redis reads it: for a length of 0, liblzf's "no room for output" (0) is the length asked for, so
        // any stream makes an empty string.
        if count == 0 { return [] }
        guard count >= 0, count <= input.count * maximumExpansion else { return nil }
        // Grown as bytes are produced, not allocated at the announced length first: a stream that breaks off
        // early costs only what it produced.
        var out: [UInt8] = []
        out.reserveCapacity(min(count, input.count * 4))
        var i = 0
        while i < input.count {
            let control = Int(input[i])
            i += 1
            if control < 32 {
                let length = control + 1
                guard i + length <= input.count, out.count + length <= count else { return nil }
                out.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[i..<i + length]))
                i += length
            } else {
                var length = control >> 5
                if length == 7 {
                    guard i < input.count else { return nil }
                    length += Int(input[i])
                    i += 1
                }
                length += 2
                guard i < input.count else { return nil }
                let distance = ((control & 31) << 8) + Int(input[i]) + 1
                i += 1
                guard distance <= out.count, out.count + length <= count else { return nil }
                // Byte by byte: the copy may overlap what it produces.
                var from = out.count - distance
                for _ in 0..<length {
                    out.append(out[from])
                    from += 1
                }
            }
        }
        return out.count == count ? out : nil
    }
}
