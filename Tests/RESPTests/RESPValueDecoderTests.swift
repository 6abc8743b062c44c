import NIOCore
import NIOTestUtils
import RESP
import Testing

/// Wire bytes and the value they decode to, one of each RESP2 and RESP3 type and some nestings.
let decoderSamples: [(wire: String, value: RESPValue)] = [
    ("+OK\r\n", .simple("OK")),
    ("+\r\n", .simple("")),
    ("-ERR unknown command 'FOO'\r\n", .error("ERR unknown command 'FOO'")),
    (":0\r\n", .integer(0)),
    (":-42\r\n", .integer(-42)),
    (":9223372036854775807\r\n", .integer(Int.max)),
    (":-9223372036854775808\r\n", .integer(Int.min)),
    ("$5\r\nhello\r\n", .bulk("hello")),
    ("$0\r\n\r\n", .bulk("")),
    ("$4\r\na\r\nb\r\n", .bulk("a\r\nb")),
    ("$-1\r\n", .nullBulkString),
    ("*-1\r\n", .nullArray),
    ("*0\r\n", .array([])),
    ("*2\r\n$3\r\nfoo\r\n:1\r\n", .array([.bulk("foo"), .integer(1)])),
    ("_\r\n", .null),
    ("#t\r\n", .boolean(true)),
    ("#f\r\n", .boolean(false)),
    (",3.14\r\n", .double(3.14)),
    (",-1.5e-3\r\n", .double(-0.0015)),
    (",1E10\r\n", .double(1e10)),
    (",10\r\n", .double(10)),
    (",inf\r\n", .double(.infinity)),
    (",-inf\r\n", .double(-.infinity)),
    (",nan\r\n", .double(.nan)),
    ("(3492890328409238509324850943850943825024385\r\n", .bigNumber(buffer("3492890328409238509324850943850943825024385"))),
    ("(-12\r\n", .bigNumber(buffer("-12"))),
    ("!21\r\nSYNTAX invalid syntax\r\n", .bulkError(buffer("SYNTAX invalid syntax"))),
    ("=15\r\ntxt:Some string\r\n", .verbatimString(format: buffer("txt"), text: buffer("Some string"))),
    ("=4\r\nmkd:\r\n", .verbatimString(format: buffer("mkd"), text: buffer(""))),
    ("%2\r\n+first\r\n:1\r\n+second\r\n:2\r\n", .map([(.simple("first"), .integer(1)), (.simple("second"), .integer(2))])),
    ("%0\r\n", .map([])),
    ("~3\r\n+a\r\n+b\r\n+a\r\n", .set([.simple("a"), .simple("b"), .simple("a")])),
    (
        ">3\r\n$7\r\nmessage\r\n$3\r\nchn\r\n$5\r\nhello\r\n",
        .push([.bulk("message"), .bulk("chn"), .bulk("hello")])
    ),
    (
        "*3\r\n*1\r\n%1\r\n+k\r\n~2\r\n#t\r\n_\r\n>0\r\n$-1\r\n",
        .array([.array([.map([(.simple("k"), .set([.boolean(true), .null]))])]), .push([]), .nullBulkString])
    ),
    (
        "|1\r\n+key-popularity\r\n%2\r\n$1\r\na\r\n,0.1923\r\n$1\r\nb\r\n,0.0012\r\n*2\r\n:2039123\r\n:9543892\r\n",
        .array([.integer(2_039_123), .integer(9_543_892)])
    ),
]

@Suite("RESPValueDecoder")
struct RESPValueDecoderTests {
    @Test("decodes each RESP2 and RESP3 type, fed whole", arguments: decoderSamples)
    func decodesEachType(wire: String, value: RESPValue) throws {
        #expect(try decodeOne(wire) == value)
    }

    @Test("gives the same values however the bytes are split (ByteToMessageDecoderVerifier)")
    func verifierSplitsAndMergesInput() throws {
        try ByteToMessageDecoderVerifier.verifyDecoder(
            inputOutputPairs: decoderSamples.map { (buffer($0.wire), [$0.value]) },
            decoderFactory: { RESPValueDecoder() }
        )
    }

