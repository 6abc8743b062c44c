public import HTTPTypes

/// Validation of stored responses: conditional requests and updating after `304 Not Modified`
/// (RFC 9111 §4.3).
public enum Validation {
    /// Header fields that make a client's request conditional or partial. (A cache evaluates `If-None-Match`,
    /// `If-Modified-Since`, `Range` and `If-Range` itself and forwards the others: see ``ClientConditions``.)
    public static let conditionalRequestFields: [HTTPField.Name] = [
        .ifNoneMatch, .ifModifiedSince, .ifMatch, .ifUnmodifiedSince, .ifRange, .range,
    ]

    /// Whether `request` carries its own conditions or a range (see ``conditionalRequestFields``).
    public static func isConditionalOrPartial(_ request: HTTPRequest) -> Bool {
        // One pass over the request's fields (none, for most requests), not one search per name.
        request.headerFields.contains { field in conditionalRequestFields.contains(field.name) }
    }

    /// The request that validates `stored` (RFC 9111 §4.3.1): `request` with `If-None-Match` carrying the
    /// stored `ETag` and `If-Modified-Since` carrying the stored `Last-Modified`.
    ///
    /// A `Last-Modified` that is not an HTTP date (RFC 9110 §5.6.7) is no validator: the origin must ignore an
    /// `If-Modified-Since` that is not a valid date (RFC 9110 §13.1.3), so none is sent.
    /// - Parameters:
    ///   - request: The client's request.
    ///   - stored: The stored response's header fields.
    /// - Returns: The conditional request, or nil when the stored response has no validator (then only a full
    ///   request can refresh it).
    public static func conditionalRequest(for request: HTTPRequest, stored: HTTPFields) -> HTTPRequest? {
        let etags = stored[values: .eTag]
        let lastModified = validLastModified(stored)
        guard !etags.isEmpty || lastModified != nil else { return nil }
        var conditional = request
        for name in conditionalRequestFields { conditional.headerFields[name] = nil }
        if !etags.isEmpty { conditional.headerFields[.ifNoneMatch] = etags.joined(separator: ", ") }
        if let lastModified { conditional.headerFields[.ifModifiedSince] = lastModified }
        return conditional
    }

    /// Whether a `304 Not Modified` refers to the stored response (RFC 9111 §4.3.4): by `ETag` when the 304 has
    /// one, else by `Last-Modified`; a 304 without validators refers to the one response that was validated.
    /// - Parameters:
    ///   - notModified: The 304's header fields.
    ///   - stored: The stored response's header fields.
    public static func notModified(_ notModified: HTTPFields, selects stored: HTTPFields) -> Bool {
        if let etag = notModified[.eTag]?.trimmingOWS() {
            guard let storedTag = stored[.eTag]?.trimmingOWS() else { return false }
            if etag.hasPrefix("W/") {
                // A weak validator: only the weak comparison can be made.
                return weakTag(etag) == weakTag(storedTag)
            }
            return etag == storedTag
        }
        if let lastModified = notModified[.lastModified] {
            // Two values that are not dates are not the same date.
            guard let storedLastModified = stored[.lastModified], let modified = HTTPDate.parse(lastModified),
                let storedModified = HTTPDate.parse(storedLastModified)
            else { return false }
            return modified == storedModified
        }
        // No validator in the 304: the conditional request was made for exactly one stored response.
        return true
    }

    /// Whether the stored response can be validated at all: it has an `ETag`, or a `Last-Modified` that is an
    /// HTTP date.
    public static func hasValidator(_ stored: HTTPFields) -> Bool {
        stored[.eTag] != nil || validLastModified(stored) != nil
    }

    /// The stored `Last-Modified` when it is an HTTP date.
    private static func validLastModified(_ stored: HTTPFields) -> String? {
        guard let lastModified = stored[.lastModified], HTTPDate.parse(lastModified) != nil else { return nil }
        return lastModified
    }

    private static func weakTag(_ tag: Substring) -> Substring {
        tag.hasPrefix("W/") ? tag.dropFirst(2) : tag
    }

