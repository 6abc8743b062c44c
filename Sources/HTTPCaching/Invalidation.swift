public import HTTPTypes

/// Target URIs as a cache keys them.
public enum CacheURI {
    /// The normalized target URI of `request` (`scheme://authority/path?query`), or nil when the request has
    /// no scheme or authority.
    ///
    /// Normalization (RFC 3986 §6.2.2, RFC 9110 §4.2.3): scheme and host lowercased, the default port
    /// dropped, an empty path written `/`, percent-encodings of unreserved characters decoded (`%7E` is `~`) and
    /// the others in upper case. Dot segments stay: the request goes to the origin as it was made, and an origin
    /// need not resolve `/a/../b` to `/b`, so the two must not share an entry (or a lifetime override).
    public static func normalized(_ request: HTTPRequest) -> String? {
        guard let scheme = request.scheme, let authority = request.authority, !authority.isEmpty else { return nil }
        return normalized(scheme: scheme, authority: authority, pathAndQuery: request.path ?? "/")
    }

    /// The normalized form of a URI from its parts (see ``normalized(_:)``).
    public static func normalized(scheme: String, authority: String, pathAndQuery: String) -> String {
        if isNormalized(scheme: scheme, authority: authority, pathAndQuery: pathAndQuery) {
            // Joined into one allocation (`+` would allocate for each intermediate string).
            var uri = ""
            uri.reserveCapacity(scheme.utf8.count + 3 + authority.utf8.count + pathAndQuery.utf8.count)
            uri += scheme
            uri += "://"
            uri += authority
            uri += pathAndQuery
            return uri
        }
        let lowerScheme = scheme.lowercased()
        var path = pathAndQuery.isEmpty ? "/" : pathAndQuery
        if let hash = path.firstIndex(of: "#") { path = String(path[..<hash]) }
        if !path.hasPrefix("/") && !path.hasPrefix("?") { path = "/" + path }
        if path.hasPrefix("?") { path = "/" + path }
        path = normalizingPercentEncodings(path)
        return "\(lowerScheme)://\(normalizedAuthority(authority, scheme: lowerScheme))\(path)"
    }

    /// Whether the parts are already in normalized form, so that normalizing would only join them (the common
    /// case, checked byte by byte without building strings): scheme and authority in lower-case ASCII without
    /// userinfo or a default or empty port, and a path that starts with `/` and has no fragment or
    /// percent-encoding.
    private static func isNormalized(scheme: String, authority: String, pathAndQuery: String) -> Bool {
        func isLowerASCII(_ byte: UInt8) -> Bool { byte < 0x80 && !(UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) }
        // Native strings hand out their bytes at once; the pointer loops are much cheaper than the view's.
        func all(_ text: String, _ test: (UInt8) -> Bool) -> Bool {
            text.utf8.withContiguousStorageIfAvailable { $0.allSatisfy(test) } ?? text.utf8.allSatisfy(test)
        }
        guard all(scheme, isLowerASCII), !authority.isEmpty,
            all(authority, { isLowerASCII($0) && $0 != UInt8(ascii: "@") }),
            pathAndQuery.utf8.first == UInt8(ascii: "/"),
            all(pathAndQuery, { $0 != UInt8(ascii: "#") && $0 != UInt8(ascii: "%") })
        else { return false }
        // A port, if any, must be one normalization keeps: not empty and not the scheme's default.
        guard let colon = authority.utf8.lastIndex(of: UInt8(ascii: ":")),
            !authority.utf8[colon...].contains(UInt8(ascii: "]"))
        else { return true }
        let port = authority.utf8[authority.utf8.index(after: colon)...]
        if port.isEmpty { return false }
        let defaultPort = scheme == "https" ? "443" : scheme == "http" ? "80" : nil
        return defaultPort.map { !port.elementsEqual($0.utf8) } ?? true
    }

    static func normalizedAuthority(_ authority: String, scheme: String) -> String {
        var hostPort = Substring(authority)
        if let at = hostPort.lastIndex(of: "@") { hostPort = hostPort[hostPort.index(after: at)...] }
        var host = hostPort
        var port: Substring? = nil
        if let colon = hostPort.lastIndex(of: ":"), !hostPort[colon...].contains("]") {
            host = hostPort[..<colon]
            port = hostPort[hostPort.index(after: colon)...]
        }
        let defaultPort = scheme == "https" ? "443" : scheme == "http" ? "80" : nil
        if let value = port, value.isEmpty || defaultPort.map({ value == $0 }) == true { port = nil }
        return host.lowercased() + (port.map { ":\($0)" } ?? "")
    }

    /// `%XX` of an unreserved character (RFC 3986 §2.3: letters, digits, `-`, `.`, `_`, `~`) decoded, every
    /// other `%XX` with upper-case hex digits; a `%` not followed by two hex digits stays as it is.
    private static func normalizingPercentEncodings(_ text: String) -> String {
        guard text.utf8.contains(UInt8(ascii: "%")) else { return text }
        func hexValue(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        func isUnreserved(_ byte: UInt8) -> Bool {
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || Array("-._~".utf8).contains(byte)
        }
        let bytes = Array(text.utf8)
        var result: [UInt8] = []
        result.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            if bytes[i] == UInt8(ascii: "%"), i + 2 < bytes.count, let high = hexValue(bytes[i + 1]), let low = hexValue(bytes[i + 2]) {
                let decoded = high << 4 | low
                if isUnreserved(decoded) {
                    result.append(decoded)
                } else {
                    func upper(_ digit: UInt8) -> UInt8 { digit >= UInt8(ascii: "a") ? digit - 0x20 : digit }
                    result.append(contentsOf: [UInt8(ascii: "%"), upper(bytes[i + 1]), upper(bytes[i + 2])])
                }
                i += 3
            } else {
                result.append(bytes[i])
                i += 1
            }
        }
        return String(decoding: result, as: UTF8.self)
    }

