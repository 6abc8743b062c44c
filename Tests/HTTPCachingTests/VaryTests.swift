import HTTPCaching
import HTTPTypes
import Testing

@Suite("Vary")
struct VaryTests {
    @Test("field names are lowercased, deduplicated and sorted across lines")
    func names() {
        let vary = Vary(fields([("Vary", "Accept-Encoding, accept"), ("Vary", "ACCEPT-ENCODING")]))
        #expect(vary?.fieldNames == ["accept", "accept-encoding"])
        #expect(vary?.isWildcard == false)
    }

    @Test("no Vary, no variants")
    func absent() {
        #expect(Vary(fields([])) == nil)
        #expect(Vary(fields([("Vary", " , ")])) == nil)
    }

    @Test("Vary: * never matches")
    func wildcard() {
        let vary = Vary(fields([("Vary", "*")]))
        #expect(vary?.isWildcard == true)
        #expect(vary?.matches(storedValues: [], requestFields: fields([])) == false)
    }

    @Test("a request with the same nominated values matches")
    func matches() {
        let vary = Vary(fieldNames: ["Accept-Encoding"])
        let stored = vary.selectingValues(from: fields([("Accept-Encoding", "gzip")]))
        #expect(vary.matches(storedValues: stored, requestFields: fields([("Accept-Encoding", "gzip"), ("X-Other", "1")])))
        #expect(!vary.matches(storedValues: stored, requestFields: fields([("Accept-Encoding", "br")])))
    }

    @Test("an absent field differs from an empty one")
    func absentVersusEmpty() {
        let vary = Vary(fieldNames: ["accept"])
        #expect(vary.selectingValues(from: fields([])) == [nil])
        #expect(vary.selectingValues(from: fields([("Accept", "")])) != [nil])
    }

    @Test("values are normalized: whitespace, line combining, case of case-insensitive fields")
    func normalization() {
        let vary = Vary(fieldNames: ["accept-encoding", "accept"])
        let spaced = vary.selectingValues(from: fields([("Accept-Encoding", "GZIP ,  br"), ("Accept", "text/html,  application/JSON")]))
        let split = vary.selectingValues(from: fields([("Accept-Encoding", "gzip"), ("Accept-Encoding", "br"), ("Accept", "text/html, application/JSON")]))
        #expect(spaced == split)
        #expect(spaced == ["text/html,application/JSON", "gzip,br"])
    }

    @Test("the secondary key names every nominated field and its value")
    func secondaryKey() {
        let vary = Vary(fieldNames: ["accept-language", "accept-encoding"])
        let values = vary.selectingValues(from: fields([("Accept-Encoding", "gzip")]))
        #expect(vary.secondaryKey(values: values) == "accept-encoding=gzip\naccept-language")
    }
}
