import FastJSON
import Foundation
@testable import Gateway
import HealthgateCore
@testable import HealthgateTesting
@testable import Pipeline
import Posix
import SinkKit
import Testing
import CanonicalJSON

/// Requests that mean two things at once are refused, not read one way by us and another way
/// by whoever checks them next.
@Suite(.serialized) struct HTTPEdgeCaseTests {
    static let config = """
        listen: 127.0.0.1:0
        data_dir: DATA_DIR
        receivers:
          hae: {kind: hae, auth: {type: bearer, token: tok-1}, max_body: 64KB}
          key: {kind: hae, path: /k, auth: {type: header, header: api-key, token: tok-2}}
          csv: {kind: syncky, path: /s, device: p, auth: {type: bearer, token: tok-3}}
          lp: {kind: influx, device: p, auth: {type: bearer, token: tok-4}}
        routes:
          - {from: ["*"], to: [archive]}
        sinks:
          archive: {kind: file, path: "archive/{receiver}.ndjson", batch: {max_wait: 10ms}}
        """

    static let hae = #"{"data":{"metrics":[{"name":"step_count","units":"count","data":[{"date":"2026-10-14 09:00:00 +0200","qty":7}]}]}}"#

    func raw(_ serve: ServeProcess, _ head: String, body: [UInt8] = []) throws -> RawHTTPClient.Response {
        let c = serve.client()
        try c.connect()
        try c.sendRaw(Array(head.utf8) + body)
        return try c.readResponse()
    }

    @Test func headersThatSayTwoThingsAreRefused() throws {
        let serve = try ServeProcess(config: Self.config)
        let body = Array(Self.hae.utf8)
        let cl = "Content-Length: \(body.count)\r\n"
        // A NUL inside the value used to end it: the token before it was enough.
        var nul = Array("POST /api/data HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok-1".utf8)
        nul += [0] + Array("junk\r\n\(cl)\r\n".utf8)
        let c = serve.client()
        try c.connect()
        try c.sendRaw(nul + body)
        let n = try c.readResponse()
        #expect(n.status == 400, "\(n.status) \(n.text)")
        // …also as the last header, behind one NUL or two, with CRLF or bare LF line ends.
        for (tail, eol) in [([UInt8(0)], "\r\n"), ([0, 0], "\r\n"), ([0, 0, 0, 0], "\r\n"), ([0, 0, 0, 0, 0], "\r\n"), ([0], "\n")] {
            let head = Array(
                "POST /api/data HTTP/1.1\(eol)Host: x\(eol)Content-Length: \(body.count)\(eol)Authorization: Bearer tok-1".utf8)
            let c2 = serve.client()
            try c2.connect()
            try c2.sendRaw(head + tail + Array("junk\(eol)\(eol)".utf8) + body)
            let r = try c2.readResponse()
            #expect(r.status == 400 && r.text.contains("NUL"), "\(tail) \(r.status) \(r.text)")
        }
        // Bare LF line ends without a NUL are fine.
        let lf = try raw(
            serve, "POST /api/data HTTP/1.1\nHost: x\nContent-Length: \(body.count)\nAuthorization: Bearer tok-1\n\n", body: body)
        #expect(lf.status == 200, "\(lf.text)")
        let twice = try raw(
            serve, "POST /api/data HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok-1\r\nAuthorization: Bearer other\r\n\(cl)\r\n",
            body: body)
        #expect(twice.status == 400 && twice.text.contains("authorization"), "\(twice.text)")
        let sig = try raw(
            serve,
            "POST /s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok-3\r\nX-Syncky-Timestamp: 1\r\nX-Syncky-Timestamp: 2\r\n\(cl)\r\n",
            body: body)
        #expect(sig.status == 400 && sig.text.contains("x-syncky-timestamp"))
        let key = try raw(serve, "POST /k HTTP/1.1\r\nHost: x\r\napi-key: tok-2\r\napi-key: tok-2\r\n\(cl)\r\n", body: body)
        #expect(key.status == 401 && key.text.contains("more than once"), "\(key.text)")
        // White space before the colon: stored under another name, honoured by some proxies.
        let spaced = try raw(
            serve, "POST /api/data HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok-1\r\nTransfer-Encoding : chunked\r\n\(cl)\r\n",
            body: body)
        #expect(spaced.status == 400 && spaced.text.contains("white space"), "\(spaced.status) \(spaced.text)")
        let spacedAuth = try raw(
            serve, "POST /api/data HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok-1\r\nAuthorization : Bearer x\r\n\(cl)\r\n", body: body)
        #expect(spacedAuth.status == 400)
        let both = try raw(
            serve, "POST /api/data HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok-1\r\nTransfer-Encoding: chunked\r\n\(cl)\r\n",
            body: Array("\(String(body.count, radix: 16))\r\n".utf8) + body + Array("\r\n0\r\n\r\n".utf8))
        #expect(both.status == 400 && both.text.contains("Transfer-Encoding and Content-Length"), "\(both.status) \(both.text)")
        // The same request sent properly is taken, once.
        #expect(try raw(serve, "POST /api/data HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok-1\r\n\(cl)\r\n", body: body).status == 200)
        #expect(ServeProcess.eventually { serve.ndjson(under: "archive").count == 2 })
        usleep(100_000)
        #expect(serve.ndjson(under: "archive").count == 2)
    }

