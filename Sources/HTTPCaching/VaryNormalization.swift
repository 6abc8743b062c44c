/// The canonical form of a request field that `Vary` nominates, so that requests which differ only in ways the
/// field's semantics ignore select the same stored response (RFC 9111 §4.1: a cache may normalize the values,
/// "such as by removing whitespace, normalizing case, or reordering list members, when the semantics of the
/// field allow it").
///
/// The same function gives the values kept with a stored variant (and the variant's key) and the values of a
/// request looked up, so both sides always agree.
///
/// - Every field: its field lines combine into one comma-separated list (RFC 9110 §5.3); whitespace around the
///   members goes, empty members go, runs of whitespace inside a member become one space.
/// - `Accept-Encoding`, `Accept-Charset`, `Accept-Language`: their tokens are case-insensitive, so the whole
///   value is lowercased. In `Accept-Encoding`, `x-gzip` is written `gzip` and `x-compress` `compress`: RFC 9110
///   §8.4.1 asks recipients to take them as equivalent.
/// - The same three and `Accept` are lists of weighted members (RFC 9110 §12.4.2, §12.5): whitespace around `;`
///   and `=` goes, parameter names are lowercased (and `Accept`'s media type, RFC 9110 §8.3.1; its parameter
///   values are kept as sent), the weight is written in one way (`q=0.50` is `q=0.5`; a trailing `q=1` is the
///   default and goes), and the members are ordered by descending weight. Members of equal weight keep their
///   order, except in `Accept-Encoding`: RFC 9110 §12.5.4 notes that recipients may take the order of
///   `Accept-Language`'s members as a preference among equal weights, and nothing rules that out for `Accept`
///   and `Accept-Charset`, while `Accept-Encoding`'s preference is its weights alone (§12.5.3), so there they
///   are sorted. A list with a weight that is not a valid qvalue keeps its order.
enum VaryNormalization {
    /// The canonical form of `values`, the field lines of the request field `name` (lowercased).
    static func normalize(_ values: [String], field name: String) -> String {
        switch name {
        case "accept-encoding": weighted(values, lowercased: true, sortsTies: true, codings: true)
        case "accept-charset", "accept-language": weighted(values, lowercased: true, sortsTies: false)
        case "accept": weighted(values, lowercased: false, sortsTies: false)
        default: members(values).joined(separator: ",")
        }
    }

    /// The list members of `values`, trimmed, with inner runs of whitespace made one space; empty ones left out.
    private static func members(_ values: [String]) -> [String] {
        var elements: [String] = []
        for value in values {
            for element in CacheDirective.splitList(value) {
                let collapsed = element.split(whereSeparator: { $0 == " " || $0 == "\t" }).joined(separator: " ")
                if !collapsed.isEmpty { elements.append(collapsed) }
            }
        }
        return elements
    }

    /// A weighted list in canonical form. `lowercased`: the whole member is case-insensitive (otherwise only the
    /// value before the parameters and the parameter names are). `sortsTies`: members of equal weight are sorted
    /// too, as their order carries no meaning. `codings`: the members are content codings, whose aliases are
    /// written as the codings they stand for.
    private static func weighted(_ values: [String], lowercased: Bool, sortsTies: Bool, codings: Bool = false) -> String {
        var entries: [(text: String, weight: Int?)] = []
        for member in members(values) {
            entries.append(weightedMember(lowercased ? member.lowercased() : member, codings: codings))
        }
        // A weight that is not a qvalue leaves the preference unclear: the list stays as sent.
        guard entries.allSatisfy({ $0.weight != nil }) else { return entries.map(\.text).joined(separator: ",") }
        let ordered = entries.enumerated().sorted { left, right in
            let (leftWeight, rightWeight) = (left.element.weight ?? 0, right.element.weight ?? 0)
            if leftWeight != rightWeight { return leftWeight > rightWeight }
            if sortsTies, left.element.text != right.element.text { return left.element.text < right.element.text }
            return left.offset < right.offset
        }
        return ordered.map(\.element.text).joined(separator: ",")
    }

    /// One member (`value *( OWS ";" OWS name=value )`) in canonical form, and its weight in thousandths (1000
    /// when it has none; nil when its `q` is not a qvalue).
    private static func weightedMember(_ member: String, codings: Bool) -> (text: String, weight: Int?) {
        let parts = CacheDirective.splitList(member, separator: ";")
        var text = String(parts[0].trimmingOWS()).lowercased()
        if codings, let coding = codingAliases[text] { text = coding }
        var weight: Int? = 1000
        var parameters: [(name: String, value: String)] = []
        for part in parts.dropFirst() {
            let trimmed = part.trimmingOWS()
            if trimmed.isEmpty { continue }
            guard let equals = trimmed.firstIndex(of: "=") else {
                parameters.append((String(trimmed).lowercased(), ""))
                continue
            }
            let name = String(trimmed[..<equals].trimmingOWS()).lowercased()
            var value = String(trimmed[trimmed.index(after: equals)...].trimmingOWS())
            if name == "q" {
                weight = qvalue(value)
                if let weight { value = qvalueText(weight) }
            }
            parameters.append((name, value))
        }
        // `q=1` is what a member without a weight has; at the end (where a weight belongs) it says nothing.
        if let last = parameters.last, last.name == "q", weight == 1000 { parameters.removeLast() }
        for (name, value) in parameters { text += value.isEmpty ? ";\(name)" : ";\(name)=\(value)" }
        return (text, weight)
    }

    /// Content codings a recipient should take as others (RFC 9110 §8.4.1.1, §8.4.1.3): `x-compress` is
    /// `compress`, `x-gzip` is `gzip`.
    static let codingAliases: [String: String] = ["x-gzip": "gzip", "x-compress": "compress"]

    /// A qvalue (RFC 9110 §12.4.2: `0`, `0.` and up to three digits, `1`, `1.` and up to three zeros) in
    /// thousandths; nil for anything else.
    static func qvalue(_ text: String) -> Int? {
        let bytes = Array(text.utf8)
        guard let first = bytes.first, first == UInt8(ascii: "0") || first == UInt8(ascii: "1") else { return nil }
        let whole = Int(first - UInt8(ascii: "0"))
        guard bytes.count > 1 else { return whole * 1000 }
        guard bytes[1] == UInt8(ascii: "."), bytes.count <= 5 else { return nil }
        var fraction = 0
        var scale = 100
        for byte in bytes[2...] {
            let digit = byte &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            fraction += Int(digit) * scale
            scale /= 10
        }
        guard whole == 0 || fraction == 0 else { return nil }
        return whole * 1000 + fraction
    }

    /// `thousandths` as the shortest qvalue: `1`, `0`, `0.5`, `0.125`.
    static func qvalueText(_ thousandths: Int) -> String {
        if thousandths == 1000 { return "1" }
        if thousandths == 0 { return "0" }
        var digits = String(thousandths + 1000).dropFirst()  // three digits, leading zeros kept
        while digits.last == "0" { digits = digits.dropLast() }
        return "0.\(digits)"
    }
}
