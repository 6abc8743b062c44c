import HTTPTypes

/// Store keys, readable in `redis-cli --scan`.
///
/// - generation: `<namespace>:generation` (an integer, `INCR`ed by `invalidateAll`)
/// - entry: `<namespace>:<generation>:{<url hash>}:<METHOD>:<url>`; a URL longer than the configured limit is
///   written as its prefix then `#h:` and a 64-bit hash
/// - variant (responses with `Vary`): `<entry>#v:<index nonce>:<hash of the Vary'd values>`
/// - fetch lease: `<entry>#lock`; background-refresh lease: `<entry or variant>#refresh`
///
/// `{<url hash>}` is a Redis Cluster hash tag: 16 hexadecimal digits of the normalized URL's FNV-1a hash. A
/// cluster places a key by the text between its first `{` and the next `}`, so an entry, its `Vary` variants and
/// its leases (they all begin with the entry key), and the entries of the URL's other methods and generations,
/// share one slot, whatever the URL contains. (A namespace that itself contains `{…}` moves every key of the
/// namespace into one slot: still correct, but not spread over the cluster.)
///
/// Normalized URLs never contain `#`, so suffixes cannot collide with another URL's key.
struct CacheKeys: Sendable {
    let namespace: String
    let maximumURLLength: Int

    var generationKey: String { "\(namespace):generation" }

    func entryKey(generation: Int, method: HTTPRequest.Method, uri: String) -> String {
        "\(namespace):\(generation):{\(Self.slotTag(uri))}:\(method.rawValue):\(keyPart(uri))"
    }

    /// What the hash tag holds for `uri`: its hash, so that the tag is short and free of braces.
    static func slotTag(_ uri: String) -> String { FNV1a64.hex(FNV1a64.hash(uri)) }

    func keyPart(_ uri: String) -> String {
        guard uri.utf8.count > maximumURLLength else { return uri }
        var prefix = ""
        var length = 0
        for character in uri {
            length += character.utf8.count
            if length > max(0, maximumURLLength - 20) { break }
            prefix.append(character)
        }
        return "\(prefix)#h:\(FNV1a64.hex(FNV1a64.hash(uri)))"
    }

    static func variantKey(entryKey: String, nonce: UInt64, secondaryKey: String) -> String {
        variantKey(entryKey: entryKey, nonce: nonce, hash: variantHash(secondaryKey: secondaryKey))
    }

    /// The variant key of the variant whose secondary key hashes to `hash` (``variantHash(secondaryKey:)``).
    static func variantKey(entryKey: String, nonce: UInt64, hash: UInt64) -> String {
        "\(entryKey)#v:\(FNV1a64.hex(nonce)):\(FNV1a64.hex(hash))"
    }

    /// The hash a variant's key ends with, of its secondary key (``Vary/secondaryKey(values:)``).
    static func variantHash(secondaryKey: String) -> UInt64 { FNV1a64.hash(secondaryKey) }

    static func lockKey(entryKey: String) -> String { "\(entryKey)#lock" }

    static func refreshKey(entryKey: String) -> String { "\(entryKey)#refresh" }
}