    @Test("returns nil for every proper prefix, then the value once the last byte arrives", arguments: decoderSamples)
    func everyPrefixIsIncomplete(wire: String, value: RESPValue) throws {
        let bytes = Array(wire.utf8)
        for cut in 0..<bytes.count {
            var decoder = RESPValueDecoder()
            var input = buffer(Array(bytes[..<cut]))
            #expect(try decoder.decode(buffer: &input) == nil, "cut at \(cut)")
            #expect(input.readerIndex == 0)
            // The same decoder resumes when the rest arrives in the same buffer.
            input.writeBytes(bytes[cut...])
            #expect(try decoder.decode(buffer: &input) == value, "cut at \(cut)")
            #expect(input.readableBytes == 0)
        }
    }

    @Test("decodes pipelined replies one at a time, leaving the next one's bytes unread")
    func pipelinedReplies() throws {
        var decoder = RESPValueDecoder()
        var input = buffer("+OK\r\n:1\r\n$3\r\nfo")
        #expect(try decoder.decode(buffer: &input) == .simple("OK"))
        #expect(try decoder.decode(buffer: &input) == .integer(1))
        #expect(try decoder.decode(buffer: &input) == nil)
        #expect(text(input) == "$3\r\nfo")
        input.writeString("o\r\n")
        #expect(try decoder.decode(buffer: &input) == .bulk("foo"))
    }

