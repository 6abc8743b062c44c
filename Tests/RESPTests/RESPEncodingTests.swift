import NIOCore
import RESP
import Testing

@Suite("Reply writers")
struct RESPReplyWriterTests {
    @Test("simple strings and OK")
    func simpleStrings() {
        #expect(written { $0.writeRESPSimpleString("PONG" as StaticString) } == "+PONG\r\n")
        #expect(written { $0.writeRESPSimpleString("QUEUED" as String) } == "+QUEUED\r\n")
        #expect(written { $0.writeRESPOK() } == "+OK\r\n")
    }

    @Test("errors keep their code")
    func errors() {
        #expect(written { $0.writeRESPError("ERR syntax error" as StaticString) } == "-ERR syntax error\r\n")
        #expect(written { $0.writeRESPError("WRONGTYPE Operation" as String) } == "-WRONGTYPE Operation\r\n")
    }

    @Test("an error's inner CR and LF become spaces, and those at its ends are trimmed, as Redis does")
    func errorNewlines() {
        #expect(written { $0.writeRESPError("ERR a\r\nb\nc" as String) } == "-ERR a  b c\r\n")
        #expect(written { $0.writeRESPError("\r\nERR x\n\r\n" as String) } == "-ERR x\r\n")
        #expect(written { $0.writeRESPError("\r\n" as String) } == "-\r\n")
    }

    @Test("integers, from Int.min to Int.max")
    func integers() {
        #expect(written { $0.writeRESPInteger(0) } == ":0\r\n")
        #expect(written { $0.writeRESPInteger(9) } == ":9\r\n")
        #expect(written { $0.writeRESPInteger(10) } == ":10\r\n")
        #expect(written { $0.writeRESPInteger(-1) } == ":-1\r\n")
        #expect(written { $0.writeRESPInteger(Int.max) } == ":9223372036854775807\r\n")
        #expect(written { $0.writeRESPInteger(Int.min) } == ":-9223372036854775808\r\n")
    }

    @Test("bulk strings from every kind of payload")
    func bulkStrings() {
        #expect(written { $0.writeRESPBulkString("héllo") } == "$6\r\nhéllo\r\n")
        #expect(written { $0.writeRESPBulkString("") } == "$0\r\n\r\n")
        #expect(written { $0.writeRESPBulkString([0x61, 0x0D, 0x0A] as [UInt8]) } == "$3\r\na\r\n\r\n")
        #expect(written { out in [UInt8]("raw".utf8).withUnsafeBytes { out.writeRESPBulkString($0) } } == "$3\r\nraw\r\n")
        #expect(written { $0.writeRESPBulkString(buffer("0123456789")) } == "$10\r\n0123456789\r\n")
        #expect(written { $0.writeRESPBulkInteger(-42) } == "$3\r\n-42\r\n")
        #expect(written { $0.writeRESPBulkInteger(Int.min) } == "$20\r\n-9223372036854775808\r\n")
    }

    @Test("writing a ByteBuffer as a bulk string leaves it unread")
    func bulkFromBufferDoesNotConsume() {
        let payload = buffer("abc")
        var out = ByteBuffer()
        out.writeRESPBulkString(payload)
        #expect(payload.readableBytes == 3)
    }

    @Test("nulls: $-1 and *-1 in RESP2, _ in RESP3")
    func nulls() {
        #expect(written { $0.writeRESPNull(.resp2) } == "$-1\r\n")
        #expect(written { $0.writeRESPNull(.resp3) } == "_\r\n")
        #expect(written { $0.writeRESPNullArray(.resp2) } == "*-1\r\n")
        #expect(written { $0.writeRESPNullArray(.resp3) } == "_\r\n")
    }

    @Test("aggregate headers: a RESP2 map is a flat array of twice the pairs")
    func aggregateHeaders() {
        #expect(written { $0.writeRESPArrayHeader(3) } == "*3\r\n")
        #expect(written { $0.writeRESPArrayHeader(12) } == "*12\r\n")
        #expect(written { $0.writeRESPMapHeader(2, .resp3) } == "%2\r\n")
        #expect(written { $0.writeRESPMapHeader(2, .resp2) } == "*4\r\n")
        #expect(written { $0.writeRESPSetHeader(5, .resp3) } == "~5\r\n")
        #expect(written { $0.writeRESPSetHeader(5, .resp2) } == "*5\r\n")
        #expect(written { $0.writeRESPPushHeader(3, .resp3) } == ">3\r\n")
        #expect(written { $0.writeRESPPushHeader(3, .resp2) } == "*3\r\n")
    }

