import Foundation
@testable import Gateway
import HealthgateCore
@testable import HealthgateTesting
@testable import Pipeline
import SinkKit
import Testing

/// Memory stays bounded whatever a client sends: the largest bodies the default limits let in,
/// a gzip bomb, and more bodies in flight than the gateway may hold.
@Suite(.serialized) struct MemoryBoundTests {
    static let config = """
        listen: 127.0.0.1:0
        data_dir: DATA_DIR
        receivers:
          hae: {kind: hae, auth: {type: bearer, token: t}, device: p}
          lp: {kind: influx, auth: {type: bearer, token: t}, device: p}
          hs: {kind: healthsync, auth: {type: bearer, token: t}}
          ingest: {kind: ingest, auth: {type: bearer, token: t}, max_items: 1000000}
        routes:
          - {from: ["*"], to: [a, b, c]}
        sinks:
          a: {kind: file, path: "a/{receiver}.ndjson"}
          b: {kind: file, path: "b/{receiver}.ndjson"}
          c: {kind: file, path: "c/{receiver}.ndjson"}
        """

    /// The process's peak resident memory so far, in bytes.
    static func peakRSS(_ pid: Int32) -> Int {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
            let kb = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        else { return 0 }
        return kb * 1024
    }

    /// A body of about `size` bytes: `head`, items made by `item` joined with commas, `tail`.
    static func body(_ size: Int, _ head: String, _ tail: String, _ item: (Int) -> String) -> [UInt8] {
        var out = Array(head.utf8)
        out.reserveCapacity(size + 200)
        var i = 0
        while out.count < size - tail.utf8.count - 200 {
            if i > 0 { out.append(0x2C) }
            out += Array(item(i).utf8)
            i += 1
        }
        return out + Array(tail.utf8)
    }

    /// Waits until every sink has delivered everything the journal holds.
    func drained(_ serve: ServeProcess) -> Bool {
        ServeProcess.eventually(60) {
            let m = (try? serve.client().request("GET", "/metrics").text) ?? ""
            let waiting = m.split(separator: "\n").filter { $0.hasPrefix("healthgate_sink_records_waiting{") }
            return waiting.count == 3 && waiting.allSatisfy { $0.hasSuffix(" 0") }
        }
    }

    /// Each of the largest bodies the defaults take, into three sinks: peak RSS under 300 MB,
    /// for each request and its drain (each is delivered before the next is sent). Not under a
    /// sanitizer (`make test-asan`/`test-tsan` set HEALTHGATE_SANITIZER): its shadow memory is not
    /// the gateway's, and 16 MB bodies do not get through its slowdown within the client's 30 s.
    @Test(
        .enabled(
            if: ProcessInfo.processInfo.environment["HEALTHGATE_SANITIZER"] == nil,
            "a memory bound is measured without a sanitizer"))
    func theLargestBodiesWithinTheDefaultsStayUnder300MB() throws {
        let serve = try ServeProcess(config: Self.config)
        // A connection of its own for each body: the one before may sit idle (drain, building the
        // next body) past http.header_timeout, which closes idle keep-alive connections.
        var c: RawHTTPClient { serve.client() }
        let auth = [("Authorization", "Bearer t")]
        let limit = ReceiverConfig.defaultMaxJSONBody
        let hae = Self.body(limit, #"{"data":{"metrics":[{"name":"heart_rate","units":"count/min","data":["#, "]}]}}") {
            #"{"date":"2026-10-14 09:\#(String(format: "%02d:%02d", ($0 / 60) % 60, $0 % 60)) +0200","qty":\#(60 + $0 % 40),"source":"Watch \#($0)"}"#
        }
        let r1 = try c.request("POST", "/api/data", headers: auth, body: hae)
        #expect(r1.status == 200, "\(r1.text)")
        #expect(drained(serve))
        usleep(1_200_000)
        let hs = Self.body(limit, #"{"metrics":["#, "]}") {
            #"{"id":"healthkit:\#($0)","type":"heartRate","value":\#(60 + $0 % 40),"unit":"count/min","start_date":"2026-10-14T09:01:00+02:00"}"#
        }
        let r2 = try c.request("POST", "/api/apple-health/sync", headers: auth + [("X-Device-Id", "p")], body: hs)
        #expect(r2.status == 200, "\(r2.text.prefix(300))")
        let metrics = r2.json.flatMap { ($0["accepted"] as? [String: Any])?["metrics"] as? Int } ?? 0
        #expect(metrics > 100_000)
        #expect(drained(serve))
        usleep(1_200_000)
        let ingest = Self.body(limit, #"{"device_id":"p","samples":["#, "]}") {
            #"{"source_uuid":"u\#($0)","data_type":"heartRate","ts":"2026-10-14T07:01:00Z","value":\#(60 + $0 % 40),"unit":"count/min"}"#
        }
        let r3 = try c.request("POST", "/v1/ingest", headers: auth, body: ingest)
        #expect(r3.status == 202, "\(r3.text.prefix(300))")
        #expect(drained(serve))
        usleep(1_200_000)
        var lp: [UInt8] = []
        lp.reserveCapacity(25_000_000)
        var i = 0
        while lp.count < 24_900_000 { // InfluxDB's own default max-body-size is 25 MB, and so is ours
            lp += Array("heart_rate,unit=count/min,source=Watch value=\(60 + i % 40) \(1_791_961_260 + i)000000000\n".utf8)
            i += 1
        }
        let r4 = try c.request("POST", "/api/v2/write", headers: auth, body: lp)
        #expect(r4.status == 204, "\(r4.text)")
        #expect(drained(serve))
        let peak = Self.peakRSS(serve.process.processIdentifier)
        #expect(peak > 0 && peak < 300_000_000, "peak RSS \(peak / 1_000_000) MB")
        // …and what it took is given back once it is done.
        usleep(1_500_000)
        let now =
            (try? String(contentsOfFile: "/proc/\(serve.process.processIdentifier)/statm", encoding: .utf8))
            .flatMap { Int($0.split(separator: " ")[1]) }.map { $0 * 4096 } ?? 0
        #expect(now < 150_000_000, "RSS after the drain \(now / 1_000_000) MB")
    }

