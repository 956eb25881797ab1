import FastJSON
import HealthgateCore

/// An `application/problem+json` (RFC 9457) response: what was wrong, for a person to read.
func problem(_ status: Int, _ title: String, _ detail: String, headers: [HTTPHeader] = []) -> HTTPResponse {
    var w = JSONWriter(capacity: 256)
    w.beginObject()
    w.key("type"); w.string("about:blank")
    w.key("title"); w.string(title)
    w.key("status"); w.int(status)
    w.key("detail"); w.string(detail)
    w.endObject()
    return HTTPResponse(
        status: status,
        headers: [HTTPHeader("Content-Type", "application/problem+json")] + headers,
        body: w.bytes)
}