    /// Issue 46 (Low): framing as RFC 9112 has it — an HTTP/1.1 request without Host is 400, a
    /// transfer coding other than chunked is 501, a CR alone inside a header value is 400;
    /// HTTP/1.0 without Host and chunked bodies still go through.
    @Test func framingRFC9112Asks() throws {
        let serve = try ServeProcess(config: Self.config)
        let body = Array(Self.hae.utf8)
        let cl = "Content-Length: \(body.count)\r\n"
        let noHost = try raw(serve, "POST /api/data HTTP/1.1\r\nAuthorization: Bearer tok-1\r\n\(cl)\r\n", body: body)
        #expect(noHost.status == 400 && noHost.text.contains("Host"), "\(noHost.status) \(noHost.text)")
        let old = try raw(serve, "POST /api/data HTTP/1.0\r\nAuthorization: Bearer tok-1\r\n\(cl)\r\n", body: body)
        #expect(old.status == 200, "\(old.status) \(old.text)")
        for coding in ["gzip", "gzip, chunked", "identity", "x-foo"] {
            let r = try raw(
                serve, "POST /api/data HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok-1\r\nTransfer-Encoding: \(coding)\r\n\r\n",
                body: Array("\(String(body.count, radix: 16))\r\n".utf8) + body + Array("\r\n0\r\n\r\n".utf8))
            #expect(r.status == 501, "\(coding): \(r.status) \(r.text)")
        }
        let chunked = try raw(
            serve, "POST /api/data HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok-1\r\nTransfer-Encoding: chunked\r\n\r\n",
            body: Array("\(String(body.count, radix: 16))\r\n".utf8) + body + Array("\r\n0\r\n\r\n".utf8))
        #expect(chunked.status == 200, "\(chunked.status) \(chunked.text)")
        let cr = try raw(
            serve, "POST /api/data HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok-1\r\nX-Note: a\rb\r\n\(cl)\r\n", body: body)
        #expect(cr.status == 400, "\(cr.status) \(cr.text)")
        // The data dir's SQLite files are this user's alone (the request log made here).
        #expect(ServeProcess.eventually { FileManager.default.fileExists(atPath: serve.dataDir + "/requests.db") })
        let mode = try FileManager.default.attributesOfItem(atPath: serve.dataDir + "/requests.db")[.posixPermissions] as? Int
        #expect(mode == 0o600, "\(String(mode ?? 0, radix: 8))")
        serve.stop()
    }

