import FastJSON
import Foundation
import Gateway
import Glibc
import HealthgateCore
import Synchronization

/// The `http` sink's server in the bench: a webhook receiver on loopback (healthgate's own
/// HTTP server, libmicrohttpd, 8 threads) that parses each NDJSON line of a POST (simdjson, as a
/// consumer that reads what it gets must), counts the records with a uuid, answers 204, and
/// keeps the largest body it took (a whole batch) — its ceiling is that body posted again and
/// again from one keep-alive connection, without healthgate.
final class WebhookReceiver: HTTPHandler, @unchecked Sendable {
    private let largest = Mutex<(body: [UInt8], records: Int)?>(nil)
    private var server: HTTPServer?
    private(set) var port: UInt16 = 0

    init?() {
        let s = HTTPServer(
            options: HTTPServer.Options(host: "127.0.0.1", port: 0, threads: 8, maxBufferedBytes: 512 << 20),
            handler: self)
        guard let p = try? s.start() else { return nil }
        server = s
        port = p
    }

    var sinkLine: String { #"archive: {kind: http, url: "http://127.0.0.1:\#(port)/hook", format: ndjson}"# }

    func handle(_ request: HTTPRequest) -> HTTPResponse {
        guard request.method == "POST" else { return HTTPResponse(status: 405) }
        let lines = WebhookReceiver.records(request.body)
        largest.withLock { if lines > ($0?.records ?? 0) { $0 = (request.body, lines) } }
        return HTTPResponse(status: 204)
    }

    func maxBodyBytes(forPath path: String) -> Int { 256 << 20 }
    func bodyTooLarge(path: String, limit: Int) -> HTTPResponse { HTTPResponse(status: 413) }
    func tooMuchInFlight(path: String, limit: Int) -> HTTPResponse { HTTPResponse(status: 503) }
    func preflight(_ headersOnly: HTTPRequest) -> HTTPResponse? { nil }

    /// The receiver's own ceiling, in records a second: the largest body the sink posted, posted
    /// again from one keep-alive connection for 3 s.
    func ceiling() -> Double? {
        guard let (body, perBody) = largest.withLock({ $0 }) else { return nil }
        let head = Array(
            ("POST /hook HTTP/1.1\r\nHost: bench\r\nContent-Type: application/x-ndjson\r\n"
                + "Content-Length: \(body.count)\r\n\r\n").utf8)
        let conn = Connection(port: port)
        let started = Date()
        var posted = 0
        while Date().timeIntervalSince(started) < 3 {
            guard conn.post(head, body) == 204 else { return nil }
            posted += 1
        }
        return Double(posted * perBody) / Date().timeIntervalSince(started)
    }

    func stop() { server?.stop() }

    /// The records in an NDJSON body: its lines that parse as JSON objects with a string `uuid`.
    static func records(_ body: [UInt8]) -> Int {
        let parser = JSONParser()
        return body.withUnsafeBytes { b -> Int in
            guard let base = b.baseAddress else { return 0 }
            var n = 0, start = 0
            while start < b.count, let q = memchr(base + start, 0x0A, b.count - start) {
                let end = UnsafeRawPointer(q) - base
                if let doc = try? parser.parse(UnsafeRawBufferPointer(rebasing: b[start..<end])),
                    uuidKey.withUnsafeBytes({ doc.root.member(named: $0)?.string }) != nil
                {
                    n += 1
                }
                start = end + 1
            }
            return n
        }
    }

    static let uuidKey: [UInt8] = Array("uuid".utf8)
}
