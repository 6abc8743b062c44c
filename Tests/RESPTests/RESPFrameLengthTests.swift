import NIOCore
import RESP
import Testing

@Suite("RESPValue.frameLength")
struct RESPFrameLengthTests {
    @Test("measures each sample exactly, ignoring the bytes after it", arguments: decoderSamples)
    func measuresExactly(wire: String, value: RESPValue) throws {
        let bytes = Array(wire.utf8)
        let followed = bytes + Array("+NEXT\r\n".utf8)
        let length = try followed.withUnsafeBytes { try RESPValue.frameLength(in: $0) }
        #expect(length == bytes.count)
    }

    @Test("returns nil for every proper prefix", arguments: decoderSamples)
    func nilForEveryPrefix(wire: String, value: RESPValue) throws {
        let bytes = Array(wire.utf8)
        for cut in 0..<bytes.count {
            let length = try bytes[..<cut].withUnsafeBytes { try RESPValue.frameLength(in: $0) }
            #expect(length == nil, "cut at \(cut)")
        }
    }

    @Test("cuts a stream of replies at their boundaries")
    func cutsAStream() throws {
        var stream = buffer("+OK\r\n*2\r\n$1\r\na\r\n:1\r\n|1\r\n+k\r\n+v\r\n_\r\n$-1\r\n")
        var pieces: [String] = []
        while stream.readableBytes > 0, let length = try RESPValue.frameLength(in: stream) {
            pieces.append(stream.readString(length: length) ?? "")
        }
        #expect(pieces == ["+OK\r\n", "*2\r\n$1\r\na\r\n:1\r\n", "|1\r\n+k\r\n+v\r\n_\r\n", "$-1\r\n"])
    }

    @Test("reads a ByteBuffer from its reader index")
    func byteBufferReaderIndex() throws {
        var input = buffer("garbage:12\r\n")
        input.moveReaderIndex(forwardBy: 7)
        #expect(try RESPValue.frameLength(in: input) == 5)
    }

    @Test("applies the given limits")
    func appliesLimits() throws {
        let limits = RESPDecodingLimits(maxBulkLength: 2)
        #expect(throws: RESPDecodingError.bulkTooLong) { try RESPValue.frameLength(in: buffer("$3\r\nabc\r\n"), limits: limits) }
        #expect(try RESPValue.frameLength(in: buffer("$2\r\nab\r\n"), limits: limits) == 8)
    }
}

@Suite("RESPValue description")
struct RESPValueDescriptionTests {
    @Test("renders scalars as redis-cli does")
    func scalars() throws {
        #expect(RESPValue.simple("OK").description == "OK")
        #expect(RESPValue.error("ERR no").description == "(error) ERR no")
        #expect(RESPValue.bulkError(buffer("SYNTAX x")).description == "(error) SYNTAX x")
        #expect(RESPValue.integer(-3).description == "(integer) -3")
        #expect(RESPValue.bulk("a \"b\"\\\r\n\t\u{7}\u{8}\u{1}é").description == #""a \"b\"\\\r\n\t\a\b\x01\xc3\xa9""#)
        #expect(RESPValue.nullBulkString.description == "(nil)")
        #expect(RESPValue.nullArray.description == "(nil)")
        #expect(RESPValue.null.description == "(nil)")
        #expect(RESPValue.boolean(true).description == "(true)")
        #expect(RESPValue.double(1.5).description == "(double) 1.5")
        #expect(RESPValue.bigNumber(buffer("123")).description == "(big number) 123")
        #expect(RESPValue.verbatimString(format: buffer("txt"), text: buffer("hi")).description == #"(txt) "hi""#)
    }

    @Test("numbers aggregate elements and indents nested ones")
    func aggregates() throws {
        let value = try decodeOne("*3\r\n:1\r\n*2\r\n$1\r\na\r\n*0\r\n%1\r\n+k\r\n~1\r\n+v\r\n")
        #expect(
            value.description == """
                1) (integer) 1
                2) 1) "a"
                   2) (empty array)
                3) 1# k => 1~ v
                """
        )
    }

    @Test("pads indices to the width of the largest")
    func wideIndices() throws {
        let value = RESPValue.array((1...10).map { .integer($0) })
        let lines = value.description.split(separator: "\n")
        #expect(lines.first == " 1) (integer) 1")
        #expect(lines.last == "10) (integer) 10")
    }

    @Test("names empty aggregates by type, and shows attributes before their value")
    func emptiesAndAttributes() throws {
        #expect(RESPValue.map([]).description == "(empty hash)")
        #expect(RESPValue.set([]).description == "(empty set)")
        #expect(RESPValue.push([]).description == "(empty push)")
        let attributed = RESPValue.attributed(.integer(1), attributes: [(.simple("ttl"), .integer(5))])
        #expect(attributed.description == "1| ttl => (integer) 5\n(integer) 1")
    }
}

@Suite("frameLength and the decoder agree")
struct RESPFrameLengthAgreementTests {
    /// What one call made of some bytes.
    enum Outcome: Equatable {
        case complete(length: Int)
        case incomplete
        case failed(RESPDecodingError)
    }

    static func viaDecoder(_ bytes: [UInt8]) -> Outcome {
        var decoder = RESPValueDecoder()
        var input = buffer(bytes)
        do {
            guard try decoder.decode(buffer: &input) != nil else { return .incomplete }
            return .complete(length: input.readerIndex)
        } catch {
            return .failed(error)
        }
    }

    static func viaFrameLength(_ bytes: [UInt8]) -> Outcome {
        do {
            guard let length = try bytes.withUnsafeBytes({ try RESPValue.frameLength(in: $0) }) else { return .incomplete }
            return .complete(length: length)
        } catch let error as RESPDecodingError {
            return .failed(error)
        } catch {
            return .incomplete
        }
    }

    @Test("on every sample with any one byte replaced by a troublesome one", arguments: decoderSamples)
    func corruptedSamples(wire: String, value: RESPValue) {
        let original = Array(wire.utf8)
        let replacements: [UInt8] = [0x00, 0x0D, 0x0A, 0x2A, 0x24, 0x7C, 0x2D, 0x30, 0x39, 0x3F, 0xFF]
        for position in original.indices {
            for replacement in replacements where replacement != original[position] {
                var bytes = original
                bytes[position] = replacement
                #expect(
                    Self.viaDecoder(bytes) == Self.viaFrameLength(bytes),
                    "byte \(position) replaced by \(replacement) in \(String(reflecting: wire))"
                )
            }
        }
    }
}
