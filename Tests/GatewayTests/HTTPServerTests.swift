import Foundation
import Glibc
@testable import HealthgateTesting
@testable import Pipeline
import SinkKit
import Testing

/// What the HTTP layer promises beyond the receivers: HTTPS, idle-client limits, no redirects.
@Suite(.serialized) struct HTTPServerTests {
    static func shell(_ command: String) throws -> (Int32, String) { try Command.run("/bin/sh", ["-c", command]) }

    @Test func servesHTTPSWhenTLSHasACertAndKey() throws {
        let dir = ServeProcess.makeTempDir("tls")
        let (rc, out) = try Self.shell(
            "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 "
                + "-subj /CN=localhost -keyout \(dir)/key.pem -out \(dir)/cert.pem")
        #expect(rc == 0, "\(out)")
        let config = LiveServeTests.config.replacingOccurrences(
            of: "data_dir: DATA_DIR", with: "data_dir: DATA_DIR\ntls: {cert: \(dir)/cert.pem, key: \(dir)/key.pem}")
        let serve = try ServeProcess(config: config)
        #expect(serve.stdoutText.contains("listening on https://"))
        let body = Vectors.syncBody(samples: [Vectors.stepsSample])
        let headers = LiveServeTests.signedHeaders(body).map { "-H '\($0.0): \($0.1)'" }.joined(separator: " ")
        try body.write(toFile: dir + "/body.json", atomically: true, encoding: .utf8)
        let (crc, status) = try Self.shell(
            "curl -sS -o /dev/null -w '%{http_code}' --cacert \(dir)/cert.pem "
                + "\(headers) --data-binary @\(dir)/body.json https://localhost:\(serve.port)/hook")
        #expect(crc == 0)
        #expect(status == "200", "\(status)")
        #expect(ServeProcess.eventually { serve.ndjson(under: "archive").count == 1 })
        // Plain HTTP to the HTTPS port gets nowhere.
        let (_, plain) = try Self.shell("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:\(serve.port)/healthz")
        #expect(plain != "200")
        // libmicrohttpd's own complaint about it is in our log, in our format.
        #expect(ServeProcess.eventually(5) { serve.stderrText.contains(" level=warning component=http msg=") }, "\(serve.stderrText)")
    }

    @Test func closesConnectionsThatStallMidRequest() throws {
        let config = LiveServeTests.config.replacingOccurrences(
            of: "data_dir: DATA_DIR", with: "data_dir: DATA_DIR\nhttp: {connection_timeout: 1s}")
        let serve = try ServeProcess(config: config)
        let c = serve.client()
        try c.sendRaw(Array("POST /hook HTTP/1.1\r\nHost: x\r\nContent-Le".utf8))
        let start = Date()
        // The server must close the socket by itself; recv returns 0 (or an error) once it does.
        var buf = [UInt8](repeating: 0, count: 64)
        let n = buf.withUnsafeMutableBytes { recv(c.fd, $0.baseAddress, $0.count, 0) }
        let waited = Date().timeIntervalSince(start)
        #expect(n <= 0)
        #expect(waited < 10, "closed after \(waited) s")
        // Meanwhile other clients are served.
        #expect(try serve.client().request("GET", "/healthz").status == 200)
    }

    @Test func keepsConnectionsAliveAndNeverRedirects() throws {
        let serve = try ServeProcess(config: LiveServeTests.config)
        let c = serve.client()
        for _ in 0..<5 {
            let r = try c.request("GET", "/healthz")
            #expect(r.status == 200)
        }
        // A trailing slash is the same receiver, answered in place (the app follows no redirect).
        let body = Vectors.syncBody(samples: [Vectors.stepsSample])
        let r = try c.request("POST", "/hook/", headers: LiveServeTests.signedHeaders(body), body: Array(body.utf8))
        #expect(r.status == 200)
        // Two different Content-Length headers are refused (request smuggling).
        let c2 = serve.client()
        try c2.sendRaw(Array("POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}".utf8))
        let smuggled = try c2.readResponse()
        #expect(smuggled.status == 400)
    }
}
