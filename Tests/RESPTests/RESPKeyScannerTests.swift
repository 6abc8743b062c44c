import RESP
import Testing

@Suite("RESPKeyScanner")
struct RESPKeyScannerTests {
    /// The keys the scanner reports for `text`, with at most `limit` of them.
    func keys(_ text: String, limit: Int = 16) -> [String] {
        var found: [String] = []
        Array(text.utf8).withUnsafeBytes { bytes in
            RESPKeyScanner.forEachKey(in: bytes, limit: limit) { found.append(String(decoding: $0, as: UTF8.self)) }
        }
        return found
    }

    @Test("reports the second argument of each whole command, passing over commands of one argument")
    func pipeline() {
        let text = "*2\r\n$3\r\nGET\r\n$2\r\nk1\r\n*1\r\n$4\r\nPING\r\n*3\r\n$3\r\nSET\r\n$2\r\nk2\r\n$5\r\nvalue\r\n"
            + "*2\r\n$3\r\nGET\r\n$0\r\n\r\n"
        #expect(keys(text) == ["k1", "k2", ""])
        #expect(keys(text, limit: 1) == ["k1"])
    }

    @Test("stops at an inline command, a partial frame or a malformed header, keeping what it found before")
    func stops() {
        let get = "*2\r\n$3\r\nGET\r\n$1\r\na\r\n"
        #expect(keys(get + "GET b\r\n" + get) == ["a"])
        #expect(keys(get + "*2\r\n$3\r\nGET\r\n$5\r\nab") == ["a"])
        #expect(keys(get + "*2\r\n$3\r\nGET\r\n$1\r\nb") == ["a"], "payload without its CRLF")
        #expect(keys(get + "*2\r\n$-1\r\n") == ["a"])
        #expect(keys(get + "*x\r\n") == ["a"])
        #expect(keys(get + "*2\r\n$3\r\nGET\r\n$99999999999999\r\nb\r\n") == ["a"], "a length of more than 11 digits")
        #expect(keys(get + "*0\r\n" + get) == ["a"])
        #expect(keys(get + "*2000\r\n") == ["a"], "more arguments than a key prefetch is worth")
        #expect(keys("*2\r") == [])
        #expect(keys("") == [])
    }

    @Test("a declared length beyond the buffer is never read")
    func hugeLength() {
        #expect(keys("*2\r\n$3\r\nGET\r\n$1073741824\r\nabc\r\n") == [])
        #expect(keys("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1073741824\r\nabc\r\n") == ["k"])
    }
}