    /// Whether a `200` to a HEAD request may update a stored GET response (RFC 9111 §4.3.5): every validator the
    /// HEAD response carries (`ETag`, compared as the same entity tag; `Last-Modified`, compared as the same
    /// date) has the same value in the stored response, and its `Content-Length`, when it has one, is the stored
    /// response's (its `Content-Length`, else the length of its stored content). A HEAD response with none of
    /// the three says nothing about the stored content: it may not update it (stricter than the section, which
    /// would let it), and the stored response is to be considered stale.
    /// - Parameters:
    ///   - head: The HEAD response's header fields.
    ///   - stored: The stored GET response's header fields.
    ///   - storedContentLength: The length of the stored content.
    public static func headResponse(_ head: HTTPFields, canUpdate stored: HTTPFields, storedContentLength: Int) -> Bool {
        var compared = false
        if let etag = head[.eTag] {
            compared = true
            guard let storedTag = stored[.eTag], etag.trimmingOWS() == storedTag.trimmingOWS() else { return false }
        }
        if let lastModified = head[.lastModified] {
            compared = true
            guard let storedLastModified = stored[.lastModified], let modified = HTTPDate.parse(lastModified),
                HTTPDate.parse(storedLastModified) == modified
            else { return false }
        }
        if let length = head[.contentLength] {
            compared = true
            let storedLength = stored[.contentLength].flatMap { Int($0.trimmingOWS()) } ?? storedContentLength
            guard Int(length.trimmingOWS()) == storedLength else { return false }
        }
        return compared
    }

    /// Header fields that a 304 does not replace in the stored response (RFC 9111 §3.2): `Content-Length`,
    /// and `Content-Encoding` and `Content-Range`, which describe the stored content itself.
    public static let fieldsNotUpdated: Set<HTTPField.Name> = [.contentLength, .contentEncoding, .contentRange]

    /// The stored header fields updated with those of a 304 (RFC 9111 §3.2, §4.3.4): every field the 304 carries
    /// replaces all stored fields of that name, except hop-by-hop fields and ``fieldsNotUpdated``.
    /// - Parameters:
    ///   - stored: The stored response's header fields.
    ///   - notModified: The 304's header fields.
    /// - Returns: The merged fields, in the stored order with new names appended.
    public static func merging(_ stored: HTTPFields, with notModified: HTTPFields) -> HTTPFields {
        let updates = HopByHop.removing(from: notModified)
        var merged = stored
        var replaced: Set<HTTPField.Name> = []
        for field in updates where !fieldsNotUpdated.contains(field.name) && !replaced.contains(field.name) {
            replaced.insert(field.name)
            merged[values: field.name] = updates[values: field.name]
        }
        return merged
    }
}

/// Hop-by-hop header fields, which a cache does not store (RFC 9111 §3.1, RFC 9110 §7.6.1).
public enum HopByHop {
    /// The fields that are always hop-by-hop: `Connection`, `Keep-Alive`, `TE`, `Transfer-Encoding`,
    /// `Upgrade`, `Trailer`, `Proxy-Connection`; besides these, every field whose name starts with `Proxy-`
    /// and every field `Connection` names.
    public static let fixedFieldNames: Set<String> = [
        "connection", "keep-alive", "te", "transfer-encoding", "upgrade", "trailer", "proxy-connection",
    ]

    /// Whether `name` is hop-by-hop in a message whose `Connection` names `connectionOptions`.
    public static func isHopByHop(_ name: HTTPField.Name, connectionOptions: Set<String> = []) -> Bool {
        let canonical = name.canonicalName
        return fixedFieldNames.contains(canonical) || canonical.hasPrefix("proxy-")
            || connectionOptions.contains(canonical)
    }

    /// `fields` without hop-by-hop fields: what a cache stores, and what it hands on, whether it answers from
    /// storage or from the origin (RFC 9110 §7.6.1). `fields` itself, not a copy, when it has none (the common
    /// case).
    public static func removing(from fields: HTTPFields) -> HTTPFields {
        let options = Set(
            fields[values: .connection].flatMap { $0.split(separator: ",") }.map { $0.trimmingOWS().lowercased() }
        )
        guard fields.contains(where: { isHopByHop($0.name, connectionOptions: options) }) else { return fields }
        var result = HTTPFields()
        result.reserveCapacity(fields.count)
        for field in fields where !isHopByHop(field.name, connectionOptions: options) {
            result.append(field)
        }
        return result
    }
}
