import HealthgateCore

/// An `application/problem+json` (RFC 9457) response: what was wrong, for a person to read.
func problem(_ status: Int, _ title: String, _ detail: String, headers: [HTTPHeader] = []) -> HTTPResponse {
    var body = "{\"type\":\"about:blank\",\"title\":"
    appendJSONString(title, to: &body)
    body += ",\"status\":\(status),\"detail\":"
    appendJSONString(detail, to: &body)
    body += "}"
    return HTTPResponse(status: status,
                        headers: [HTTPHeader("Content-Type", "application/problem+json")] + headers,
                        body: Array(body.utf8))
}

/// Appends `s` as a JSON string literal (small, non-hot-path uses: problems, status output).
func appendJSONString(_ s: String, to out: inout String) {
    out += "\""
    for u in s.unicodeScalars {
        switch u {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        default:
            if u.value < 0x20 {
                let hex = String(u.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            } else {
                out.unicodeScalars.append(u)
            }
        }
    }
    out += "\""
}