    /// A chunked body far past the limit gets its 413 before the connection is closed.
    @Test func aChunkedBodyFarOverTheLimitIsAnswered413() throws {
        let serve = try ServeProcess(config: Self.config)
        let c = serve.client()
        try c.connect()
        try c.sendRaw(Array("POST /api/data HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok-1\r\nTransfer-Encoding: chunked\r\n\r\n".utf8))
        let chunk = Array("10000\r\n".utf8) + [UInt8](repeating: 0x20, count: 0x10000) + Array("\r\n".utf8)
        var sent = 0
        // Keep sending (up to 4 MB) until the server stops reading.
        while sent < 4 << 20 {
            do { try c.sendRaw(chunk) } catch { break }
            sent += chunk.count
        }
        let r = try c.readResponse()
        #expect(r.status == 413, "\(r.status) after \(sent) bytes")
        #expect(r.text.contains("limit of 64000 bytes"), "\(r.text)")
    }

    @Test func duplicateJSONKeysAreRefusedNamingTheKey() throws {
        let serve = try ServeProcess(config: Self.config)
        let c = serve.client()
        let top =
            #"{"data":{"metrics":[]},"data":{"metrics":[{"name":"step_count","units":"count","data":[{"date":"2026-10-14 09:00:00 +0200","qty":7}]}]}}"#
        let r1 = try c.request("POST", "/api/data", headers: [("Authorization", "Bearer tok-1")], body: Array(top.utf8))
        #expect(r1.status == 400 && r1.text.contains(#"the key \"data\" twice"#), "\(r1.text)")
        let inner =
            #"{"data":{"metrics":[{"name":"step_count","units":"count","data":[{"date":"2026-10-14 09:00:00 +0200","qty":7,"qty":9}]}]}}"#
        let r2 = try c.request("POST", "/api/data", headers: [("Authorization", "Bearer tok-1")], body: Array(inner.utf8))
        #expect(r2.status == 400 && r2.text.contains(#"the key \"qty\" twice"#), "\(r2.text)")
        // Large objects go through the other path of the check.
        let many = (0..<40).map { #""k\#($0)":1"# }.joined(separator: ",")
        let big = #"{"data":{"metrics":[],\#(many),"k39":2}}"#
        let r3 = try c.request("POST", "/api/data", headers: [("Authorization", "Bearer tok-1")], body: Array(big.utf8))
        #expect(r3.status == 400 && r3.text.contains(#"the key \"k39\" twice"#), "\(r3.text)")
        let fine = #"{"data":{"metrics":[],\#(many)}}"#
        #expect(try c.request("POST", "/api/data", headers: [("Authorization", "Bearer tok-1")], body: Array(fine.utf8)).status == 200)
    }

    /// Invalid UTF-8 in CSV and line protocol sets the line aside; it used to be stored with U+FFFD.
    @Test func invalidUTF8LinesGoToQuarantine() throws {
        let serve = try ServeProcess(config: Self.config)
        let c = serve.client()
        let csv =
            Array("type,uuid,start,end,value,unit,value_name,source,device,user_entered\r\n".utf8)
            + Array("steps,u1,2026-10-14T09:01:00+02:00,,412,count,,com.apple.Health,".utf8) + [0xC3, 0x28] + Array(",false\r\n".utf8)
            + Array("steps,u2,2026-10-14T09:01:00+02:00,,413,count,,com.apple.Health,Watch,false\r\n".utf8)
        let r = try c.request("POST", "/s", headers: [("Authorization", "Bearer tok-3"), ("X-Syncky-Format", "csv")], body: csv)
        #expect(r.status == 200, "\(r.text)")
        let lp =
            Array("steps,unit=count,source=".utf8) + [0xFF]
            + Array(" value=1 1791961260000000000\nsteps,unit=count value=2 1791961260000000000\n".utf8)
        let l = try c.request("POST", "/api/v2/write", headers: [("Authorization", "Bearer tok-4")], body: lp)
        #expect(l.status == 204 || l.status == 400, "\(l.text)")
        #expect(ServeProcess.eventually { serve.ndjson(under: "archive").count == 2 })
        let stored = serve.ndjson(under: "archive")
        #expect(stored.contains { $0["uuid"] as? String == "u2" })
        #expect(!stored.contains { $0["uuid"] as? String == "u1" })
        let reasons = serve.ndjson(under: "quarantine").compactMap { $0["reason"] as? String }
        #expect(reasons.contains("line 2: the row is not valid UTF-8"), "\(reasons)")
        #expect(reasons.contains("line 1: the line is not valid UTF-8"), "\(reasons)")
    }
}

/// A JSON body is parsed where it lies only when the room the server leaves after it holds
/// simdjson's padding: a larger padding in a newer simdjson would make every body copied again.
@Suite struct BodyRoomTests {
    @Test func theRoomAfterABodyHoldsTheParsersPadding() {
        #expect(JSONParser.padding <= HTTPRequest.bodySlack)
    }
}

/// The quarantine has a budget: forty 1 MiB unreadable bodies once made 41 MB of it.
@Suite struct QuarantineBudgetTests {
    static func duSize(_ dir: String) -> Int {
        var total = 0
        if let e = FileManager.default.enumerator(atPath: dir) {
            for case let rel as String in e {
                guard let a = try? FileManager.default.attributesOfItem(atPath: dir + "/" + rel),
                    a[.type] as? FileAttributeType == .typeRegular
                else { continue }
                total += (a[.size] as? Int) ?? 0
            }
        }
        return total
    }

