import RESP

/// The properties the request parser must have on any bytes, checked on one input.
///
/// The input is a byte stream as a client would send it. It is parsed three times under each of several
/// limit sets: in one piece, one byte more per call (the parser resuming inside every header and payload), and
/// cut at a series of split points; each way must find the same commands and the same end (incomplete tail or
/// protocol error). Every command must respect the limits, and its spans must lie inside the bytes it consumed.
package enum RequestParserCheck {
    /// The limit sets every input is parsed under: the server's defaults, tight ones that inputs reach easily,
    /// and those of a client that has not authenticated yet.
    static let configurations: [(limits: RESPRequestLimits, authenticated: Bool)] = [
        (RESPRequestLimits(), true),
        (RESPRequestLimits(maxBulkLength: 64, maxInlineLength: 48, maxMultibulkLength: 8), true),
        // An inline limit under 22 bytes (a `$` and 20 digits, and a CR) would let a valid header such as
        // `*-10` be "too big" when it arrives in pieces and skipped when it arrives whole: keep it above.
        (RESPRequestLimits(maxBulkLength: 1, maxInlineLength: 22, maxMultibulkLength: 1), true),
        (RESPRequestLimits(unauthenticatedMaxMultibulkLength: 3, unauthenticatedMaxBulkLength: 16), false),
    ]

    /// Runs the checks on `input`; returns a description of the first property that does not hold.
    package static func check(_ input: UnsafeRawBufferPointer) -> String? {
        if let failure = checkKeyScanner(input) { return failure }
        for (limits, authenticated) in configurations {
            let whole = run(input, limits: limits, authenticated: authenticated, cuts: [])
            if let failure = whole.failure { return failure }
            var variants: [(String, [Int])] = []
            // Every split point, one byte at a time, for short inputs; a spread of cuts for long ones.
            if input.count <= 512 {
                variants.append(("byte by byte", Array(1..<max(input.count, 1))))
            }
            let stride = max(1, input.count / 61)
            variants.append(("cut every \(stride) bytes", Array(Swift.stride(from: stride, to: input.count, by: stride))))
            variants.append(("cut at 1, 2, 3 and n-1", [1, 2, 3, input.count - 1].filter { $0 > 0 && $0 < input.count }))
            for (name, cuts) in variants {
                let pieces = run(input, limits: limits, authenticated: authenticated, cuts: cuts)
                if let failure = pieces.failure { return "\(name): \(failure)" }
                if let difference = whole.difference(from: pieces) {
                    return "parsed \(name) under \(limits), authenticated: \(authenticated): \(difference)"
                }
            }
        }
        return nil
    }

    /// What parsing a stream found.
    struct Outcome {
        /// Each command's arguments, with whether it was inline.
        var commands: [(arguments: [[UInt8]], inline: Bool)] = []
        /// Where the unparsed tail starts (after the last command or skip).
        var end = 0
        /// The protocol error that ended the stream, if any.
        var error: RESPProtocolError?
        /// A property that did not hold.
        var failure: String?

        func difference(from other: Outcome) -> String? {
            if commands.count != other.commands.count {
                return "\(commands.count) commands in one piece, \(other.commands.count) in pieces"
            }
            for (i, (a, b)) in zip(commands, other.commands).enumerated() where a.arguments != b.arguments || a.inline != b.inline {
                return "command \(i) differs: \(a) in one piece, \(b) in pieces"
            }
            if end != other.end { return "the tail starts at \(end) in one piece, at \(other.end) in pieces" }
            switch (error, other.error) {
            case (nil, nil):
                return nil
            case (_, let b?) where b == .tooBigMultibulkCount || b == .tooBigBulkCount:
                // As in Redis, a header line is looked at only once its CR has arrived: before that, a read that
                // ends more than the inline limit past the `*` or `$` makes it "too big". Read whole, the same
                // line is an invalid length, a '$' expected, or (its LF still missing) not finished.
                return nil
            case (let a?, let b?) where a == b:
                return nil
            default:
                return "error \(String(describing: error)) in one piece, \(String(describing: other.error)) in pieces"
            }
        }
    }

    /// Parses `input` as a connection would, with the bytes available growing to each cut in turn and then to
    /// the whole input, and checks each result.
    static func run(
        _ input: UnsafeRawBufferPointer,
        limits: RESPRequestLimits,
        authenticated: Bool,
        cuts: [Int]
    ) -> Outcome {
        var outcome = Outcome()
        var parser = RESPRequestParser()
        var start = 0
        var cutIndex = 0
        var available = cuts.first ?? input.count
        var largestFrame = 0
        // Bounded: every pass either consumes a byte, or makes more bytes available, or ends.
        while true {
            let frame = UnsafeRawBufferPointer(rebasing: input[start..<available])
            largestFrame = max(largestFrame, frame.count)
            let result: RESPRequestParser.Result
            do throws(RESPProtocolError) {
                result = try parser.parse(frame, limits: limits, authenticated: authenticated)
            } catch {
                outcome.error = error
                outcome.end = start
                outcome.failure = checkStorage(parser, largestFrame: largestFrame)
                return outcome
            }
            if let failure = checkStorage(parser, largestFrame: largestFrame) {
                outcome.failure = failure
                return outcome
            }
            switch result {
            case .command(let consumed, let isInline):
                if let failure = checkCommand(parser, frame: frame, consumed: consumed, isInline: isInline, limits: limits) {
                    outcome.failure = failure
                    return outcome
                }
                let arguments: [[UInt8]] = parser.arguments.map { span in
                    isInline
                        ? Array(parser.inlineStorage[span.offset..<(span.offset + span.count)])
                        : Array(frame[span.offset..<(span.offset + span.count)])
                }
                outcome.commands.append((arguments, isInline))
                start += consumed
            case .skip(let consumed):
                guard consumed > 0 && consumed <= frame.count else {
                    outcome.failure = "skip of \(consumed) bytes out of \(frame.count)"
                    return outcome
                }
                start += consumed
            case .incomplete:
                if let missing = parser.missingBulkBytes(available: frame.count, peek: frame) {
                    // Only ever asked for inside a payload whose length passed the limits.
                    guard missing > 0, missing <= limits.maxBulkLength + 2 else {
                        outcome.failure = "missingBulkBytes \(missing) with limits \(limits)"
                        return outcome
                    }
                }
                if available == input.count {
                    outcome.end = start
                    return outcome
                }
                // More bytes arrive; the frame still starts where it did.
                cutIndex += 1
                while cutIndex < cuts.count && cuts[cutIndex] <= available { cutIndex += 1 }
                available = cutIndex < cuts.count ? cuts[cutIndex] : input.count
                continue
            }
            if start == available && available < input.count {
                cutIndex += 1
                while cutIndex < cuts.count && cuts[cutIndex] <= available { cutIndex += 1 }
                available = cutIndex < cuts.count ? cuts[cutIndex] : input.count
            }
            if start == input.count {
                outcome.end = start
                return outcome
            }
        }
    }

    /// Storage follows what clients send, never what they declare: every span takes at least 6 bytes
    /// (`$0\r\n\r\n`), and inline arguments are never longer than their line.
    static func checkStorage(_ parser: RESPRequestParser, largestFrame: Int) -> String? {
        let spanBound = max(32, 2 * (largestFrame / 6 + 1))
        let storageBound = max(64, 2 * largestFrame)
        guard parser.arguments.capacity <= spanBound, parser.inlineStorage.capacity <= storageBound else {
            return "storage of \(parser.arguments.capacity) spans and \(parser.inlineStorage.capacity) bytes after frames of at most \(largestFrame) bytes"
        }
        return nil
    }

    /// Checks one command the parser returned against the bytes and the limits.
    static func checkCommand(
        _ parser: RESPRequestParser,
        frame: UnsafeRawBufferPointer,
        consumed: Int,
        isInline: Bool,
        limits: RESPRequestLimits
    ) -> String? {
        guard consumed > 0 && consumed <= frame.count else {
            return "consumed \(consumed) of \(frame.count) bytes"
        }
        guard !parser.arguments.isEmpty else { return "a command without arguments" }
        if isInline {
            // Unescaping never makes an argument longer than the line it came from.
            guard consumed - 1 <= limits.maxInlineLength else {
                return "an inline command of \(consumed) bytes passed the limit of \(limits.maxInlineLength)"
            }
            guard parser.inlineStorage.count <= consumed else {
                return "\(parser.inlineStorage.count) bytes of inline arguments from a \(consumed)-byte line"
            }
            for span in parser.arguments where span.offset < 0 || span.count < 0 || span.offset + span.count > parser.inlineStorage.count {
                return "inline span \(span) outside \(parser.inlineStorage.count) bytes"
            }
        } else {
            guard parser.arguments.count <= limits.maxMultibulkLength else {
                return "\(parser.arguments.count) arguments passed the limit of \(limits.maxMultibulkLength)"
            }
            var previousEnd = 0
            for span in parser.arguments {
                guard span.count >= 0, span.count <= limits.maxBulkLength else {
                    return "an argument of \(span.count) bytes passed the limit of \(limits.maxBulkLength)"
                }
                guard span.offset >= previousEnd, span.offset + span.count + 2 <= consumed else {
                    return "span \(span) outside the \(consumed) bytes consumed, or overlapping the one before"
                }
                previousEnd = span.offset + span.count
            }
            // Every argument takes at least "$0\r\n\r\n": a frame cannot declare more than its bytes can hold.
            guard parser.arguments.count * 6 <= consumed else {
                return "\(parser.arguments.count) arguments in \(consumed) bytes"
            }
        }
        return nil
    }

    /// The key scanner (the server's prefetch hint) reports only keys inside the input, and stops.
    static func checkKeyScanner(_ input: UnsafeRawBufferPointer) -> String? {
        var failure: String?
        let start = UInt(bitPattern: input.baseAddress)
        let end = start + UInt(input.count)
        RESPKeyScanner.forEachKey(in: input, limit: .max) { key in
            let keyStart = UInt(bitPattern: key.baseAddress)
            if key.count > 0 && (keyStart < start || keyStart + UInt(key.count) > end) {
                failure = "the key scanner reported \(key.count) bytes outside the input"
            }
        }
        return failure
    }
}