    /// Resolves `reference` (a `Location` or `Content-Location` value) against the normalized URI `base`
    /// (RFC 3986 §5.2), then normalizes it.
    /// - Returns: The absolute URI, or nil when `reference` is not a usable HTTP(S) reference.
    public static func resolve(_ reference: String, against base: String) -> String? {
        let reference = String(reference.trimmingOWS())
        guard !reference.isEmpty, let baseParts = split(base) else { return nil }
        if let schemeEnd = reference.firstIndex(of: ":"),
            reference[..<schemeEnd].allSatisfy({ $0.isLetter || $0.isNumber || "+-.".contains($0) }),
            reference[..<schemeEnd].first?.isLetter == true
        {
            guard let parts = split(reference) else { return nil }
            return normalized(scheme: parts.scheme, authority: parts.authority, pathAndQuery: removeDotSegments(parts.path))
        }
        if reference.hasPrefix("//") {
            return resolve(baseParts.scheme + ":" + reference, against: base)
        }
        if reference.hasPrefix("/") {
            return normalized(scheme: baseParts.scheme, authority: baseParts.authority, pathAndQuery: removeDotSegments(reference))
        }
        if reference.hasPrefix("?") {
            let basePath = baseParts.path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? "/"
            return normalized(scheme: baseParts.scheme, authority: baseParts.authority, pathAndQuery: basePath + reference)
        }
        let basePath = baseParts.path.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? "/"
        let directory = basePath.lastIndex(of: "/").map { String(basePath[...$0]) } ?? "/"
        return normalized(scheme: baseParts.scheme, authority: baseParts.authority, pathAndQuery: removeDotSegments(directory + reference))
    }

    /// Whether two normalized URIs have the same origin (scheme, host and port).
    public static func sameOrigin(_ left: String, _ right: String) -> Bool {
        guard let leftParts = split(left), let rightParts = split(right) else { return false }
        let leftScheme = leftParts.scheme.lowercased()
        let rightScheme = rightParts.scheme.lowercased()
        guard leftScheme == rightScheme else { return false }
        let leftAuthority: String = normalizedAuthority(leftParts.authority, scheme: leftScheme)
        let rightAuthority: String = normalizedAuthority(rightParts.authority, scheme: rightScheme)
        return leftAuthority == rightAuthority
    }

    private static func split(_ uri: String) -> (scheme: String, authority: String, path: String)? {
        guard let range = uri.firstRange(of: "://") else { return nil }
        let scheme = String(uri[..<range.lowerBound])
        let rest = uri[range.upperBound...]
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        let authority = String(rest[..<authorityEnd])
        guard !authority.isEmpty, !scheme.isEmpty else { return nil }
        var path = String(rest[authorityEnd...])
        if let hash = path.firstIndex(of: "#") { path = String(path[..<hash]) }
        return (scheme, authority, path.isEmpty ? "/" : path)
    }

    /// RFC 3986 §5.2.4 on the path part; the query is kept as it is.
    static func removeDotSegments(_ pathAndQuery: String) -> String {
        let pieces = pathAndQuery.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let path = pieces.first.map(String.init) ?? ""
        var output: [Substring] = []
        let segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        for (index, segment) in segments.enumerated() {
            let last = index == segments.count - 1
            switch segment {
            case ".":
                if last { output.append("") }
            case "..":
                if !output.isEmpty { output.removeLast() }
                if last { output.append("") }
            default:
                output.append(segment)
            }
        }
        let resolved = "/" + output.joined(separator: "/")
        return pieces.count > 1 ? resolved + "?" + pieces[1] : resolved
    }
}

/// Invalidation after unsafe requests (RFC 9111 §4.4).
public enum Invalidation {
    /// Methods that are safe (RFC 9110 §9.2.1); every other method is unsafe.
    public static let safeMethods: Set<HTTPRequest.Method> = [.get, .head, .options, .trace, .query]

    /// The URIs whose stored responses a cache must invalidate after `response` to `request`.
    ///
    /// For an unsafe method (POST, PUT, DELETE, PATCH, …) with a non-error status (2xx or 3xx): the target URI,
    /// and the URIs in `Location` and `Content-Location` when they have the same origin. Otherwise none.
    /// - Returns: Normalized URIs (see ``CacheURI/normalized(_:)``), without duplicates.
    public static func targets(request: HTTPRequest, response: HTTPResponse) -> [String] {
        guard !safeMethods.contains(request.method), (200..<400).contains(response.status.code),
            let target = CacheURI.normalized(request)
        else { return [] }
        var uris = [target]
        for name in [HTTPField.Name.location, .contentLocation] {
            guard let value = response.headerFields[name], let resolved = CacheURI.resolve(value, against: target),
                CacheURI.sameOrigin(resolved, target), !uris.contains(resolved)
            else { continue }
            uris.append(resolved)
        }
        return uris
    }
}