    static let config = """
        listen: 127.0.0.1:0
        data_dir: DATA_DIR
        quarantine: {max_bytes: 5MB}
        receivers:
          hae: {kind: hae, auth: {type: bearer, token: t}, max_body: 2MB}
        """

    @Test func fortyBigUnreadableBodiesStayWithinTheBudget() throws {
        let serve = try ServeProcess(config: Self.config)
        let c = serve.client()
        let junk = [UInt8](repeating: 0x7B, count: 1 << 20) // "{{{{…": not JSON
        for _ in 0..<40 {
            #expect(try c.request("POST", "/api/data", headers: [("Authorization", "Bearer t")], body: junk).status == 400)
        }
        let size = Self.duSize(serve.dataDir + "/quarantine")
        #expect(size <= 5_000_000, "\(size)")
        // Every refusal keeps its reason line; the newest bodies are the ones kept.
        let lines = serve.ndjson(under: "quarantine")
        #expect(lines.count == 40)
        let kept = lines.compactMap { $0["body_file"] as? String }.filter { FileManager.default.fileExists(atPath: $0) }
        #expect(kept.count >= 3 && kept.count <= 4, "\(kept.count)")
        #expect(lines.suffix(kept.count).allSatisfy { ($0["body_file"] as? String).map { kept.contains($0) } == true })
        let metrics = try c.request("GET", "/metrics").text
        #expect(metrics.contains("healthgate_quarantine_bodies_deleted_total \(40 - kept.count)"), "\(metrics)")
        #expect(metrics.contains("healthgate_quarantine_bytes \(size)"), "\(metrics)")
        // After a restart the budget holds: it counts what is already on disk.
        serve.stop()
        let again = try ServeProcess(config: Self.config, dataDir: serve.dataDir)
        for _ in 0..<5 { _ = try again.client().request("POST", "/api/data", headers: [("Authorization", "Bearer t")], body: junk) }
        #expect(Self.duSize(serve.dataDir + "/quarantine") <= 5_000_000)
    }

    @Test func whenOnlyReasonLinesFitTheRecordsAreLeftOut() throws {
        let dir = ServeProcess.makeTempDir("q")
        let q = Quarantine(directory: dir, maxBytes: 4000, clock: SystemClock())
        let big = QuarantinedRecord(reason: "line 1: bad", raw: .string(String(repeating: "x", count: 3000)))
        try q.keep(records: [big], receiver: "r")
        try q.keep(records: [big], receiver: "r")
        let u = q.usage
        #expect(u.contentsLeftOut == 1 && u.bytes <= 4000, "\(u)")
        for _ in 0..<100 { try q.keep(records: [big], receiver: "r") }
        #expect(q.usage.bytes <= 4000 && q.usage.linesDropped > 0)
    }
}
