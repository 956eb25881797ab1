import Foundation
import Gateway
import Glibc
import HealthgateCore
import HealthgateCrypto
@testable import HealthgateTesting
@testable import Pipeline
import SinkKit
import Testing

/// `healthgate serve` as a user runs it: a child process, real HTTP over loopback, real files.
@Suite(.serialized) struct LiveServeTests {
    static let config = """
        listen: 127.0.0.1:0
        data_dir: DATA_DIR
        receivers:
          phone:
            kind: syncky
            path: /hook
            auth: {type: bearer, token: \(Vectors.token)}
            hmac: {secret: \(Vectors.secret)}
            max_body: 200KB
        routes:
          - {name: all, from: ["*"], to: [archive]}
        sinks:
          archive: {kind: file, path: "archive/{device}/{date}.ndjson", batch: {max_wait: 10ms}}
        """

    static func signedHeaders(
        _ body: String, t: Int64 = Int64(Date().timeIntervalSince1970),
        delivery: String = UUID().uuidString.lowercased()
    ) -> [(String, String)] {
        let mac = Crypto.hmacSHA256(key: Array(Vectors.secret.utf8), Array("\(t).".utf8), Array(body.utf8))
        return [
            ("Content-Type", "application/json"), ("X-Syncky-Format", "native"), ("X-Syncky-Delivery", delivery),
            ("X-Syncky-Timestamp", "\(t)"), ("X-Syncky-Signature", "v1=" + Crypto.lowercaseHex(mac)),
            ("Authorization", "Bearer \(Vectors.token)")
        ]
    }

    static func replacing(_ headers: [(String, String)], _ name: String, _ value: String?) -> [(String, String)] {
        var h = headers.filter { $0.0 != name }
        if let value { h.append((name, value)) }
        return h
    }

