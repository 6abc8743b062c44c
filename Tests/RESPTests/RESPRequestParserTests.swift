import RESP
import Testing

/// Parses every command in `bytes` with one parser, the way a connection would: after a command or a skip,
/// the next frame starts where the last one ended. Stops at the first incomplete frame.
func parseRequests(
    _ bytes: [UInt8],
    limits: RESPRequestLimits = RESPRequestLimits(),
    authenticated: Bool = true
) throws -> (commands: [[String]], consumed: Int) {
    var parser = RESPRequestParser()
    var commands: [[String]] = []
    var position = 0
    while position < bytes.count {
        let frame = Array(bytes[position...])
        let result = try frame.withUnsafeBytes { raw in
            try parser.parse(raw, limits: limits, authenticated: authenticated)
        }
        switch result {
        case .incomplete:
            return (commands, position)
        case .skip(let consumed):
            position += consumed
        case .command(let consumed, let isInline):
            let source = isInline ? parser.inlineStorage : frame
            commands.append(
                parser.arguments.map { String(decoding: source[$0.offset..<$0.offset + $0.count], as: UTF8.self) }
            )
            position += consumed
        }
    }
    return (commands, position)
}

func parseRequests(
    _ text: String,
    limits: RESPRequestLimits = RESPRequestLimits(),
    authenticated: Bool = true
) throws -> (commands: [[String]], consumed: Int) {
    try parseRequests(Array(text.utf8), limits: limits, authenticated: authenticated)
}

/// Calls the parser once on `text` and returns what it said.
func parseOnce(
    _ text: String,
    limits: RESPRequestLimits = RESPRequestLimits(),
    authenticated: Bool = true
) throws -> RESPRequestParser.Result {
    var parser = RESPRequestParser()
    return try Array(text.utf8).withUnsafeBytes { raw in
        try parser.parse(raw, limits: limits, authenticated: authenticated)
    }
}

@Suite("RESPRequestParser: multibulk")
struct RESPRequestParserMultibulkTests {
    @Test("parses a multibulk command into its arguments")
    func multibulk() throws {
        let parsed = try parseRequests("*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n")
        #expect(parsed.commands == [["SET", "key", "value"]])
        #expect(parsed.consumed == 33)
    }

    @Test("arguments may hold any bytes, CRLF included, and may be empty")
    func binaryArguments() throws {
        let parsed = try parseRequests("*3\r\n$4\r\na\r\nb\r\n$0\r\n\r\n$1\r\n \r\n")
        #expect(parsed.commands == [["a\r\nb", "", " "]])
    }

    @Test("argument spans are offsets from the start of the frame")
    func spans() throws {
        var parser = RESPRequestParser()
        let frame = Array("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n".utf8)
        let result = try frame.withUnsafeBytes { try parser.parse($0, limits: RESPRequestLimits()) }
        #expect(result == .command(consumed: frame.count, isInline: false))
        #expect(parser.arguments == [RESPArgumentSpan(offset: 8, count: 3), RESPArgumentSpan(offset: 17, count: 1)])
    }

    @Test("parses many pipelined commands from one buffer")
    func pipelined() throws {
        var wire = ""
        var expected: [[String]] = []
        for i in 0..<100 {
            if i % 3 == 0 {
                wire += "PING \(i)\r\n"
                expected.append(["PING", "\(i)"])
            } else {
                let value = String(repeating: "v", count: i)
                wire += "*3\r\n$3\r\nSET\r\n$\(String(i).utf8.count)\r\n\(i)\r\n$\(i)\r\n\(value)\r\n"
                expected.append(["SET", "\(i)", value])
            }
        }
        let parsed = try parseRequests(wire)
        #expect(parsed.commands == expected)
        #expect(parsed.consumed == wire.utf8.count)
    }

    @Test("a frame cut at any byte is incomplete, and resuming gives the same arguments")
    func everySplitPoint() throws {
        let frame = Array("*3\r\n$3\r\nSET\r\n$10\r\nkey\r\n:with\r\n$5\r\nvalue\r\n".utf8)
        for cut in 1..<frame.count {
            var parser = RESPRequestParser()
            let first = try frame[..<cut].withUnsafeBytes { try parser.parse($0, limits: RESPRequestLimits()) }
            #expect(first == .incomplete, "cut at \(cut)")
            let second = try frame.withUnsafeBytes { try parser.parse($0, limits: RESPRequestLimits()) }
            #expect(second == .command(consumed: frame.count, isInline: false), "cut at \(cut)")
            let args = parser.arguments.map { String(decoding: frame[$0.offset..<$0.offset + $0.count], as: UTF8.self) }
            #expect(args == ["SET", "key\r\n:with", "value"], "cut at \(cut)")
        }
    }

