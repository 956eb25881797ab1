import Foundation
@testable import Gateway
import HealthgateCore
@testable import HealthgateTesting
import Testing

/// `serve`'s log as a person reads it: logfmt lines by default, JSON objects with
/// `log: {format: json}`, one line per refusal and per sink state change (not per success), the
/// request's delivery id where it names one — and, in a whole run of good, bad and refused
/// requests with a sink that fails, not one of the tokens, secrets, passwords or health values
/// it was sent.
@Suite(.serialized) struct LogTests {
    static let influxToken = "influx-token-secret-77f1c2"
    static let readToken = "read-token-secret-9a8b7c6d5e"
    static let adminToken = "admin-token-secret-1f2e3d4c5b"
    static let sinkPassword = "sink-pa55word-3e4f5a"
    static let values = ["4817.25", "137.913", "61.4287", "98.7654"]

    static func config(format: String) -> String {
        """
        listen: 127.0.0.1:0
        data_dir: DATA_DIR
        log: {format: \(format), level: info}
        admin: {token: \(adminToken)}
        receivers:
        \(Vectors.phoneReceiver)
          influx: {kind: influx, auth: {type: bearer, token: \(influxToken)}, device: lab}
        routes:
          - {from: ["*"], to: [archive, hook]}
        sinks:
          archive: {kind: file, path: "archive/{device}.ndjson"}
          hook: {kind: http, url: "http://alice:\(sinkPassword)@127.0.0.1:9/ingest?apikey=\(sinkPassword)", retry: {initial: 100ms, max: 300ms}}
        """
    }

    func exercise(_ serve: ServeProcess) throws {
        let c = serve.client()
        let good = Vectors.syncBody(
            samples: [PostgresSinkTests.q("s1", "heart_rate", Double(Self.values[0])!, "count/min", at: PostgresSinkTests.base)],
            delivery: "delivery-good-1")
        #expect(
            try c.request(
                "POST", "/hook", headers: LiveServeTests.signedHeaders(good, delivery: "delivery-good-1"),
                body: Array(good.utf8)
            ).status == 200)
        // A bad record beside a good one (quarantined), with values of its own.
        let bad = Vectors.syncBody(
            samples: [
                PostgresSinkTests.q("s2", "steps", Double(Self.values[1])!, "count", at: PostgresSinkTests.base),
                #"{"uuid":"s3","type":"steps","value":\#(Self.values[2]),"unit":"count","start":"not a time"}"#
            ],
            delivery: "delivery-bad-2")
        _ = try c.request("POST", "/hook", headers: LiveServeTests.signedHeaders(bad, delivery: "delivery-bad-2"), body: Array(bad.utf8))
        // An unreadable body, a wrong signature, wrong tokens.
        _ = try c.request(
            "POST", "/hook", headers: LiveServeTests.signedHeaders("{", delivery: "delivery-unreadable-3"), body: Array("{".utf8))
        var forged = LiveServeTests.signedHeaders(good, delivery: "delivery-forged-4")
        forged = LiveServeTests.replacing(forged, "X-Syncky-Signature", "v1=" + String(repeating: "0", count: 64))
        _ = try c.request("POST", "/hook", headers: forged, body: Array(good.utf8))
        _ = try c.request(
            "POST", "/write?db=health", headers: [("Authorization", "Token wrong-\(Self.influxToken)")],
            body: Array("heart_rate value=\(Self.values[3])".utf8))
        #expect(
            try c.request(
                "POST", "/write?db=health", headers: [("Authorization", "Token \(Self.influxToken)")],
                body: Array("heart_rate value=\(Self.values[3]) 1796112000000000000".utf8)
            ).status == 204)
        _ = try c.request("GET", "/", headers: [("Authorization", "Bearer \(Self.adminToken)")])
        // The http sink cannot reach its endpoint: it says so (once, not per retry).
        #expect(ServeProcess.eventually(10) { serve.stderrText.contains("hook") && serve.stderrText.contains("127.0.0.1:9") })
        Thread.sleep(forTimeInterval: 1.5)
    }

    func secrets() -> [String] {
        [Vectors.token, Vectors.secret, Self.influxToken, Self.readToken, Self.adminToken, Self.sinkPassword] + Self.values
    }

    @Test func aWholeRunInLogfmtHoldsNoSecretAndNoValue() throws {
        let serve = try ServeProcess(config: Self.config(format: "logfmt"))
        try exercise(serve)
        serve.stop()
        let log = serve.stderrText
        for s in secrets() { #expect(!log.contains(s), "the log holds \(s):\n\(log)") }
        let lines = log.split(separator: "\n")
        #expect(lines.count >= 5)
        for l in lines {
            #expect(l.hasPrefix("time=") && l.contains(" level=") && l.contains(" component=") && l.contains(" msg=\""), "\(l)")
        }
        // One line per refusal, with the delivery id where the request names one.
        #expect(
            lines.contains { $0.contains("level=warning") && $0.contains("unreadable") && $0.contains("delivery delivery-unreadable-3") },
            "\(log)")
        #expect(lines.contains { $0.contains("quarantine") && $0.contains("delivery delivery-bad-2") }, "\(log)")
        // Not a line per success: a good request says nothing but that it is the phone's first.
        #expect(lines.filter { $0.contains("delivery-good-1") }.allSatisfy { $0.contains("phone: first request from device") }, "\(log)")
        // The sink's trouble is said, but not once per retry.
        let hookLines = lines.filter {
            $0.contains("component=queue") && $0.contains("hook") && $0.contains("level=") && !$0.contains("level=info")
        }
        #expect(!hookLines.isEmpty && hookLines.count <= 4, "\(hookLines.joined(separator: "\n"))")
    }

    @Test func withFormatJSONEveryLineIsAnObject() throws {
        let serve = try ServeProcess(config: Self.config(format: "json"))
        try exercise(serve)
        serve.stop()
        let log = serve.stderrText
        for s in secrets() { #expect(!log.contains(s), "the log holds \(s)") }
        var levels = Set<String>()
        for l in log.split(separator: "\n") {
            let o = try? JSONSerialization.jsonObject(with: Data(l.utf8)) as? [String: String]
            #expect(o != nil && o?["time"] != nil && o?["component"] != nil && o?["msg"] != nil, "\(l)")
            if let lv = o?["level"] { levels.insert(lv) }
        }
        #expect(levels.isSuperset(of: ["info", "warning"]), "\(levels)")
    }
}