    @Test func theGuidesCheckConnectionVectorPassesAndEveryMutationFails() throws {
        let serve = try ServeProcess(config: Self.config, environment: ["HEALTHGATE_NOW": Vectors.checkTimestamp])
        let c = serve.client()
        let hex = String(Vectors.checkSignature.dropFirst(3))
        var body = Array(Vectors.checkBody.utf8)
        body[40] ^= 0x01
        let mutations: [(String, [(String, String)], [UInt8])] = [
            ("one changed byte", Vectors.checkHeaders, body),
            (
                "uppercase hex", Self.replacing(Vectors.checkHeaders, "X-Syncky-Signature", "v1=" + hex.uppercased()),
                Array(Vectors.checkBody.utf8)
            ),
            ("v0= prefix", Self.replacing(Vectors.checkHeaders, "X-Syncky-Signature", "v0=" + hex), Array(Vectors.checkBody.utf8)),
            ("missing v1=", Self.replacing(Vectors.checkHeaders, "X-Syncky-Signature", hex), Array(Vectors.checkBody.utf8)),
            ("no signature", Self.replacing(Vectors.checkHeaders, "X-Syncky-Signature", nil), Array(Vectors.checkBody.utf8)),
            ("other timestamp", Self.replacing(Vectors.checkHeaders, "X-Syncky-Timestamp", "1791961501"), Array(Vectors.checkBody.utf8)),
            ("wrong token", Self.replacing(Vectors.checkHeaders, "Authorization", "Bearer vec_token_wrong"), Array(Vectors.checkBody.utf8)),
            ("no token", Self.replacing(Vectors.checkHeaders, "Authorization", nil), Array(Vectors.checkBody.utf8))
        ]
        for (what, headers, b) in mutations {
            let r = try c.request("POST", "/hook", headers: headers, body: b)
            #expect(r.status == 401, "\(what): \(r.status) \(r.text)")
            #expect(r.header("Content-Type") == "application/problem+json", "\(what)")
        }
        let ok = try c.request("POST", "/hook", headers: Vectors.checkHeaders, body: Array(Vectors.checkBody.utf8))
        #expect(ok.status == 200, "\(ok.text)")
        #expect(ok.body.isEmpty)
        // The same signature again is a replay.
        let replay = try c.request("POST", "/hook", headers: Vectors.checkHeaders, body: Array(Vectors.checkBody.utf8))
        #expect(replay.status == 401)
        #expect(replay.text.contains("replay"))
        #expect(try c.request("GET", "/metrics").text.contains(#"healthgate_check_requests_total{receiver="phone"} 1"#))
        // The replay check survives a restart within the window.
        serve.stop()
        let restarted = try ServeProcess(
            config: Self.config, dataDir: serve.dataDir,
            environment: ["HEALTHGATE_NOW": Vectors.checkTimestamp])
        let again = try restarted.client().request("POST", "/hook", headers: Vectors.checkHeaders, body: Array(Vectors.checkBody.utf8))
        #expect(again.status == 401)
        #expect(again.text.contains("replay"))
        // Nothing was stored: the journal is empty and the archive does not exist.
        let metrics = try restarted.client().request("GET", "/metrics")
        #expect(metrics.text.contains("healthgate_journal_last_seq 0"))
        #expect(metrics.text.contains(#"healthgate_requests_refused_total{receiver="phone",reason="auth"} 1"#))
        #expect(!FileManager.default.fileExists(atPath: serve.dataDir + "/archive"))
        #expect(restarted.stderrText.contains("HEALTHGATE_NOW is set"))
        restarted.stop()
        // The results request of section 10 verifies too (with its own clock).
        let serve2 = try ServeProcess(
            config: Self.config, dataDir: serve.dataDir,
            environment: ["HEALTHGATE_NOW": Vectors.resultsTimestamp])
        var rh = Self.replacing(Vectors.checkHeaders, "X-Syncky-Format", nil)
        rh = Self.replacing(rh, "X-Syncky-Timestamp", Vectors.resultsTimestamp)
        rh = Self.replacing(rh, "X-Syncky-Signature", Vectors.resultsSignature)
        rh.append(("X-Syncky-Kind", "results"))
        let results = try serve2.client().request("POST", "/hook", headers: rh, body: Array(Vectors.resultsBody.utf8))
        #expect(results.status == 200, "\(results.text)")
    }

