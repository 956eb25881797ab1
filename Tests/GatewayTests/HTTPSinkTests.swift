import CanonicalJSON
import Foundation
@testable import Gateway
import HealthgateCore
import HealthgateCrypto
@testable import HealthgateTesting
@testable import HTTPDelivery
@testable import Pipeline
@testable import SinkHTTP
import SinkKit
@testable import Sinks
import Synchronization
import Testing
import YAMLConfig

/// The HTTP sink against a real endpoint that answers as scripted: every class of failure.
@Suite(.serialized) struct HTTPSinkTests {
    let logs = MemoryLogSink()

    func sink(
        _ url: String, format: HTTPSinkConfig.Format = .json, timeout: Double = 5,
        headers: [(String, String)] = [("Content-Type", "application/json")], hmac: String? = nil
    ) -> HTTPSink {
        HTTPSink(
            name: "hook", url: url, format: format, headers: headers, hmacSecret: hmac,
            options: CurlClient.Options(timeoutSeconds: timeout), logger: Logger(component: "t", sink: logs),
            clock: FixedClock(Timestamp(seconds: 1_791_961_500)))
    }

    func batch(_ uuids: [String]) -> SinkBatch {
        SinkBatch(records: uuids.map { PipelineTests.record($0) })
    }

    @Test func deliversAJSONArrayWithItsHeadersAndSignature() throws {
        let endpoint = try ScriptedEndpoint { _ in HTTPResponse(status: 204) }
        let s = sink(
            endpoint.url,
            headers: [
                ("Authorization", "Bearer t0k"), ("X-Source", "healthgate"),
                ("Content-Type", "application/json")
            ], hmac: "whsec_test")
        #expect(s.write(batch(["a", "b", "c"])) == .accepted)
        let r = try #require(endpoint.requests.first)
        #expect(ScriptedEndpoint.uuids(r) == ["a", "b", "c"])
        #expect(r.header("authorization") == "Bearer t0k")
        #expect(r.header("x-source") == "healthgate")
        #expect(r.header("x-healthgate-records") == "3")
        #expect(r.header("x-healthgate-timestamp") == "1791961500")
        let mac = Crypto.hmacSHA256(key: Array("whsec_test".utf8), Array("1791961500.".utf8), r.body)
        #expect(r.header("x-healthgate-signature") == "v1=" + Crypto.lowercaseHex(mac))
    }

