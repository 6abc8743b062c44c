import HTTPCaching
import HTTPTypes
import NIOCore

/// Range requests answered from stored complete responses (RFC 9110 §14, §13.1.5; RFC 9111 §3.4).
extension CachedNetworking {
    /// The answer to a request whose only conditional or partial fields are `Range` and `If-Range`; nil for a
    /// request with other conditionals, which is forwarded as it is.
    ///
    /// The whole representation is looked up, validated or served as for the same request without those
    /// fields, and the range is cut from it: a `206` for one satisfiable range, a `416` for none, the whole `200`
    /// for several (RFC 9110 §14.2 lets a server ignore `Range`) or when `If-Range` does not match. On a miss the
    /// range request goes to the origin as it is, and its answer is passed on without being stored. `Range` on
    /// another method than GET, or that is not a valid `bytes` range, is ignored (§14.2), and so is `If-Range`
    /// without `Range` (§13.1.5).
    func respondToRange(
        _ request: HTTPRequest,
        method: HTTPRequest.Method,
        body: ByteBuffer?,
        policy: CachePolicy,
        transport: (any HTTPTransport)?
    ) async throws(CachedNetworkingError) -> CachedResponse? {
        var whole = request
        whole.headerFields[.range] = nil
        whole.headerFields[.ifRange] = nil
        guard !Validation.isConditionalOrPartial(whole) else { return nil }
        guard method == .get, let ranges = ByteRanges(request) else {
            return try await respond(whole, body: body, policy: policy, transport: transport)
        }
        let answer = try await respond(whole, body: body, policy: policy, transport: transport, rangeMiss: request)
        return Self.part(of: answer, ranges: ranges, ifRange: request.headerFields[.ifRange])
    }

    /// `ranges` of `answer` when it is a whole `200` that `ifRange` (if any) matches.
    static func part(of answer: CachedResponse, ranges: ByteRanges, ifRange: String?) -> CachedResponse {
        guard answer.response.status.code == 200 else { return answer }
        if let ifRange, !IfRange.matches(ifRange, representation: answer.response.headerFields) { return answer }
        let length = answer.body.readableBytes
        // An empty representation has no byte to select, and no Content-Range can name none of it.
        guard length > 0 else { return answer }
        let satisfiable = ranges.satisfiable(length: length)
        if satisfiable.isEmpty {
            var fields = HTTPFields()
            if let date = answer.response.headerFields[.date] { fields[.date] = date }
            fields[.contentRange] = "bytes */\(length)"
            fields[.contentLength] = "0"
            for value in answer.response.headerFields[values: .cacheStatus] {
                fields.append(HTTPField(name: .cacheStatus, value: value))
            }
            var refused = answer
            refused.response = HTTPResponse(status: .rangeNotSatisfiable, headerFields: fields)
            refused.body = ByteBuffer()
            refused.entry = nil
            return refused
        }
        guard satisfiable.count == 1, let range = satisfiable.first,
            let slice = answer.body.getSlice(at: answer.body.readerIndex + range.lowerBound, length: range.count)
        else { return answer }
        var part = answer
        part.response.status = .partialContent
        part.response.headerFields[.contentRange] = "bytes \(range.lowerBound)-\(range.upperBound)/\(length)"
        part.response.headerFields[.contentLength] = String(range.count)
        part.body = slice
        part.entry = nil
        return part
    }
}
