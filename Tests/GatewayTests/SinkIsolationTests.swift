import Foundation
import Gateway
import HealthgateCore
import Testing

/// One sink down holds back nothing but itself, and catches up when its endpoint returns.
@Suite(.serialized) struct SinkIsolationTests {
    @Test func aSinkThatIsDownDoesNotHoldBackAnother() throws {
        let port = ScriptedEndpoint.freePort()
        let config = LiveServeTests.config.replacingOccurrences(of: """
            routes:
              - {name: all, from: ["*"], to: [archive]}
            """, with: """
            routes:
              - {name: all, from: ["*"], to: [archive, hook]}
            """).replacingOccurrences(of: """
              archive: {kind: file, path: "archive/{device}/{date}.ndjson", batch: {max_wait: 10ms}}
            """, with: """
              archive: {kind: file, path: "archive/{device}/{date}.ndjson", batch: {max_wait: 10ms}}
              hook: {kind: http, url: "http://127.0.0.1:\(port)/hook", retry: {initial: 50ms, max: 200ms}, batch: {max_wait: 10ms}}
            """)
        #expect(config.contains("hook: {kind: http"))
        let serve = try ServeProcess(config: config)
        let c = serve.client()
        var sent: [String] = []
        for i in 0..<5 {
            let uuids = (0..<20).map { "iso-\(i)-\($0)" }
            sent += uuids
            let body = Vectors.syncBody(samples: uuids.map(CrashTests.sample))
            #expect(try c.request("POST", "/hook", headers: LiveServeTests.signedHeaders(body), body: Array(body.utf8)).status == 200)
        }
        // The archive has everything while the webhook's endpoint is down.
        #expect(ServeProcess.eventually { Set(serve.ndjson(under: "archive").compactMap { $0["uuid"] as? String }) == Set(sent) })
        let metrics = try c.request("GET", "/metrics").text
        #expect(metrics.contains(#"healthgate_sink_records_sent_total{sink="hook"} 0"#))
        #expect(!metrics.contains(#"healthgate_sink_records_kept_total{sink="hook"} 0"#))
        #expect(serve.stderrText.contains("sink hook"))
        #expect(metrics.contains(#"healthgate_sink_records_waiting{sink="hook"} 100"#))
        #expect(metrics.contains(#"healthgate_sink_records_waiting{sink="archive"} 0"#))
        #expect(metrics.contains(#"healthgate_sink_retrying{sink="hook"} 1"#))
        // `healthgate status` says the same, from the data dir, while serve runs.
        var status = ""
        #expect(ServeProcess.eventually(5) {
            status = (try? CLITests.run(["status", "--config", serve.configPath]).out) ?? ""
            return status.contains("hook: RETRYING; 100 record(s) waiting")
        }, "\(status)")
        #expect(status.contains("serve is running"))
        #expect(status.contains("archive: up to date; 0 record(s) waiting"))
        #expect(status.contains("last error: http://127.0.0.1:\(port)/hook"))
        #expect(status.contains("next try: "))
        // A second serve on the same data dir is refused.
        let second = try CLITests.run(["serve", "--config", serve.configPath])
        #expect(second.status == 1)
        #expect(second.err.contains("another healthgate serve is using the data dir"))
        // The endpoint comes up: the webhook catches up with everything, in order.
        let endpoint = try ScriptedEndpoint(port: port) { _ in HTTPResponse(status: 200) }
        var delivered: [String] = []
        #expect(ServeProcess.eventually(15) {
            delivered = endpoint.requests.flatMap(ScriptedEndpoint.uuids)
            return Set(delivered) == Set(sent)
        }, "the webhook got \(Set(delivered).count) of \(sent.count)")
        #expect(delivered == sent)
        #expect(ServeProcess.eventually(5) {
            ((try? CLITests.run(["status", "--config", serve.configPath]).out) ?? "").contains("hook: up to date")
        })
        serve.stop()
        let after = try CLITests.run(["status", "--config", serve.configPath])
        #expect(after.out.contains("serve is not running"))
    }
}
