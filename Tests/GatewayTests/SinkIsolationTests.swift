import Foundation
import Gateway
import HealthgateCore
@testable import HealthgateTesting
@testable import Pipeline
import SinkKit
import Testing

/// One sink down holds back nothing but itself, and catches up when its endpoint returns.
@Suite(.serialized) struct SinkIsolationTests {
    @Test func aSinkThatIsDownDoesNotHoldBackAnother() throws {
        let port = ScriptedEndpoint.freePort()
        let config = LiveServeTests.config.replacingOccurrences(
            of: """
                routes:
                  - {name: all, from: ["*"], to: [archive]}
                """,
            with: """
                routes:
                  - {name: all, from: ["*"], to: [archive, hook]}
                """
        ).replacingOccurrences(
            of: """
                  archive: {kind: file, path: "archive/{device}/{date}.ndjson", batch: {max_wait: 10ms}}
                """,
            with: """
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
        // The archive's cursor is committed just after its file is written: wait for it, not
        // for the file alone (a CI run read the metrics in between).
        var metrics = ""
        #expect(
            ServeProcess.eventually(5) {
                metrics = (try? c.request("GET", "/metrics").text) ?? ""
                return metrics.contains(#"healthgate_sink_records_waiting{sink="archive"} 0"#)
            }, "\(metrics)")
        #expect(metrics.contains(#"healthgate_sink_records_sent_total{sink="hook"} 0"#))
        #expect(!metrics.contains(#"healthgate_sink_records_kept_total{sink="hook"} 0"#))
        #expect(serve.stderrText.contains("sink hook"))
        #expect(metrics.contains(#"healthgate_sink_records_waiting{sink="hook"} 100"#))
        #expect(metrics.contains(#"healthgate_sink_retrying{sink="hook"} 1"#))
        // `healthgate status` says the same, from the data dir, while serve runs.
        var status = ""
        #expect(
            ServeProcess.eventually(5) {
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
        #expect(second.err.contains("is using the data dir"))
        // The endpoint comes up: the webhook catches up with everything, in order.
        let endpoint = try ScriptedEndpoint(port: port) { _ in HTTPResponse(status: 200) }
        var delivered: [String] = []
        #expect(
            ServeProcess.eventually(15) {
                delivered = endpoint.requests.flatMap(ScriptedEndpoint.uuids)
                return Set(delivered) == Set(sent)
            }, "the webhook got \(Set(delivered).count) of \(sent.count)")
        #expect(delivered == sent)
        #expect(
            ServeProcess.eventually(5) {
                ((try? CLITests.run(["status", "--config", serve.configPath]).out) ?? "").contains("hook: up to date")
            })
        serve.stop()
        let after = try CLITests.run(["status", "--config", serve.configPath])
        #expect(after.out.contains("serve is not running"))
    }
}

/// Every failure class in a row, against a live serve: nothing good is lost, nothing stalls,
/// the one bad record ends in the dead letters.
@Suite(.serialized) struct FaultSequenceTests {
    final class Script: @unchecked Sendable {
        let lock = NSLock()
        var step = 0
        func next() -> Int {
            lock.lock()
            defer { lock.unlock() }
            step += 1
            return step
        }
    }

    @Test func everyFailureClassInARowLosesNothing() throws {
        let script = Script()
        let endpoint = try ScriptedEndpoint { r in
            switch script.next() {
            case 1: return HTTPResponse(status: 500)
            case 2: return HTTPResponse(status: 429, headers: [HTTPHeader("Retry-After", "1")])
            case 3: return HTTPResponse(status: 401)
            case 4:
                usleep(1_500_000) // longer than the sink's timeout
                return HTTPResponse(status: 200)
            case 5: return HTTPResponse(status: 503)
            default:
                return ScriptedEndpoint.uuids(r).contains("poison") ? HTTPResponse(status: 400) : HTTPResponse(status: 200)
            }
        }
        let config = QueueLimitTests.config(port: endpoint.port, queue: "")
            .replacingOccurrences(of: "retry: {initial: 50ms, max: 100ms}", with: "retry: {initial: 50ms, max: 100ms}, timeout: 500ms")
        #expect(config.contains("timeout: 500ms"))
        let serve = try ServeProcess(config: config)
        var good: [String] = []
        for i in 0..<4 {
            var uuids = (0..<10).map { "seq-\(i)-\($0)" }
            good += uuids
            if i == 2 { uuids.insert("poison", at: 5) }
            let body = Vectors.syncBody(samples: uuids.map(CrashTests.sample))
            #expect(
                try serve.client().request(
                    "POST", "/hook", headers: LiveServeTests.signedHeaders(body),
                    body: Array(body.utf8)
                ).status == 200)
        }
        var delivered = Set<String>()
        #expect(
            ServeProcess.eventually(20) {
                delivered = Set(
                    endpoint.requests.filter { !ScriptedEndpoint.uuids($0).contains("poison") }
                        .flatMap(ScriptedEndpoint.uuids))
                return delivered.isSuperset(of: good)
            }, "\(Set(good).subtracting(delivered).count) good records never arrived")
        let dead = serve.dataDir + "/sinks/hook/dead-letters.ndjson"
        #expect(ServeProcess.eventually { (try? String(contentsOfFile: dead, encoding: .utf8))?.contains("\"uuid\":\"poison\"") == true })
        #expect(serve.stderrText.contains("401 from"))
        #expect(serve.stderrText.contains("sinks.hook.auth"))
        // The counters follow the dead letter and the cursor by a moment.
        var metrics = ""
        #expect(
            ServeProcess.eventually {
                metrics = (try? serve.client().request("GET", "/metrics").text) ?? ""
                return metrics.contains(#"healthgate_sink_records_waiting{sink="hook"} 0"#)
            }, "\(metrics)")
        #expect(metrics.contains(#"healthgate_sink_records_rejected_total{sink="hook"} 1"#))
    }
}