    /// The Check connection request of each format (guide section 4) over HTTP: 2xx, nothing stored.
    @Test func theCheckConnectionRequestOfEveryFormatStoresNothing() throws {
        let serve = try ServeProcess(config: Self.config)
        let bodies: [(String, String, String)] = [
            ("native", "application/json", Vectors.checkBody),
            ("hae", "application/json", #"{"data":{"metrics":[],"workouts":[]}}"#),
            ("csv", "text/csv; charset=utf-8", "type,uuid,start,end,value,unit,value_name,source,device,user_entered\r\n"),
            ("influx", "text/plain; charset=utf-8", "")
        ]
        for (format, contentType, body) in bodies {
            var h = Self.signedHeaders(body)
            h = Self.replacing(h, "X-Syncky-Format", format)
            h = Self.replacing(h, "Content-Type", contentType)
            let r = try serve.client().request("POST", "/hook", headers: h, body: Array(body.utf8))
            #expect(r.status / 100 == 2, "\(format): \(r.status) \(r.text)")
        }
        let metrics = try serve.client().request("GET", "/metrics").text
        #expect(metrics.contains("healthgate_journal_last_seq 0"))
        #expect(metrics.contains(#"healthgate_records_quarantined_total{receiver="phone"} 0"#))
        // Issue 47: build info, the process's own figures and each receiver's latency.
        #expect(metrics.contains("healthgate_build_info{version=\"\(Healthgate.version)\",commit=\""))
        #expect(metrics.range(of: #",built=\"2\d{3}-\d{2}-\d{2}\"\} 1\n"#, options: .regularExpression) != nil)
        func value(_ name: String) -> Double? {
            metrics.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ").last ?? "") }
        }
        #expect((value("process_resident_memory_bytes") ?? 0) > 1_000_000)
        #expect((value("process_open_fds") ?? 0) > 3)
        #expect((value("process_cpu_seconds_total") ?? 0) > 0)
        #expect(metrics.contains(#"healthgate_request_duration_seconds_count{receiver="phone"} 4"#), "\(metrics)")
        #expect(metrics.contains(#"healthgate_request_duration_seconds_bucket{receiver="phone",le="+Inf"} 4"#))
        #expect(metrics.contains("# TYPE healthgate_request_duration_seconds histogram"))
    }

    @Test func acceptedSamplesArriveInTheArchive() throws {
        let serve = try ServeProcess(config: Self.config)
        let body = Vectors.syncBody(
            samples: [
                Vectors.stepsSample, Vectors.sleepSample, Vectors.workoutSample,
                Vectors.characteristicSample, Vectors.heartbeatSample
            ],
            deleted: [Vectors.deletion])
        let r = try serve.client().request("POST", "/hook", headers: Self.signedHeaders(body), body: Array(body.utf8))
        #expect(r.status == 200, "\(r.text)")
        var records: [[String: Any]] = []
        #expect(
            ServeProcess.eventually {
                records = serve.ndjson(under: "archive")
                return records.count == 6
            }, "archive has \(records.count) records")
        let steps = try #require(records.first { $0["type"] as? String == "steps" && $0["op"] as? String == "upsert" })
        #expect(steps["value"] as? Int == 412)
        #expect(steps["unit"] as? String == "count")
        #expect(steps["start"] as? String == "2026-10-14T07:01:00Z")
        #expect(steps["device"] as? String == "d_zsOZnTQUz_juWFVljuOOBQ")
        #expect(steps["receiver"] as? String == "phone")
        #expect((steps["source"] as? [String: Any])?["device"] as? String == "Apple Watch")
        #expect(records.contains { $0["op"] as? String == "delete" && $0["uuid"] as? String == "5E1D0000-0000-4000-8000-000000000099" })
        // Files are named by device and the sample's date.
        #expect(FileManager.default.fileExists(atPath: serve.dataDir + "/archive/d_zsOZnTQUz_juWFVljuOOBQ/2026-10-14.ndjson"))
        #expect(FileManager.default.fileExists(atPath: serve.dataDir + "/archive/d_zsOZnTQUz_juWFVljuOOBQ/2026-10-13.ndjson"))
    }

