import Foundation
import FuzzChecks
import Testing

/// Every input of the fuzzing corpus (hostile inputs written by hand, and every crash the fuzzers found),
/// replayed through the same checks the libFuzzer targets run, so that a plain `swift test` keeps them fixed.
@Suite("Fuzzing corpus replayed")
struct FuzzCorpusTests {
    /// The corpus directory of a fuzz target, beside this file's directory.
    static func inputs(of target: String) -> [(name: String, bytes: [UInt8])] {
        let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("corpus").appendingPathComponent(target)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.sorted().compactMap { name in
            guard let data = FileManager.default.contents(atPath: directory.appendingPathComponent(name).path) else {
                return nil
            }
            return (name, [UInt8](data))
        }
    }

    /// Runs `check` on every input of `target`'s corpus, whole (the fuzzers cut long ones at -max_len).
    static func replay(_ target: String, _ check: (UnsafeRawBufferPointer) -> String?) {
        let corpus = inputs(of: target)
        #expect(corpus.count >= 20, "the corpus of \(target) is missing")
        for (name, bytes) in corpus {
            let failure = bytes.withUnsafeBytes { check($0) }
            #expect(failure == nil, "\(target)/\(name): \(failure ?? "")")
        }
    }

    @Test("the request parser: same commands however the bytes are cut, within its limits")
    func requestParser() {
        Self.replay("fuzz-request", RequestParserCheck.check)
    }

    @Test("the reply decoder: same replies however the bytes are cut, within its limits, re-encodable")
    func replyDecoder() {
        Self.replay("fuzz-reply", ReplyDecoderCheck.check)
    }

    @Test("the command layer: one well-formed reply per command, a consistent keyspace after")
    func commands() {
        Self.replay("fuzz-commands", CommandCheck.check)
    }
}