    @Test("a bulk payload is a slice of the received buffer, not a copy")
    func bulkPayloadSharesStorage() throws {
        var decoder = RESPValueDecoder()
        var input = buffer("$5\r\nhello\r\n")
        let received = input.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) }
        guard case .bulkString(let payload) = try decoder.decode(buffer: &input) else {
            Issue.record("not a bulk string")
            return
        }
        let sliced = payload.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) }
        #expect(sliced == received + 4)
    }

    @Test("drops an attribute nested in an aggregate: the array still has its declared elements")
    func dropsNestedAttribute() throws {
        #expect(try decodeOne("*2\r\n|1\r\n+ttl\r\n:3600\r\n:1\r\n:2\r\n") == .array([.integer(1), .integer(2)]))
    }

    @Test("keeps attributes when asked, wrapping the value they precede")
    func keepsAttributes() throws {
        let decoder = RESPValueDecoder(keepsAttributes: true)
        let value = try decodeOne("*2\r\n|1\r\n+ttl\r\n:3600\r\n:1\r\n:2\r\n", decoder: decoder)
        #expect(value == .array([.attributed(.integer(1), attributes: [(.simple("ttl"), .integer(3600))]), .integer(2)]))
    }

    @Test("merges consecutive attributes into one list, and an empty one adds nothing")
    func mergesConsecutiveAttributes() throws {
        let decoder = RESPValueDecoder(keepsAttributes: true)
        let value = try decodeOne("|1\r\n+a\r\n:1\r\n|0\r\n|1\r\n+b\r\n:2\r\n+OK\r\n", decoder: decoder)
        #expect(value == .attributed(.simple("OK"), attributes: [(.simple("a"), .integer(1)), (.simple("b"), .integer(2))]))
        #expect(try decodeOne("|0\r\n+OK\r\n", decoder: decoder) == .simple("OK"))
    }

    @Test("an attribute alone is not a reply: the decoder waits for the value it annotates")
    func attributeWaitsForItsValue() throws {
        var decoder = RESPValueDecoder()
        var input = buffer("|1\r\n+a\r\n:1\r\n")
        #expect(try decoder.decode(buffer: &input) == nil)
        input.writeString(":7\r\n")
        #expect(try decoder.decode(buffer: &input) == .integer(7))
    }

    @Test("decodes aggregates nested exactly as deep as the limit")
    func nestingAtTheLimit() throws {
        let wire = String(repeating: "*1\r\n", count: 100) + ":1\r\n"
        var expected = RESPValue.integer(1)
        for _ in 0..<100 { expected = .array([expected]) }
        #expect(try decodeOne(wire) == expected)
    }

    @Test("a map's pairs keep their order and duplicates")
    func mapKeepsOrderAndDuplicates() throws {
        let value = try decodeOne("%3\r\n+b\r\n:1\r\n+a\r\n:2\r\n+b\r\n:3\r\n")
        guard case .map(let pairs) = value else {
            Issue.record("not a map: \(value)")
            return
        }
        #expect(pairs.map(\.key) == [.simple("b"), .simple("a"), .simple("b")])
        #expect(pairs.map(\.value) == [.integer(1), .integer(2), .integer(3)])
    }

    @Test("any two NaNs are equal, but 0 and -0 are not")
    func doubleEquality() throws {
        #expect(try decodeOne(",nan\r\n") == .double(-.nan))
        #expect(try decodeOne(",-0\r\n") != .double(0))
        #expect(try decodeOne(",-0\r\n") == .double(-0.0))
    }

    @Test("values work as dictionary keys")
    func hashable() throws {
        var seen: Set<RESPValue> = []
        for wire in ["$1\r\na\r\n", "+a\r\n", "$1\r\na\r\n", ",nan\r\n", ",nan\r\n"] {
            seen.insert(try decodeOne(wire))
        }
        #expect(seen == [.bulk("a"), .simple("a"), .double(.nan)])
    }

    @Test("decodeLast: a stream that ends inside a reply is an error")
    func truncatedAtEndOfStream() throws {
        var decoder = RESPValueDecoder()
        var input = buffer("$5\r\nhel")
        #expect(throws: RESPDecodingError.truncated) { try decoder.decodeLast(buffer: &input, seenEOF: true) }
    }

    @Test("decodeLast: complete replies still decode, and an empty buffer gives nil")
    func decodeLastAtEndOfStream() throws {
        var decoder = RESPValueDecoder()
        var input = buffer(":1\r\n")
        #expect(try decoder.decodeLast(buffer: &input, seenEOF: true) == .integer(1))
        #expect(try decoder.decodeLast(buffer: &input, seenEOF: true) == nil)
    }

    @Test("RESPValue.decode returns the value and the length of its reply")
    func staticDecode() throws {
        var input = buffer("xx$3\r\nfoo\r\n:1\r\n")
        input.moveReaderIndex(forwardBy: 2)
        let decoded = try RESPValue.decode(input)
        #expect(decoded?.value == .bulk("foo"))
        #expect(decoded?.length == 9)
        #expect(try RESPValue.decode(buffer("$3\r\nfo")) == nil)
    }
}

// MARK: - Malformed and hostile input

