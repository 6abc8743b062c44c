import HTTPTypes

/// Store keys, readable in `redis-cli --scan`.
///
/// - generation: `<namespace>:generation` (an integer, `INCR`ed by `invalidateAll`)
/// - entry: `<namespace>:<generation>:<METHOD>:<url>`; a URL longer than the configured limit is written as
///   its prefix then `#h:` and a 64-bit hash
/// - variant (responses with `Vary`): `<entry>#v:<index nonce>:<hash of the Vary'd values>`
/// - fetch lease: `<entry>#lock`; background-refresh lease: `<entry or variant>#refresh`
///
/// Normalized URLs never contain `#`, so suffixes cannot collide with another URL's key.
struct CacheKeys: Sendable {
    let namespace: String
    let maximumURLLength: Int

    var generationKey: String { "\(namespace):generation" }

    func entryKey(generation: Int, method: HTTPRequest.Method, uri: String) -> String {
        "\(namespace):\(generation):\(method.rawValue):\(keyPart(uri))"
    }

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
        "\(entryKey)#v:\(FNV1a64.hex(nonce)):\(FNV1a64.hex(FNV1a64.hash(secondaryKey)))"
    }

    static func lockKey(entryKey: String) -> String { "\(entryKey)#lock" }

    static func refreshKey(entryKey: String) -> String { "\(entryKey)#refresh" }
}
