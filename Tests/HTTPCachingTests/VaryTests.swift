import HTTPTypes
import Testing

@testable import HTTPCaching

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
        #expect(spaced == ["text/html,application/json", "br,gzip"])
    }

    /// The normalized value of `name` in a request with `lines` of it.
    func normalized(_ name: String, _ lines: [String]) -> String? {
        Vary(fieldNames: [name]).selectingValues(from: fields(lines.map { (name, $0) }))[0]
    }

    @Test("RFC 9111 §4.1: values that differ only where the field's semantics allow select the same variant",
        arguments: [
            // Whitespace around list separators and at the ends; several field lines as one list.
            ("Accept-Encoding", ["gzip, br"], ["gzip,br"]),
            ("Accept-Encoding", ["gzip", "br"], [" gzip ,\tbr "]),
            ("Accept", ["text/html, application/json"], ["text/html", "application/json"]),
            ("X-Custom", ["a,  b"], ["a", "b"]),
            // Case of case-insensitive tokens.
            ("Accept-Language", ["EN-us"], ["en-US"]),
            ("Accept-Charset", ["UTF-8"], ["utf-8"]),
            ("Accept", ["Text/HTML"], ["text/html"]),
            // Weights: whitespace, case of the parameter, one spelling, the default q=1 left out.
            ("Accept-Encoding", ["gzip;q=0.5"], ["gzip ; Q=0.500"]),
            ("Accept-Language", ["en;q=1.0"], ["en"]),
            ("Accept", ["text/html;level=1;q=1"], ["text/html; LEVEL=1"]),
            // Members in order of weight, whatever order they came in.
            ("Accept-Language", ["fr;q=0.5, en"], ["en, fr;q=0.5"]),
            ("Accept", ["application/json;q=0.9, text/html"], ["text/html, application/json;q=0.9"]),
            // Accept-Encoding's members are a set: order carries no meaning (RFC 9110 §12.5.3).
            ("Accept-Encoding", ["br, gzip"], ["gzip, br"]),
            ("Accept-Encoding", ["deflate;q=0.5, br, gzip"], ["gzip", "br", "deflate;q=0.5"]),
        ])
    func equivalent(name: String, left: [String], right: [String]) {
        #expect(normalized(name, left) == normalized(name, right), "\(left) \(right)")
    }

    @Test("RFC 9111 §4.1: values whose meaning may differ select different variants", arguments: [
        // Equal weights in Accept-Language may be read in order of preference (RFC 9110 §12.5.4).
        ("Accept-Language", ["en, fr"], ["fr, en"]),
        ("Accept-Language", ["en;q=0.8, fr;q=0.8"], ["fr;q=0.8, en;q=0.8"]),
        ("Accept", ["text/html, application/json"], ["application/json, text/html"]),
        // Different weights, values and parameter values.
        ("Accept-Encoding", ["gzip;q=0.5"], ["gzip;q=0.6"]),
        ("Accept-Encoding", ["gzip"], ["br"]),
        ("Accept", ["text/html;charset=UTF-8"], ["text/html;charset=utf-8"]),
        ("X-Custom", ["Value"], ["value"]),
        // A weight that is not a qvalue leaves the order alone.
        ("Accept-Language", ["fr;q=0.5, en;q=2"], ["en;q=2, fr;q=0.5"]),
    ])
    func different(name: String, left: [String], right: [String]) {
        #expect(normalized(name, left) != normalized(name, right), "\(left) \(right)")
    }

    @Test("the canonical forms, as stored with a variant and hashed into its key")
    func canonicalForms() {
        #expect(normalized("Accept-Encoding", ["GZIP;Q=0.50, br, identity;q=0"]) == "br,gzip;q=0.5,identity;q=0")
        #expect(normalized("Accept-Language", ["fr-CH, fr;q=0.9, en;q=0.8, de;q=0.7, *;q=0.5"])
            == "fr-ch,fr;q=0.9,en;q=0.8,de;q=0.7,*;q=0.5")
        #expect(normalized("Accept", ["text/html;q=0.8, Application/XHTML+XML"]) == "application/xhtml+xml,text/html;q=0.8")
        #expect(normalized("Accept", ["text/plain;format=\"a;b, c\""]) == "text/plain;format=\"a;b, c\"")
        #expect(normalized("User-Agent", ["Mozilla/5.0  (X11)"]) == "Mozilla/5.0 (X11)")
    }

    @Test("qvalues are read as RFC 9110 §12.4.2 writes them", arguments: [
        ("1", 1000), ("1.", 1000), ("1.000", 1000), ("0", 0), ("0.5", 500), ("0.125", 125), ("0.05", 50),
    ])
    func qvalues(text: String, thousandths: Int) {
        #expect(VaryNormalization.qvalue(text) == thousandths)
        #expect(VaryNormalization.qvalue(VaryNormalization.qvalueText(thousandths)) == thousandths)
    }

    @Test("what is not a qvalue", arguments: ["", "2", "1.5", "0.1234", ".5", "0,5", "1.001", "-0", "q"])
    func notQvalues(text: String) {
        #expect(VaryNormalization.qvalue(text) == nil)
    }

    @Test("the secondary key names every nominated field and its value")
    func secondaryKey() {
        let vary = Vary(fieldNames: ["accept-language", "accept-encoding"])
        let values = vary.selectingValues(from: fields([("Accept-Encoding", "gzip")]))
        #expect(vary.secondaryKey(values: values) == "accept-encoding=gzip\naccept-language")
    }

    @Test("RFC 9110 §8.4.1.3: x-gzip in Accept-Encoding is gzip (and §8.4.1.1: x-compress is compress)")
    func codingAliases() {
        #expect(normalized("Accept-Encoding", ["x-gzip, br"]) == normalized("Accept-Encoding", ["gzip, br"]))
        #expect(normalized("Accept-Encoding", ["X-GZIP;q=0.5, x-compress"]) == "compress,gzip;q=0.5")
        // Only as a content coding: other fields keep the token.
        #expect(normalized("Accept", ["x-gzip"]) == "x-gzip")
    }
}