    @Test("a frame arriving one byte at a time parses to the same arguments")
    func byteAtATime() throws {
        let frame = Array("*2\r\n$4\r\nECHO\r\n$11\r\nhello world\r\n".utf8)
        var parser = RESPRequestParser()
        for end in 1..<frame.count {
            let result = try frame[..<end].withUnsafeBytes { try parser.parse($0, limits: RESPRequestLimits()) }
            #expect(result == .incomplete, "at \(end)")
        }
        let result = try frame.withUnsafeBytes { try parser.parse($0, limits: RESPRequestLimits()) }
        #expect(result == .command(consumed: frame.count, isInline: false))
        #expect(parser.arguments.map(\.count) == [4, 11])
    }

    @Test("*0 and negative counts are skipped, as Redis does")
    func emptyMultibulkSkipped() throws {
        #expect(try parseOnce("*0\r\n") == .skip(consumed: 4))
        #expect(try parseOnce("*-1\r\n") == .skip(consumed: 5))
        #expect(try parseOnce("*-7\r\n") == .skip(consumed: 5))
        #expect(try parseRequests("*0\r\n*1\r\n$4\r\nPING\r\n").commands == [["PING"]])
    }

    @Test("like Redis, the two bytes after a bulk payload are skipped unchecked")
    func payloadTerminatorNotChecked() throws {
        #expect(try parseRequests("*1\r\n$4\r\nPINGxy").commands == [["PING"]])
    }

    @Test("reports how many bytes a pending bulk payload still needs")
    func missingBulkBytes() throws {
        var parser = RESPRequestParser()
        let partial = Array("*2\r\n$3\r\nGET\r\n$100\r\nabc".utf8)
        let result = try partial.withUnsafeBytes { try parser.parse($0, limits: RESPRequestLimits()) }
        #expect(result == .incomplete)
        let missing = partial.withUnsafeBytes { parser.missingBulkBytes(available: partial.count, peek: $0) }
        #expect(missing == 99)  // 97 payload bytes and the CRLF
    }
}

@Suite("RESPRequestParser: inline")
struct RESPRequestParserInlineTests {
    @Test("splits on blanks: spaces and tabs, repeated, leading and trailing")
    func blanks() throws {
        #expect(try parseRequests("  SET\tk \t v  \r\n").commands == [["SET", "k", "v"]])
    }

    @Test("a bare LF ends a line too")
    func bareLineFeed() throws {
        #expect(try parseRequests("PING\nPING\r\n").commands == [["PING"], ["PING"]])
    }