    @Test func deliversNDJSON() throws {
        let endpoint = try ScriptedEndpoint { _ in HTTPResponse(status: 200) }
        #expect(sink(endpoint.url, format: .ndjson).write(batch(["a", "b"])) == .accepted)
        let body = String(decoding: try #require(endpoint.requests.first).body, as: UTF8.self)
        #expect(body.split(separator: "\n").count == 2)
        #expect(ScriptedEndpoint.uuids(endpoint.requests[0]) == ["a", "b"])
    }

    @Test func keepsEverythingWhenNobodyListens() {
        let url = "http://127.0.0.1:\(ScriptedEndpoint.freePort())/hook"
        guard case .keep(let reason, _) = sink(url).write(batch(["a"])) else {
            Issue.record("a refused connection must keep the batch")
            return
        }
        #expect(reason.contains(url))
    }

    @Test(arguments: [500, 502, 503, 408])
    func keepsOnServerErrors(_ status: Int) throws {
        let endpoint = try ScriptedEndpoint { _ in HTTPResponse(status: status, body: Array("busy".utf8)) }
        guard case .keep(let reason, _) = sink(endpoint.url).write(batch(["a", "b"])) else {
            Issue.record("\(status) must keep the batch")
            return
        }
        #expect(reason.contains("\(status)"))
        #expect(endpoint.requests.count == 1)
    }

    @Test func honoursRetryAfterInSecondsAndAsADate() throws {
        let endpoint = try ScriptedEndpoint { _ in
            HTTPResponse(status: 429, headers: [HTTPHeader("Retry-After", "7")])
        }
        // The header's value as the sink sees it, without its line break.
        #expect(try CurlClient().send("POST", url: endpoint.url, headers: [], body: [1]).header("retry-after") == "7")
        #expect(sink(endpoint.url).write(batch(["a"])) == .keep(reason: "429 from \(endpoint.url)", retryAfterSeconds: 7))
        endpoint.answer { _ in
            // 90 s after the sink's clock (1791961500 = Mon, 14 Oct 2026 07:05:00 GMT).
            HTTPResponse(status: 503, headers: [HTTPHeader("Retry-After", "Wed, 14 Oct 2026 07:06:30 GMT")])
        }
        guard case .keep(_, let after) = sink(endpoint.url).write(batch(["a"])) else {
            Issue.record("503 must keep")
            return
        }
        #expect(after == 90)
    }

    /// Refused credentials and a wrong URL are the sink's config, not the records: kept, with
    /// what to fix (the delivery says it in the log once a minute while it lasts).
    @Test(arguments: [
        (401, "sinks.hook.auth"), (403, "sinks.hook.auth"), (404, "sinks.hook.url"), (405, "sinks.hook.url"),
        (410, "sinks.hook.url")
    ])
    func keepsWhenItsConfigIsWrong(_ status: Int, _ fix: String) throws {
        let endpoint = try ScriptedEndpoint { _ in HTTPResponse(status: status) }
        guard case .keep(let reason, _) = sink(endpoint.url).write(batch(["a"])) else {
            Issue.record("\(status) must keep")
            return
        }
        #expect(reason.contains(fix) && reason.contains("\(status)") && reason.contains("wait in the queue"), "\(reason)")
    }

    @Test func neverFollowsARedirect() throws {
        let target = try ScriptedEndpoint { _ in HTTPResponse(status: 200) }
        let endpoint = try ScriptedEndpoint { _ in
            HTTPResponse(status: 307, headers: [HTTPHeader("Location", target.url)])
        }
        guard case .keep(let reason, _) = sink(endpoint.url).write(batch(["a"])) else {
            Issue.record("a redirect must keep")
            return
        }
        #expect(reason.contains("does not follow redirects"))
        #expect(target.requests.isEmpty)
    }

    /// The endpoint refuses any request that holds the poison record: the sink narrows it down,
    /// rejects that one with the endpoint's answer and delivers the rest.
    @Test func rejectsOnlyTheRecordsTheEndpointRefuses() throws {
        let endpoint = try ScriptedEndpoint { r in
            ScriptedEndpoint.uuids(r).contains("poison")
                ? HTTPResponse(status: 400, body: Array(#"{"error":"bad value"}"#.utf8)) : HTTPResponse(status: 200)
        }
        let uuids = (0..<16).map { $0 == 11 ? "poison" : "r\($0)" }
        guard case .perRecord(let outcomes) = sink(endpoint.url).write(batch(uuids)) else {
            Issue.record("expected per-record outcomes")
            return
        }
        for (i, o) in outcomes.enumerated() {
            if i == 11 {
                #expect(o == .rejected(reason: "400 from \(endpoint.url): bad value"))
            } else {
                #expect(o == .accepted)
            }
        }
        let delivered = endpoint.requests.filter { !ScriptedEndpoint.uuids($0).contains("poison") }.flatMap(ScriptedEndpoint.uuids)
        #expect(Set(delivered) == Set(uuids.filter { $0 != "poison" }))
        #expect(endpoint.requests.count <= 2 * 5 + 1) // a binary search, not one request per record
    }

    @Test func halvesABatchTheEndpointFindsTooLarge() throws {
        let endpoint = try ScriptedEndpoint { r in
            ScriptedEndpoint.uuids(r).count > 3 ? HTTPResponse(status: 413) : HTTPResponse(status: 200)
        }
        let uuids = (0..<10).map { "r\($0)" }
        #expect(sink(endpoint.url).write(batch(uuids)) == .accepted)
        let delivered = endpoint.requests.filter { ScriptedEndpoint.uuids($0).count <= 3 }.flatMap(ScriptedEndpoint.uuids)
        #expect(delivered.sorted() == uuids.sorted())
    }

    @Test func keepsWhenTheEndpointHangs() throws {
        let endpoint = try ScriptedEndpoint { _ in
            usleep(2_500_000)
            return HTTPResponse(status: 200)
        }
        let started = Date()
        guard case .keep(let reason, _) = sink(endpoint.url, timeout: 0.5).write(batch(["a"])) else {
            Issue.record("a hang must keep")
            return
        }
        #expect(Date().timeIntervalSince(started) < 2)
        #expect(reason.lowercased().contains("timed out") || reason.lowercased().contains("timeout"), "\(reason)")
    }

    @Test func decodesFromConfigAndRefusesWhatItCannotDo() throws {
        let logger = Logger(component: "t", sink: logs)
        let ok = try ConfigLoader.load(
            text: """
                sinks:
                  hook:
                    kind: http
                    url: https://n8n.example.net/webhook/health
                    format: ndjson
                    auth: {type: basic, user: me, password: pw}
                    headers: {X-Source: healthgate}
                    hmac: {secret: whsec_x}
                    timeout: 5s
                """, file: "t.yaml", environment: [:], logger: logger)
        #expect(ok.sinks[0].built.summary == "http POST https://n8n.example.net/webhook/health (ndjson)")
        do {
            _ = try ConfigLoader.load(
                text: """
                    sinks:
                      hook: {kind: http, url: "ftp://x", auth: {type: bearer}, headers: {Authorization: x}, format: xml}
                    """, file: "t.yaml", environment: [:], logger: logger)
            Issue.record("a bad http sink must be refused")
        } catch {
            let text = error.description
            #expect(text.contains("format"), "\(text)")
        }
        do {
            _ = try ConfigLoader.load(
                text: """
                    sinks:
                      hook: {kind: http, url: "ftp://x", auth: {type: bearer}, headers: {Authorization: x}}
                    """, file: "t.yaml", environment: [:], logger: logger)
            Issue.record("a bad http sink must be refused")
        } catch {
            #expect(error.problems.count == 3, "\(error)")
        }
    }
}

/// A sink's URL and its endpoint's answers as they reach the log, `check` and `status`.
/// The http sink through its drainer: a webhook that holds every other request a while, refuses
/// the first try of some with a 503, and answers 400 to any request holding a poison record (the
/// sink halves it to find that record). Each commit of the cursor must come after every record
/// before it was taken (or, for a poison, dead-lettered); at the end all are.
@Suite struct HTTPDrainerTests {
    @Test func theCursorNeverPassesARecordTheWebhookHasNotTaken() throws {
        let taken = Mutex(Set<Int>())
        let script = OutOfOrderScript()
        let poison = Set([37, 38, 250, 499])
        @Sendable func number(_ uuid: String) -> Int { Int(uuid.dropFirst()) ?? -1 }
        let endpoint = ThreadedEndpoint { r in
            let ns = ScriptedEndpoint.uuids(r).map(number)
            let refuse = script.arrive(first: ns.first ?? -1)
            if refuse { return HTTPResponse(status: 503) }
            if ns.contains(where: poison.contains) { return HTTPResponse(status: 400, body: Array(#"{"error":"poison"}"#.utf8)) }
            taken.withLock { t in for n in ns { t.insert(n) } }
            return HTTPResponse(status: 204)
        }
        let dir = ServeProcess.makeTempDir("pipelined-http")
        let logger = Logger(component: "test", sink: MemoryLogSink())
        let total = 600, perEntry = 10
        let j = try PipelineTests.journal(dir: dir, records: total, perEntry: perEntry, logger: logger) { PipelineTests.record("r\($0)") }
        let node = try parseYAML(
            """
            {kind: http, url: "http://127.0.0.1:\(endpoint.port)/hook", format: ndjson,
             batch: {max_items: 25}, retry: {initial: 5ms, max: 20ms}}
            """, file: "t", environment: [:])
        let built = try HTTPSink.build(name: "hook", node: node, path: "sinks.hook", context: SinkBuildContext(dataDir: dir))
        let metrics = SinkMetrics(name: "hook")
        let violations = Mutex<[String]>([])
        let d = SinkDrainer(
            name: "hook", built: built, routes: [Route(name: "all", from: [Glob("*")], transforms: [], to: ["hook"])],
            journal: j, dataDir: dir, logger: logger, metrics: metrics
        ) {
            let seq = Int(metrics.cursorSeq.load(ordering: .relaxed)), skip = metrics.cursorSkip.load(ordering: .relaxed)
            let before = (seq - 1) * perEntry + skip
            let missing = taken.withLock { t in (0..<before).filter { !t.contains($0) && !poison.contains($0) } }
            let rejected = metrics.rejected.load(ordering: .relaxed)
            if !missing.isEmpty { violations.withLock { $0.append("cursor \(seq)/\(skip) passed \(missing.prefix(5))") } }
            if rejected < poison.filter({ $0 < before }).count {
                violations.withLock { $0.append("cursor \(seq)/\(skip) passed a poison not dead-lettered") }
            }
        }
        try PipelineTests.drainToEnd(d, entries: total / perEntry, violations: violations)
        #expect(taken.withLock { $0 } == Set(0..<total).subtracting(poison))
        #expect(!script.refused.isEmpty)
        #expect(metrics.rejected.load(ordering: .relaxed) == poison.count)
        let dead = try String(contentsOfFile: dir + "/sinks/hook/dead-letters.ndjson", encoding: .utf8)
        #expect(poison.allSatisfy { dead.contains("\"r\($0)\"") })
    }
}

@Suite struct SafeTextTests {
    @Test func urlsLoseTheirCredentialsAndSecretQueryValues() {
        #expect(
            SafeText.url("https://alice:s3cret@hooks.example:8443/in/x?apikey=abc123&db=health&token=t#frag")
                == "https://***@hooks.example:8443/in/x?apikey=***&db=health&token=***")
        #expect(
            SafeText.url("http://localhost:8086/api/v2/write?org=home&bucket=b&precision=ns")
                == "http://localhost:8086/api/v2/write?org=home&bucket=b&precision=ns")
        #expect(SafeText.url("http://h/p") == "http://h/p")
        // A password with `/`, `?` or `#` in it is masked all the same.
        #expect(SafeText.url("https://u:pa/ss@h/x") == "https://***@h/x")
        #expect(SafeText.url("https://u:p?ss#w@h:1/x?k=v") == "https://***@h:1/x?k=***")
    }

    @Test func endpointAnswersAreCappedAndEchoedValuesScrubbed() {
        // An endpoint that echoes what it was sent does not put records or values in the log.
        let echo = #"{"error":"unable to parse 'heart_rate,unit=count/min value=61 1791961440000000000': bad"}"#
        #expect(SafeText.answer(echo) == "unable to parse '…': bad")
        #expect(SafeText.answer("<html>weight 81.5 kg\nfor alice</html>") == "<html>weight #.# kg for alice</html>")
        #expect(SafeText.answer(String(repeating: "x", count: 5000)).count <= 161)
        #expect(SafeText.answer(#"[{"op":"upsert","device":"d","value":"asleep_core"}]"#).contains("asleep_core") == false)
    }
}

@Suite struct SecretsStayOutOfOutputTests {
    /// `check`, and the log of a failing delivery, show the http sink's URL without the
    /// password and the api key it carries.
    @Test func checkAndTheLogRedactTheURL() throws {
        let config = """
            listen: 127.0.0.1:0
            data_dir: DATA_DIR
            receivers:
              hae: {kind: hae, auth: {type: bearer, token: t-hae}}
            routes:
              - {from: ["*"], to: [hook]}
            sinks:
              hook: {kind: http, url: "http://bob:pa55word@127.0.0.1:9/in?apikey=k3y-v4lue", retry: {initial: 50ms, max: 100ms}, batch: {max_wait: 10ms}}
            """
        let dir = ServeProcess.makeTempDir("secret")
        let path = dir + "/c.yaml"
        try config.replacingOccurrences(of: "DATA_DIR", with: dir + "/data").write(toFile: path, atomically: true, encoding: .utf8)
        let check = try CLITests.run(["check", "--config", path])
        #expect(check.status == 0, "\(check.err)")
        #expect(check.out.contains("http POST http://***@127.0.0.1:9/in?apikey=***"), "\(check.out)")
        let serve = try ServeProcess(config: config)
        let body = #"{"data":{"metrics":[{"name":"step_count","units":"count","data":[{"date":"2026-10-14 09:00:00 +0200","qty":7}]}]}}"#
        #expect(
            try serve.client().request("POST", "/api/data", headers: [("Authorization", "Bearer t-hae")], body: Array(body.utf8)).status
                == 200)
        #expect(ServeProcess.eventually { serve.stderrText.contains("retrying") }, "\(serve.stderrText)")
        let status = try CLITests.run(["status", "--config", serve.configPath])
        serve.stop()
        for text in [check.out, check.err, serve.stderrText, serve.stdoutText, status.out, status.err] {
            #expect(!text.contains("pa55word") && !text.contains("k3y-v4lue") && !text.contains("t-hae"), "\(text)")
        }
    }
}