/// Bytes that are not a valid reply, and the error they raise.
let malformedSamples: [(wire: String, error: RESPDecodingError)] = [
    ("?x\r\n", .unknownType),
    ("HTTP/1.1 200 OK\r\n", .unknownType),
    ("*1\r\n@\r\n", .unknownType),
    ("+OK\rX", .invalidLineEnding),
    ("$3\r\nfooXY", .invalidLineEnding),
    ("$3\r\nfoo\nX", .invalidLineEnding),
    ("*1\r\n:1\r:", .invalidLineEnding),
    ("+O\nK\r\n", .invalidSimpleString),
    ("-ERR\nx\r\n", .invalidSimpleString),
    (":+1\r\n", .invalidInteger),
    (":007\r\n", .invalidInteger),
    (":-0\r\n", .invalidInteger),
    (":1.5\r\n", .invalidInteger),
    (":\r\n", .invalidInteger),
    (": 1\r\n", .invalidInteger),
    (":9223372036854775808\r\n", .invalidInteger),
    (",\r\n", .invalidDouble),
    (",abc\r\n", .invalidDouble),
    (",1.\r\n", .invalidDouble),
    (",.5\r\n", .invalidDouble),
    (",1e\r\n", .invalidDouble),
    (",Inf\r\n", .invalidDouble),
    (",0x10\r\n", .invalidDouble),
    ("#x\r\n", .invalidBoolean),
    ("#\r\n", .invalidBoolean),
    ("#true\r\n", .invalidBoolean),
    ("_x\r\n", .invalidNull),
    ("(\r\n", .invalidBigNumber),
    ("(-\r\n", .invalidBigNumber),
    ("(12a\r\n", .invalidBigNumber),
    ("$abc\r\n", .invalidBulkLength),
    ("$\r\n", .invalidBulkLength),
    ("$-2\r\n", .invalidBulkLength),
    ("$+3\r\nfoo\r\n", .invalidBulkLength),
    ("$03\r\nfoo\r\n", .invalidBulkLength),
    ("!-1\r\n", .invalidBulkLength),
    ("=-1\r\n", .invalidBulkLength),
    ("=3\r\nabc\r\n", .invalidVerbatimString),
    ("=5\r\nabcde\r\n", .invalidVerbatimString),
    ("*abc\r\n", .invalidAggregateCount),
    ("*-2\r\n", .invalidAggregateCount),
    ("%-1\r\n", .invalidAggregateCount),
    ("~-1\r\n", .invalidAggregateCount),
    (">-1\r\n", .invalidAggregateCount),
    ("|-1\r\n", .invalidAggregateCount),
    ("*1\r\n*-5\r\n", .invalidAggregateCount),
    ("*2147483648\r\n", .aggregateTooLarge),
    ("$?\r\n", .streamedTypeUnsupported),
    ("*?\r\n", .streamedTypeUnsupported),
    (String(repeating: "*1\r\n", count: 101) + ":1\r\n", .nestingTooDeep),
    (String(repeating: "|1\r\n", count: 101), .nestingTooDeep),
]

@Suite("RESPValueDecoder on malformed input")
struct RESPValueDecoderMalformedTests {
    @Test("throws for malformed bytes", arguments: malformedSamples)
    func throwsForMalformedBytes(wire: String, error: RESPDecodingError) throws {
        #expect(throws: error) { try decodeAll(wire) }
    }

    @Test("frameLength throws the same errors", arguments: malformedSamples)
    func frameLengthThrowsTheSameErrors(wire: String, error: RESPDecodingError) throws {
        #expect(throws: error) { try RESPValue.frameLength(in: buffer(wire)) }
    }

    @Test("an unknown type byte is rejected before the rest of its line arrives")
    func unknownTypeByteFailsFast() throws {
        var decoder = RESPValueDecoder()
        var input = buffer("H")
        #expect(throws: RESPDecodingError.unknownType) { try decoder.decode(buffer: &input) }
    }

    @Test("a bulk length over the limit is rejected as soon as its header arrives, before any payload")
    func bulkLengthCheckedBeforeWaiting() throws {
        var decoder = RESPValueDecoder(limits: RESPDecodingLimits(maxBulkLength: 10))
        var input = buffer("$11\r\n")
        #expect(throws: RESPDecodingError.bulkTooLong) { try decoder.decode(buffer: &input) }
        var atLimit = buffer("$10\r\n0123456789\r\n")
        var fresh = RESPValueDecoder(limits: RESPDecodingLimits(maxBulkLength: 10))
        #expect(try fresh.decode(buffer: &atLimit) == .bulk("0123456789"))
    }

    @Test("a huge declared count is rejected without waiting or reserving memory")
    func hugeCountRejected() throws {
        var decoder = RESPValueDecoder(limits: RESPDecodingLimits(maxAggregateCount: 3))
        var input = buffer("*4\r\n")
        #expect(throws: RESPDecodingError.aggregateTooLarge) { try decoder.decode(buffer: &input) }
        var map = buffer("%4\r\n")
        #expect(throws: RESPDecodingError.aggregateTooLarge) { try decoder.decode(buffer: &map) }
    }