    @Test("double quotes, single quotes with \\', and \\xHH in double quotes")
    func quotes() throws {
        let parsed = try parseRequests(#"set "a b" 'c\'d' "\x41""# + "\r\n")
        #expect(parsed.commands == [["set", "a b", "c'd", "A"]])
    }

    @Test("double quotes take \\n \\r \\t \\b \\a \\\\ \\\" and keep any other escaped byte")
    func doubleQuoteEscapes() throws {
        let parsed = try parseRequests(#"ECHO "\n\r\t\b\a\\\"\q" "\x4a\x4B" "\xZZ""# + "\r\n")
        #expect(parsed.commands == [["ECHO", "\n\r\t\u{8}\u{7}\\\"q", "JK", "xZZ"]])
    }

    @Test("single quotes take no escape but \\'")
    func singleQuotesAreLiteral() throws {
        #expect(try parseRequests(#"ECHO '\x41\n"'"# + "\r\n").commands == [["ECHO", #"\x41\n""#]])
    }

    @Test("a quoted part may continue an unquoted token, and quotes may be empty")
    func quoteInsideToken() throws {
        #expect(try parseRequests(#"SET ab"c d" '' """# + "\r\n").commands == [["SET", "abc d", "", ""]])
    }

    @Test("a NUL byte before the newline hides it, as Redis's strchr does: the request waits")
    func nulHidesNewline() throws {
        #expect(try parseOnce("PING\0\r\nPING\r\n") == .incomplete)
        let small = RESPRequestLimits(maxInlineLength: 8)
        #expect(throws: RESPProtocolError.tooBigInline) { try parseOnce("PING\0\r\nPING\r\n", limits: small) }
    }

    @Test("empty and blank lines are skipped")
    func emptyLinesSkipped() throws {
        #expect(try parseOnce("\r\n") == .skip(consumed: 2))
        #expect(try parseOnce("\n") == .skip(consumed: 1))
        #expect(try parseOnce(" \t \r\n") == .skip(consumed: 5))
        #expect(try parseRequests("\r\n\r\nPING\r\n").commands == [["PING"]])
    }

    @Test("an inline command without its newline is incomplete")
    func incompleteInline() throws {
        #expect(try parseOnce("PING") == .incomplete)
        #expect(try parseOnce("SET \"a") == .incomplete)
    }

    @Test("inline arguments are in inlineStorage")
    func inlineStorage() throws {
        var parser = RESPRequestParser()
        let line = Array("SET \"k\\x00\" v\r\n".utf8)
        let result = try line.withUnsafeBytes { try parser.parse($0, limits: RESPRequestLimits()) }
        #expect(result == .command(consumed: line.count, isInline: true))
        #expect(parser.inlineStorage == Array("SETk\0v".utf8))
        #expect(parser.arguments == [
            RESPArgumentSpan(offset: 0, count: 3), RESPArgumentSpan(offset: 3, count: 2), RESPArgumentSpan(offset: 5, count: 1),
        ])
    }
}

@Suite("RESPRequestParser: protocol errors")
struct RESPRequestParserErrorTests {
    @Test("the error messages are Redis's")
    func messages() {
        #expect(RESPProtocolError.invalidMultibulkLength.message == "ERR Protocol error: invalid multibulk length")
        #expect(RESPProtocolError.invalidBulkLength.message == "ERR Protocol error: invalid bulk length")
        #expect(RESPProtocolError.expectedDollar(got: UInt8(ascii: "x")).message == "ERR Protocol error: expected '$', got 'x'")
        #expect(RESPProtocolError.unbalancedQuotes.message == "ERR Protocol error: unbalanced quotes in request")
        #expect(RESPProtocolError.tooBigInline.message == "ERR Protocol error: too big inline request")
        #expect(RESPProtocolError.tooBigMultibulkCount.message == "ERR Protocol error: too big mbulk count string")
        #expect(RESPProtocolError.tooBigBulkCount.message == "ERR Protocol error: too big bulk count string")
        #expect(RESPProtocolError.unauthenticatedMultibulkLength.message == "ERR Protocol error: unauthenticated multibulk length")
        #expect(RESPProtocolError.unauthenticatedBulkLength.message == "ERR Protocol error: unauthenticated bulk length")
    }

    @Test(
        "invalid multibulk length: not a string2ll number, or over INT_MAX",
        arguments: ["*abc\r\n", "*\r\n", "*+1\r\n", "*01\r\n", "*1 \r\n", "*2147483648\r\n", "*99999999999999999999\r\n"]
    )
    func invalidMultibulkLength(wire: String) {
        #expect(throws: RESPProtocolError.invalidMultibulkLength) { try parseOnce(wire) }
    }

    @Test("invalid multibulk length: over maxMultibulkLength")
    func multibulkOverLimit() throws {
        let limits = RESPRequestLimits(maxMultibulkLength: 3)
        #expect(throws: RESPProtocolError.invalidMultibulkLength) { try parseOnce("*4\r\n", limits: limits) }
        #expect(try parseOnce("*3\r\n", limits: limits) == .incomplete)
    }

    @Test(
        "invalid bulk length: not a number, negative, or with a sign or leading zero",
        arguments: ["$abc\r\n", "$\r\n", "$-1\r\n", "$-5\r\n", "$+3\r\n", "$03\r\n"]
    )
    func invalidBulkLength(header: String) {
        #expect(throws: RESPProtocolError.invalidBulkLength) { try parseOnce("*1\r\n" + header + "foo\r\n") }
    }

    @Test("invalid bulk length: over maxBulkLength, checked before the payload arrives")
    func bulkOverLimit() throws {
        let limits = RESPRequestLimits(maxBulkLength: 5)
        #expect(throws: RESPProtocolError.invalidBulkLength) { try parseOnce("*1\r\n$6\r\n", limits: limits) }
        #expect(try parseRequests("*1\r\n$5\r\nabcde\r\n", limits: limits).commands == [["abcde"]])
    }

