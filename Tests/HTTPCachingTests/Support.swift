import Foundation
import HTTPTypes

/// A fixed instant that tests count from: 2024-01-01 00:00:00 GMT.
let epoch = Date(timeIntervalSince1970: 1_704_067_200)

/// `epoch` moved by `seconds`.
func at(_ seconds: Double) -> Date { epoch.addingTimeInterval(seconds) }

/// Header fields from name/value pairs (names must be valid).
func fields(_ pairs: [(String, String)]) -> HTTPFields {
    var result = HTTPFields()
    for (name, value) in pairs {
        guard let fieldName = HTTPField.Name(name) else { continue }
        result.append(HTTPField(name: fieldName, value: value))
    }
    return result
}

/// A response with `status` and header fields.
func response(_ status: Int = 200, _ pairs: [(String, String)] = []) -> HTTPResponse {
    HTTPResponse(status: .init(code: status), headerFields: fields(pairs))
}

/// A request for `https://example.com<path>` with header fields.
func request(
    _ method: HTTPRequest.Method = .get,
    _ path: String = "/resource",
    _ pairs: [(String, String)] = []
) -> HTTPRequest {
    HTTPRequest(method: method, scheme: "https", authority: "example.com", path: path, headerFields: fields(pairs))
}