    @Test("booleans: #t/#f in RESP3, :1/:0 in RESP2")
    func booleans() {
        #expect(written { $0.writeRESPBoolean(true, .resp3) } == "#t\r\n")
        #expect(written { $0.writeRESPBoolean(false, .resp3) } == "#f\r\n")
        #expect(written { $0.writeRESPBoolean(true, .resp2) } == ":1\r\n")
        #expect(written { $0.writeRESPBoolean(false, .resp2) } == ":0\r\n")
    }

    @Test("doubles: , in RESP3, a bulk string in RESP2")
    func doubles() {
        #expect(written { $0.writeRESPDouble(formatted: "3.5", .resp3) } == ",3.5\r\n")
        #expect(written { $0.writeRESPDouble(formatted: "-inf", .resp3) } == ",-inf\r\n")
        #expect(written { $0.writeRESPDouble(formatted: "3.5", .resp2) } == "$3\r\n3.5\r\n")
    }

    @Test("verbatim strings: = with a format in RESP3, a plain bulk string in RESP2")
    func verbatim() {
        #expect(written { $0.writeRESPVerbatim("Some string", .resp3) } == "=15\r\ntxt:Some string\r\n")
        #expect(written { $0.writeRESPVerbatim("# x", format: "mkd", .resp3) } == "=7\r\nmkd:# x\r\n")
        #expect(written { $0.writeRESPVerbatim("Some string", .resp2) } == "$11\r\nSome string\r\n")
    }

    @Test("a verbatim format is always three bytes: padded with spaces or cut, as Redis does")
    func verbatimFormatWidth() {
        #expect(written { $0.writeRESPVerbatim("x", format: "md", .resp3) } == "=5\r\nmd :x\r\n")
        #expect(written { $0.writeRESPVerbatim("x", format: "markdown", .resp3) } == "=5\r\nmar:x\r\n")
        #expect(written { $0.writeRESPVerbatim("x", format: "", .resp3) } == "=5\r\n   :x\r\n")
    }

    @Test("writeRESPHeader writes any marker and value")
    func headers() {
        #expect(written { $0.writeRESPHeader(UInt8(ascii: "$"), -1) } == "$-1\r\n")
        #expect(written { $0.writeRESPHeader(UInt8(ascii: "!"), 123_456) } == "!123456\r\n")
    }

    @Test("what the writers write, the decoder reads back")
    func roundTripThroughDecoder() throws {
        var out = ByteBuffer()
        out.writeRESPArrayHeader(9)
        out.writeRESPOK()
        out.writeRESPError("ERR x" as String)
        out.writeRESPInteger(-7)
        out.writeRESPBulkString("v")
        out.writeRESPNull(.resp2)
        out.writeRESPMapHeader(1, .resp3)
        out.writeRESPBulkString("k")
        out.writeRESPBoolean(true, .resp3)
        out.writeRESPDouble(formatted: "0.25", .resp3)
        out.writeRESPVerbatim("t", .resp3)
        out.writeRESPNull(.resp3)
        var decoder = RESPValueDecoder()
        let value = try decoder.decode(buffer: &out)
        #expect(
            value
                == .array([
                    .simple("OK"), .error("ERR x"), .integer(-7), .bulk("v"), .nullBulkString,
                    .map([(.bulk("k"), .boolean(true))]), .double(0.25),
                    .verbatimString(format: buffer("txt"), text: buffer("t")), .null,
                ])
        )
        #expect(out.readableBytes == 0)
    }
}

@Suite("writeRESPCommand")
struct RESPCommandWriterTests {
    @Test("writes a multibulk array of bulk strings")
    func strings() {
        #expect(written { $0.writeRESPCommand("GET", "key") } == "*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n")
    }