    @Test func refusalsAreProblemsAndUnreadableBodiesAreKept() throws {
        let serve = try ServeProcess(config: Self.config)
        let c = serve.client()
        // Over the receiver's 200 KB limit, refused from the Content-Length alone.
        let big = String(repeating: "x", count: 300_000)
        let tooBig = try c.request("POST", "/hook", headers: Self.signedHeaders(big), body: Array(big.utf8))
        #expect(tooBig.status == 413)
        #expect(tooBig.header("Content-Type") == "application/problem+json")
        let c2 = serve.client()
        let broken = #"{"v":1,"type":"sync","samples":[{"#
        let bad = try c2.request("POST", "/hook", headers: Self.signedHeaders(broken), body: Array(broken.utf8))
        #expect(bad.status == 400)
        let detail = bad.json?["detail"] as? String ?? ""
        #expect(detail.contains("not valid JSON"), "\(detail)")
        let kept = serve.ndjson(under: "quarantine")
        #expect(kept.count == 1)
        #expect(kept.first?["reason"] as? String != nil)
        if let file = kept.first?["body_file"] as? String {
            #expect((try? String(contentsOfFile: file, encoding: .utf8)) == broken)
        } else {
            Issue.record("the unreadable body was not kept")
        }
        // A bad record beside a good one: 200, the good one archived, the bad one in quarantine.
        let mixed = Vectors.syncBody(samples: [Vectors.stepsSample, #"{"uuid":"bad","type":"steps","value":1}"#])
        let m = try c2.request("POST", "/hook", headers: Self.signedHeaders(mixed), body: Array(mixed.utf8))
        #expect(m.status == 200)
        #expect(ServeProcess.eventually { serve.ndjson(under: "archive").count == 1 })
        #expect(serve.ndjson(under: "quarantine").contains { ($0["record"] as? [String: Any])?["uuid"] as? String == "bad" })
        // Paths and methods.
        #expect(try c2.request("GET", "/hook").status == 405)
        #expect(try c2.request("POST", "/nope", body: Array("{}".utf8)).status == 404)
        #expect(try c2.request("GET", "/healthz").status == 200)
        let metrics = try c2.request("GET", "/metrics").text
        #expect(metrics.contains(#"healthgate_records_quarantined_total{receiver="phone"} 1"#))
        #expect(metrics.contains(#"healthgate_requests_refused_total{receiver="phone",reason="unreadable"} 1"#))
        #expect(metrics.contains(#"healthgate_requests_refused_total{receiver="phone",reason="too_large"} 1"#))
        // No token, secret or value in the logs.
        #expect(!serve.stderrText.contains(Vectors.token))
        #expect(!serve.stderrText.contains(Vectors.secret))
    }

    @Test func aChunkedBodyOverTheLimitIsRefusedToo() throws {
        let serve = try ServeProcess(config: Self.config)
        let chunk = String(repeating: "y", count: 50_000)
        let head = "POST /hook HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nAuthorization: Bearer \(Vectors.token)\r\n\r\n"
        func chunks(_ n: Int) -> String {
            String(repeating: String(chunk.utf8.count, radix: 16) + "\r\n" + chunk + "\r\n", count: n)
        }
        // Over the 200 KB limit and finished: 413.
        let c = serve.client()
        try c.sendRaw(Array((head + chunks(6) + "0\r\n\r\n").utf8))
        #expect(try c.readResponse().status == 413)
        // A client that goes on sending far past the limit gets its 413 and is cut off, not
        // read forever.
        let endless = serve.client()
        try endless.sendRaw(Array(head.utf8))
        var sendFailed = false
        for _ in 0..<100 where !sendFailed {
            do { try endless.sendRaw(Array(chunks(1).utf8)) } catch { sendFailed = true }
        }
        // The kernel may have taken all 5 MB into socket buffers; either way the server must
        // have answered 413 and closed the connection without reading it all.
        let started = Date()
        #expect(try endless.readResponse().status == 413)
        #expect(Date().timeIntervalSince(started) < 10, "the server kept the connection open")
        #expect(
            ServeProcess.eventually {
                (try? serve.client().request("GET", "/metrics").text
                    .contains(#"healthgate_requests_refused_total{receiver="phone",reason="too_large"} 2"#)) == true
            })
    }

    /// A wrong token is refused from the headers: the body is never read (or buffered).
    @Test func aWrongTokenIsRefusedBeforeTheBody() throws {
        let serve = try ServeProcess(config: Self.config)
        let c = serve.client()
        try c.sendRaw(Array("POST /hook HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope\r\nContent-Length: 150000\r\n\r\n".utf8))
        let started = Date()
        let r = try c.readResponse()
        #expect(r.status == 401)
        #expect(Date().timeIntervalSince(started) < 5)
        #expect(
            try serve.client().request("GET", "/metrics").text
                .contains(#"healthgate_requests_refused_total{receiver="phone",reason="auth"} 1"#))
    }

    @Test func shutsDownCleanlyOnSIGTERM() throws {
        let serve = try ServeProcess(config: Self.config)
        serve.stop(signal: SIGTERM)
        #expect(serve.process.terminationStatus == 0)
        #expect(serve.stderrText.contains("stopped"))
    }
}