    @Test("a map count whose element count overflows Int is rejected, whatever the limit")
    func mapCountOverflow() throws {
        let limits = RESPDecodingLimits(maxAggregateCount: .max)
        var decoder = RESPValueDecoder(limits: limits)
        var input = buffer("%4611686018427387904\r\n")
        #expect(throws: RESPDecodingError.aggregateTooLarge) { try decoder.decode(buffer: &input) }
        // And a bulk length of Int.max only makes the decoder wait, without overflowing.
        var bulk = buffer("$9223372036854775807\r\nabc")
        var bulkDecoder = RESPValueDecoder(limits: RESPDecodingLimits(maxBulkLength: .max))
        #expect(try bulkDecoder.decode(buffer: &bulk) == nil)
    }

    @Test("nesting depth is configurable")
    func configurableDepth() throws {
        let decoder = RESPValueDecoder(limits: RESPDecodingLimits(maxDepth: 2))
        #expect(try decodeOne("*1\r\n*1\r\n:1\r\n", decoder: decoder) == .array([.array([.integer(1)])]))
        #expect(throws: RESPDecodingError.nestingTooDeep) { try decodeAll("*1\r\n*1\r\n~1\r\n:1\r\n", decoder: decoder) }
        // Empty aggregates and scalars open no level.
        #expect(try decodeOne("*1\r\n*1\r\n*0\r\n", decoder: decoder) == .array([.array([.array([])])]))
    }

    @Test("a length header longer than any 64-bit number fails before its CRLF arrives")
    func overlongLengthHeader() throws {
        var decoder = RESPValueDecoder()
        var input = buffer("$" + String(repeating: "1", count: 21))
        #expect(throws: RESPDecodingError.invalidBulkLength) { try decoder.decode(buffer: &input) }
        var count = buffer("*" + String(repeating: "1", count: 21))
        #expect(throws: RESPDecodingError.invalidAggregateCount) { try decoder.decode(buffer: &count) }
    }

    @Test("a simple line longer than maxLineLength fails, with or without its CRLF")
    func overlongSimpleLine() throws {
        let limits = RESPDecodingLimits(maxLineLength: 8)
        #expect(try decodeOne("+12345678\r\n", decoder: RESPValueDecoder(limits: limits)) == .simple("12345678"))
        #expect(throws: RESPDecodingError.lineTooLong) {
            try decodeAll("+123456789\r\n", decoder: RESPValueDecoder(limits: limits))
        }
        var decoder = RESPValueDecoder(limits: limits)
        var input = buffer("-123456789")
        #expect(throws: RESPDecodingError.lineTooLong) { try decoder.decode(buffer: &input) }
    }

    @Test("an error says where in the reply the problem is")
    func errorOffset() throws {
        do {
            _ = try decodeAll("*2\r\n:1\r\n:x\r\n")
            Issue.record("no error")
        } catch let error as RESPDecodingError {
            #expect(error == .invalidInteger)
            #expect(error.offset == 8)
            #expect(error.description == "RESP decoding error at byte 8 of the reply: invalid integer")
        }
    }

    @Test("an unknown type error names the byte")
    func unknownTypeDescription() throws {
        do {
            _ = try decodeAll("+OK\r\nHTTP")
            Issue.record("no error")
        } catch let error as RESPDecodingError {
            #expect(error.description == "RESP decoding error at byte 0 of the reply: unknown type byte 'H' (0x48)")
        }
    }

    @Test("the decoder drives NIOSingleStepByteToMessageProcessor, which reports its errors")
    func inSingleStepProcessor() throws {
        let processor = NIOSingleStepByteToMessageProcessor(RESPValueDecoder())
        var values: [RESPValue] = []
        try processor.process(buffer: buffer("*2\r\n+a\r\n")) { values.append($0) }
        #expect(values.isEmpty)
        try processor.process(buffer: buffer("+b\r\n:1\r\n")) { values.append($0) }
        #expect(values == [.array([.simple("a"), .simple("b")]), .integer(1)])
        #expect(throws: RESPDecodingError.unknownType) {
            try processor.process(buffer: buffer("?x")) { values.append($0) }
        }
    }
}