    @Test("mixes strings, substrings, bytes, buffers and integers")
    func mixedArguments() {
        let key = "user:1"
        let value: [UInt8] = [0x00, 0xFF, 0x0D, 0x0A]
        var bytes = ByteBuffer()
        bytes.writeRESPCommand("SET", key.dropFirst(5), value, buffer("EX"), 60)
        let expected = Array("*5\r\n$3\r\nSET\r\n$1\r\n1\r\n$4\r\n".utf8) + value + Array("\r\n$2\r\nEX\r\n$2\r\n60\r\n".utf8)
        #expect(Array(bytes.readableBytesView) == expected)
    }

    @Test("writes a command from a collection of arguments")
    func collection() {
        let keys = ["a", "b", "c"]
        #expect(written { $0.writeRESPCommand(arguments: ["DEL"] + keys) } == "*4\r\n$3\r\nDEL\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n")
        #expect(written { $0.writeRESPCommand(arguments: [String]()) } == "*0\r\n")
    }

    @Test("what it writes, the request parser reads back argument for argument")
    func roundTripThroughRequestParser() throws {
        var out = ByteBuffer()
        let payload: [UInt8] = Array(0...255)
        out.writeRESPCommand("SET", "k", payload)
        var parser = RESPRequestParser()
        let result = try out.withUnsafeReadableBytes { try parser.parse($0, limits: RESPRequestLimits()) }
        #expect(result == .command(consumed: out.readableBytes, isInline: false))
        let args = out.withUnsafeReadableBytes { raw in
            parser.arguments.map { Array(raw[$0.offset..<$0.offset + $0.count]) }
        }
        #expect(args == [Array("SET".utf8), Array("k".utf8), payload])
    }
}

@Suite("RESPInteger")
struct RESPIntegerTests {
    @Test(
        "parses what string2ll accepts",
        arguments: [
            ("0", 0), ("1", 1), ("-1", -1), ("123", 123), ("9223372036854775807", Int.max),
            ("-9223372036854775808", Int.min), ("-9223372036854775807", -Int.max),
        ]
    )
    func accepts(text: String, value: Int) {
        #expect(RESPInteger.parse(Array(text.utf8)) == value)
    }

    @Test(
        "rejects what string2ll rejects",
        arguments: [
            "", "-", "+1", "-0", "007", "00", " 1", "1 ", "1a", "0x10", "1.0",
            "9223372036854775808", "-9223372036854775809", "18446744073709551616", "99999999999999999999",
            "100000000000000000000", "-0000000000000000001",
        ]
    )
    func rejects(text: String) {
        #expect(RESPInteger.parse(Array(text.utf8)) == nil)
    }

    @Test("parses raw buffers, contiguous collections and non-contiguous ones alike")
    func collections() {
        #expect([UInt8]("-45".utf8).withUnsafeBytes { RESPInteger.parse($0) } == -45)
        #expect(RESPInteger.parse("678".utf8) == 678)
        #expect(RESPInteger.parse("987".utf8.reversed()) == 789)
    }

    @Test("format writes the same digits as String(_:) and parses back", arguments: [
        0, 1, -1, 9, 10, -10, 99, 100, 1_000_000_007, Int.max, Int.min, Int.max - 1, Int.min + 1,
    ])
    func formatRoundTrip(value: Int) {
        var scratch = [UInt8](repeating: 0, count: 20)
        let count = scratch.withUnsafeMutableBytes { RESPInteger.format(value, into: $0.baseAddress!) }
        let digits = Array(scratch[..<count])
        #expect(String(decoding: digits, as: UTF8.self) == String(value))
        #expect(RESPInteger.parse(digits) == value)
    }

    @Test("format round-trips every power of ten and its neighbours")
    func formatPowersOfTen() {
        var scratch = [UInt8](repeating: 0, count: 20)
        var power = 1
        for _ in 0..<19 {
            for value in [power - 1, power, power + 1, -power, -(power - 1)] {
                let count = scratch.withUnsafeMutableBytes { RESPInteger.format(value, into: $0.baseAddress!) }
                #expect(RESPInteger.parse(scratch[..<count]) == value)
            }
            if power <= Int.max / 10 { power *= 10 }
        }
    }
}
