import CacheCore
import Testing

@Suite("SHA-256")
struct SHA256Tests {
    @Test("the digests of FIPS 180-4's examples, and of inputs around the padding boundaries")
    func knownDigests() {
        #expect(SHA256.hexDigest("".utf8) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256.hexDigest("abc".utf8) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            SHA256.hexDigest("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(
            SHA256.hexDigest(Array(repeating: UInt8(ascii: "a"), count: 1_000_000))
                == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
        // 55, 56 and 64 bytes: the length fits the last block, just does not, and a whole block of message.
        #expect(SHA256.digest(Array(repeating: UInt8(0), count: 55)).count == 32)
        #expect(
            SHA256.hexDigest(Array(repeating: UInt8(ascii: "a"), count: 64))
                == "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb")
    }
}