    @Test("expected '$': names the byte found instead, once its line is complete")
    func expectedDollar() throws {
        #expect(try parseOnce("*1\r\nx3") == .incomplete)
        #expect(throws: RESPProtocolError.expectedDollar(got: UInt8(ascii: "x"))) { try parseOnce("*1\r\nx3\r\nfoo\r\n") }
        #expect(throws: RESPProtocolError.expectedDollar(got: UInt8(ascii: ":"))) {
            try parseOnce("*2\r\n$1\r\na\r\n:1\r\n")
        }
    }

    @Test("unbalanced quotes: unterminated, or a closing quote not followed by a blank", arguments: [
        "SET \"a\r\n", "SET 'a\r\n", "SET \"a\"b\r\n", "SET 'a'b\r\n", "SET \"a\\\"\r\n", "SET \"a\"\"b\"\r\n",
    ])
    func unbalancedQuotes(line: String) {
        #expect(throws: RESPProtocolError.unbalancedQuotes) { try parseOnce(line) }
    }

    @Test("too big inline request: no newline within maxInlineLength bytes")
    func tooBigInline() throws {
        let limits = RESPRequestLimits(maxInlineLength: 16)
        #expect(try parseOnce(String(repeating: "a", count: 16), limits: limits) == .incomplete)
        #expect(throws: RESPProtocolError.tooBigInline) { try parseOnce(String(repeating: "a", count: 17), limits: limits) }
        #expect(throws: RESPProtocolError.tooBigInline) {
            try parseOnce(String(repeating: "a", count: 17) + "\r\n", limits: limits)
        }
    }

    @Test("too big inline request at the default 64 KiB")
    func tooBigInlineDefault() throws {
        #expect(throws: RESPProtocolError.tooBigInline) { try parseOnce(String(repeating: "a", count: 64 * 1024 + 1)) }
    }

    @Test("too big mbulk count string: no CR within maxInlineLength bytes of the *")
    func tooBigMultibulkCount() throws {
        let limits = RESPRequestLimits(maxInlineLength: 16)
        #expect(try parseOnce("*" + String(repeating: "1", count: 15), limits: limits) == .incomplete)
        #expect(throws: RESPProtocolError.tooBigMultibulkCount) {
            try parseOnce("*" + String(repeating: "1", count: 16), limits: limits)
        }
    }

    @Test("too big bulk count string: no CR within maxInlineLength bytes of the $")
    func tooBigBulkCount() throws {
        let limits = RESPRequestLimits(maxInlineLength: 16)
        #expect(try parseOnce("*1\r\n$" + String(repeating: "1", count: 15), limits: limits) == .incomplete)
        #expect(throws: RESPProtocolError.tooBigBulkCount) {
            try parseOnce("*1\r\n$" + String(repeating: "1", count: 16), limits: limits)
        }
    }

    @Test("unauthenticated clients: at most 10 arguments")
    func unauthenticatedMultibulk() throws {
        #expect(throws: RESPProtocolError.unauthenticatedMultibulkLength) { try parseOnce("*11\r\n", authenticated: false) }
        #expect(try parseOnce("*10\r\n", authenticated: false) == .incomplete)
        #expect(try parseOnce("*11\r\n", authenticated: true) == .incomplete)
    }

    @Test("unauthenticated clients: bulks of at most 16 KiB")
    func unauthenticatedBulk() throws {
        #expect(throws: RESPProtocolError.unauthenticatedBulkLength) {
            try parseOnce("*1\r\n$16385\r\n", authenticated: false)
        }
        #expect(try parseOnce("*1\r\n$16384\r\n", authenticated: false) == .incomplete)
        #expect(try parseOnce("*1\r\n$16385\r\n", authenticated: true) == .incomplete)
    }

    @Test("an invalid length is reported before the unauthenticated limit, as Redis orders its checks")
    func checkOrder() {
        let limits = RESPRequestLimits(maxBulkLength: 20000)
        #expect(throws: RESPProtocolError.invalidMultibulkLength) { try parseOnce("*2147483648\r\n", authenticated: false) }
        #expect(throws: RESPProtocolError.invalidBulkLength) {
            try parseOnce("*1\r\n$20001\r\n", limits: limits, authenticated: false)
        }
    }
}