    /// A gzip body is inflated as a stream against max_body: 413 the moment it passes, with
    /// the memory of one max_body, not of the bomb (it once took 1 GB for a 2 MB body).
    @Test func aGzipBombIsRefused413WithoutInflatingIt() throws {
        let serve = try ServeProcess(
            config: Self.config.replacingOccurrences(
                of: "lp: {kind: influx, auth: {type: bearer, token: t}, device: p}",
                with: "lp: {kind: influx, auth: {type: bearer, token: t}, device: p, max_body: 10MB}"))
        let dir = ServeProcess.makeTempDir("bomb")
        let line = "heart_rate,unit=count/min value=61 1791961260000000000\n"
        let block = String(repeating: line, count: 20_000)
        #expect(FileManager.default.createFile(atPath: dir + "/b", contents: nil))
        let f = try #require(FileHandle(forWritingAtPath: dir + "/b"))
        for _ in 0..<1000 { f.write(Data(block.utf8)) } // 1.1 GB of line protocol
        try f.close()
        #expect(try HTTPServerTests.shell("gzip -9 \(dir)/b").0 == 0)
        let gz = try [UInt8](Data(contentsOf: URL(fileURLWithPath: dir + "/b.gz")))
        try? FileManager.default.removeItem(atPath: dir + "/b")
        #expect(gz.count < 8_000_000)
        let r = try serve.client().request(
            "POST", "/api/v2/write", headers: [("Authorization", "Bearer t"), ("Content-Encoding", "gzip")], body: gz)
        #expect(r.status == 413 && r.text.contains("max_body of 10000000 bytes"), "\(r.status) \(r.text)")
        #expect(Self.peakRSS(serve.process.processIdentifier) < 100_000_000)
        #expect(serve.ndjson(under: "a").isEmpty)
    }

    /// Bodies in flight across all connections are bounded (http.max_buffered): past it, 503
    /// with Retry-After, and the gateway takes them again once the others are done.
    @Test func bodiesInFlightPastTheBudgetGet503() throws {
        let serve = try ServeProcess(
            config: Self.config.replacingOccurrences(
                of: "data_dir: DATA_DIR",
                with: "data_dir: DATA_DIR\nhttp: {max_buffered: 1MB}"))
        let body = Array(#"{"data":{"metrics":[]}}"#.utf8) + [UInt8](repeating: 0x20, count: 700_000)
        // A slow client holds 700 KB of the budget: all of its body but the last bytes is in.
        // (The budget counts bytes as they arrive: a client that only declares a length holds nothing.)
        let slow = serve.client()
        try slow.connect()
        try slow.sendRaw(
            Array("POST /api/data HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\nContent-Length: \(body.count)\r\n\r\n".utf8)
                + body.dropLast(1000))
        usleep(200_000)
        let refused = try serve.client().request("POST", "/api/data", headers: [("Authorization", "Bearer t")], body: body)
        #expect(refused.status == 503 && refused.header("retry-after") == "5", "\(refused.status) \(refused.text)")
        // A chunked body that would pass the budget as it grows is refused the same way.
        let chunked = serve.client()
        try chunked.connect()
        try chunked.sendRaw(
            Array("POST /api/data HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\nTransfer-Encoding: chunked\r\n\r\n".utf8))
        for _ in 0..<5 { try chunked.sendRaw(Array("20000\r\n".utf8) + [UInt8](repeating: 0x20, count: 0x20000) + Array("\r\n".utf8)) }
        try chunked.sendRaw(Array("0\r\n\r\n".utf8))
        #expect(try chunked.readResponse().status == 503)
        try slow.sendRaw(Array(body.suffix(1000)))
        #expect(try slow.readResponse().status == 200)
        // The budget is free again.
        #expect(try serve.client().request("POST", "/api/data", headers: [("Authorization", "Bearer t")], body: body).status == 200)
        #expect(
            try serve.client().request("GET", "/metrics").text.contains(
                #"healthgate_requests_refused_total{receiver="hae",reason="unavailable"} 2"#))
    }
}
