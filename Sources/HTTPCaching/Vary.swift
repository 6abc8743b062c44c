public import HTTPTypes

/// A response's `Vary` header field: which request header fields select among its variants (RFC 9111 §4.1).
public struct Vary: Sendable, Hashable {
    /// The nominated field names, lowercased, without duplicates, sorted.
    public let fieldNames: [String]
    /// Whether the response carried `Vary: *`, which no request matches.
    public let isWildcard: Bool

    /// Reads the `Vary` field lines of `responseFields`.
    /// - Returns: nil when the response has no `Vary` (or only empty ones).
    public init?(_ responseFields: HTTPFields) {
        var names: Set<String> = []
        var wildcard = false
        for value in responseFields[values: .vary] {
            for element in value.split(separator: ",") {
                let name = element.trimmingOWS().lowercased()
                if name.isEmpty { continue }
                if name == "*" { wildcard = true } else { names.insert(name) }
            }
        }
        guard wildcard || !names.isEmpty else { return nil }
        self.fieldNames = names.sorted()
        self.isWildcard = wildcard
    }

    /// Nominates `fieldNames`.
    public init(fieldNames: [String]) {
        let lowered = Set(fieldNames.map { $0.lowercased() })
        self.isWildcard = lowered.contains("*")
        self.fieldNames = lowered.subtracting(["*"]).sorted()
    }

    /// The normalized values of the nominated fields in `requestFields`, one per name in ``fieldNames`` order;
    /// nil where the request lacks the field (which differs from an empty value).
    ///
    /// Normalization (see ``VaryNormalization``) combines field lines into one list, trims whitespace around list
    /// members, collapses runs of whitespace, lowercases fields whose values are case-insensitive
    /// (`Accept-Encoding`, `Accept-Charset`, `Accept-Language`, and `Accept`'s media types), writes weights one
    /// way and orders weighted members by weight.
    public func selectingValues(from requestFields: HTTPFields) -> [String?] {
        fieldNames.map { name in
            guard let fieldName = HTTPField.Name(name) else { return nil }
            let values = requestFields[values: fieldName]
            guard !values.isEmpty else { return nil }
            return VaryNormalization.normalize(values, field: name)
        }
    }

    /// Whether a request with `requestFields` matches a stored response selected by `storedValues`.
    /// Never true for `Vary: *`.
    public func matches(storedValues: [String?], requestFields: HTTPFields) -> Bool {
        !isWildcard && storedValues == selectingValues(from: requestFields)
    }

    /// A canonical text of `values` for these field names (`accept-encoding=gzip` lines), from which a cache
    /// derives a variant's secondary key. Absent fields are written without `=`.
    public func secondaryKey(values: [String?]) -> String {
        zip(fieldNames, values).map { name, value in value.map { "\(name)=\($0)" } ?? name }
            .joined(separator: "\n")
    }
}
