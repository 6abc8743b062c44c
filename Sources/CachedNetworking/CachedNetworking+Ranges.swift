import HTTPCaching
import HTTPTypes
import NIOCore

/// Range requests answered from stored complete responses (RFC 9110 §14, §13.1.5), through
/// ``CachedNetworking/respondConditional(_:body:policy:transport:)``: a `206` for one satisfiable range, a `416`
/// for none, the whole `200` for several (RFC 9110 §14.2 lets a server ignore `Range`), for an invalid `Range` or
/// another unit, or when `If-Range` does not match. Stored partial responses are in CachedNetworking+Partials.swift.
extension CachedNetworking {
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
