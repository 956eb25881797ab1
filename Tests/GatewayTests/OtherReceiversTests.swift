import Foundation
@testable import Gateway
import HealthgateCore
import Testing

/// Health Auto Export's REST API and InfluxDB's write endpoints, through serve.
@Suite(.serialized) struct OtherReceiversTests {
    static let config = """
    listen: 127.0.0.1:0
    data_dir: DATA_DIR
    receivers:
      hae:
        kind: hae
        auth: {type: header, header: api-key, token: sk-hae-123}
        device: my-iphone
      influx:
        kind: influx
        auth: {type: bearer, token: influx-token}
        device: my-iphone
      influx-v1:
        kind: influx
        path: /v1/write
        auth: {type: basic, user: grafana, token: secret-pw}
    routes:
      - {name: all, from: ["*"], to: [archive]}
    sinks:
      archive: {kind: file, path: "archive/{receiver}.ndjson", batch: {max_wait: 10ms}}
    """

    static func records(_ serve: ServeProcess, _ receiver: String) -> [[String: Any]] {
        ServeProcess.ndjson(under: serve.dataDir + "/archive").filter { $0["receiver"] as? String == receiver }
    }

    @Test func healthAutoExportPostsItsBody() throws {
        let serve = try ServeProcess(config: Self.config)
        let c = serve.client()
        let body = HAEFormatTests.body
        #expect(try c.request("POST", "/api/data", headers: [("Content-Type", "application/json")], body: Array(body.utf8)).status == 401)
        let r = try c.request("POST", "/api/data", headers: [("api-key", "sk-hae-123"), ("Content-Type", "application/json"),
                                                             ("automation-name", "healthgate"), ("session-id", "s1")],
                              body: Array(body.utf8))
        #expect(r.status == 200, "\(r.text)")
        // Some exports wrap the object in an array.
        let wrapped = "[\(#"{"data":{"metrics":[{"name":"step_count","units":"count","data":[{"date":"2026-10-15 09:00:00 +0200","qty":7}]}]}}"#)]"
        #expect(try c.request("POST", "/api/data", headers: [("api-key", "sk-hae-123")], body: Array(wrapped.utf8)).status == 200)
        var got: [[String: Any]] = []
        #expect(ServeProcess.eventually { got = Self.records(serve, "hae"); return got.count == 10 }, "\(got.count)")
        #expect(got.allSatisfy { $0["device"] as? String == "my-iphone" })
        #expect(got.contains { $0["type"] as? String == "oxygen_saturation" && $0["value"] as? Double == 0.95 })
        #expect(got.contains { $0["type"] as? String == "steps" && $0["value"] as? Int == 7 })
        #expect(try c.request("GET", "/metrics").text.contains(#"healthgate_records_unknown_type_total{receiver="hae"} 1"#))
    }

    @Test func influxDBWritesWithTokenBearerGzipAndV1() throws {
        let serve = try ServeProcess(config: Self.config)
        let c = serve.client()
        let lines = SynckyFormatsTests.influx
        let v2 = "/api/v2/write?org=home&bucket=health&precision=ns"
        #expect(try c.request("POST", v2, headers: [("Authorization", "Token wrong")], body: Array(lines.utf8)).status == 401)
        let token = try c.request("POST", v2, headers: [("Authorization", "Token influx-token")], body: Array(lines.utf8))
        #expect(token.status == 204, "\(token.text)")
        // What InfluxDB itself refuses, the Syncky template's Bearer, is taken.
        let bearer = "steps,unit=count,source=Shortcuts value=100 1791961320\n"
        #expect(try c.request("POST", "/api/v2/write?precision=s", headers: [("Authorization", "Bearer influx-token")],
                              body: Array(bearer.utf8)).status == 204)
        // gzip bodies, on the v1 path of the same receiver.
        let dir = ServeProcess.makeTempDir("gz")
        try "steps,unit=count value=200 1791961380000000000\n".write(toFile: dir + "/b", atomically: true, encoding: .utf8)
        #expect(try HTTPServerTests.shell("gzip -k \(dir)/b").0 == 0)
        let gz = try [UInt8](Data(contentsOf: URL(fileURLWithPath: dir + "/b.gz")))
        #expect(try c.request("POST", "/write?db=health", headers: [("Authorization", "Bearer influx-token"),
                                                                   ("Content-Encoding", "gzip")], body: gz).status == 204)
        // v1 credentials as u/p query parameters, or Basic.
        let v1 = "heart_rate,unit=count/min value=61 1791961440000000000\n"
        #expect(try c.request("POST", "/v1/write?db=health&u=grafana&p=secret-pw", body: Array(v1.utf8)).status == 204)
        #expect(try c.request("POST", "/v1/write?db=health&u=grafana&p=nope", body: Array(v1.utf8)).status == 401)
        // A bad line is set aside; the good ones of the same body are taken.
        let mixed = "steps,unit=count value=1 1791961500000000000\nthis is not a point\n"
        #expect(try c.request("POST", v2, headers: [("Authorization", "Token influx-token")], body: Array(mixed.utf8)).status == 204)
        var got: [[String: Any]] = []
        #expect(ServeProcess.eventually { got = Self.records(serve, "influx"); return got.count == 6 }, "\(got.count)")
        #expect(got.contains { $0["type"] as? String == "steps" && $0["value"] as? Int == 200 })
        #expect(got.contains { $0["type"] as? String == "steps" && $0["start"] as? String == "2026-10-14T07:02:00Z" })
        #expect(got.contains { $0["type"] as? String == "sleep_analysis" && $0["code"] as? Int == 3 })
        #expect(ServeProcess.eventually { Self.records(serve, "influx-v1").count == 1 })
        #expect(serve.ndjson(under: "quarantine").contains { ($0["reason"] as? String)?.contains("line 2") == true })
    }

    @Test func gzipBombsAndGarbageAreRefused() {
        let zeros = [UInt8](repeating: 0, count: 10_000)
        #expect(throws: Never.self) {
            if case .success = InfluxReceiver.gunzip(zeros, limit: 100) { Issue.record("zeros are not gzip") }
        }
        guard case .failure(let why) = InfluxReceiver.gunzip([0x1F, 0x8B, 0x08, 0x00], limit: 100) else {
            Issue.record("a truncated gzip body must be refused")
            return
        }
        #expect(why.description.contains("gzip"))
    }
}
