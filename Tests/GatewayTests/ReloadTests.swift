import Foundation
@testable import Gateway
import HealthgateCore
@testable import HealthgateTesting
import Testing

/// SIGHUP while phones keep posting: the config file is read again; a sink whose config
/// changed is rebuilt (it goes on from its cursor), a new sink and a new receiver start, the
/// unchanged go on; every request is answered and every record kept; a bad config is refused
/// with its problems and the running one stays.
@Suite(.serialized) struct ReloadTests {
    static func config(_ extra: String = "", archive: String = "archive-a.ndjson", routes: String = "") -> String {
        """
        listen: 127.0.0.1:0
        data_dir: DATA_DIR
        receivers:
        \(Vectors.phoneReceiver)
        \(extra)
        routes:
          - {from: [phone], to: [archive]}
        \(routes)
        sinks:
          archive: {kind: file, path: "\(archive)", batch: {max_wait: 10ms}}
        """
    }

    static func write(_ text: String, to serve: ServeProcess) throws {
        try text.replacingOccurrences(of: "DATA_DIR", with: serve.dataDir).write(
            toFile: serve.configPath, atomically: true, encoding: .utf8)
    }

    static func uuids(_ path: String) -> Set<String> {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        return Set(
            text.split(separator: "\n").compactMap {
                (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])?["uuid"] as? String
            })
    }

    /// New certificate files and SIGHUP: the same port serves the new certificate; a key that
    /// does not go with its certificate is refused and the one in use stays.
    @Test func theTLSCertificateIsReloadedOnTheSameSocket() throws {
        let dir = ServeProcess.makeTempDir("tls-reload")
        func makeCert(_ name: String) throws {
            let (rc, out) = try HTTPServerTests.shell(
                "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 "
                    + "-subj /CN=localhost -keyout \(dir)/\(name)-key.pem -out \(dir)/\(name)-cert.pem")
            #expect(rc == 0, "\(out)")
        }
        try makeCert("one")
        try makeCert("two")
        try makeCert("three")
        _ = try HTTPServerTests.shell("cp \(dir)/one-key.pem \(dir)/key.pem && cp \(dir)/one-cert.pem \(dir)/cert.pem")
        let config = Self.config().replacingOccurrences(
            of: "data_dir: DATA_DIR", with: "data_dir: DATA_DIR\ntls: {cert: \(dir)/cert.pem, key: \(dir)/key.pem}")
        let serve = try ServeProcess(config: config)
        func status(trusting name: String) throws -> String {
            try HTTPServerTests.shell(
                "curl -s -o /dev/null -w '%{http_code}' --cacert \(dir)/\(name)-cert.pem https://localhost:\(serve.port)/healthz"
            ).1
        }
        #expect(try status(trusting: "one") == "200")
        _ = try HTTPServerTests.shell("cp \(dir)/two-key.pem \(dir)/key.pem && cp \(dir)/two-cert.pem \(dir)/cert.pem")
        kill(serve.process.processIdentifier, SIGHUP)
        #expect(ServeProcess.eventually { serve.stderrText.contains("the new key and certificate are served") }, "\(serve.stderrText)")
        #expect(try status(trusting: "two") == "200")
        #expect(try status(trusting: "one") != "200")
        // A key that is not the certificate's: the config is refused (as `check` refuses it), the second pair goes on.
        _ = try HTTPServerTests.shell("cp \(dir)/three-key.pem \(dir)/key.pem && cp \(dir)/two-cert.pem \(dir)/cert.pem")
        kill(serve.process.processIdentifier, SIGHUP)
        #expect(ServeProcess.eventually { serve.stderrText.contains("the key is not the certificate") }, "\(serve.stderrText)")
        #expect(try status(trusting: "two") == "200")
        let check = try CLITests.run(["check", "--config", serve.configPath])
        #expect(check.status != 0 && check.err.contains("tls: the key is not the certificate's"), "\(check.err)")
        serve.stop()
        #expect(serve.process.terminationStatus == 0)
    }

    /// Issue 46: a sink taken out of the config by SIGHUP keeps what waited for it. The journal
    /// keeps its segments while the other sink moves on and segments roll; `status` lists it;
    /// put back, it delivers every record, those before and after its removal; taken out again
    /// and forgotten (`healthgate forget`), it holds nothing back any more.
    @Test func aSinkTakenOutKeepsWhatWaitedForItUntilItIsBack() throws {
        final class Gate: @unchecked Sendable {
            let lock = NSLock()
            var open = false
            var got: Set<String> = []
        }
        let gate = Gate()
        let endpoint = try ScriptedEndpoint { r in
            gate.lock.withLock {
                guard gate.open else { return HTTPResponse(status: 503) }
                gate.got.formUnion(ScriptedEndpoint.uuids(r))
                return HTTPResponse(status: 200)
            }
        }
        let hook = "  hook: {kind: http, url: \"\(endpoint.url)\", retry: {initial: 50ms, max: 200ms}}\n"
        let base = Self.config("journal: {segment_bytes: 64KB}", routes: "  - {from: [phone], to: [hook]}")
        let without = Self.config("journal: {segment_bytes: 64KB}")
        let serve = try ServeProcess(config: base + "\n" + hook)
        defer { serve.stop() }
        var sent: [String] = []
        func post(_ n: Int, _ tag: String) throws {
            for b in 0..<n {
                let uuids = (0..<40).map { "\(tag)-\(b)-\($0)" }
                let body = Vectors.syncBody(samples: uuids.map(CrashTests.sample), delivery: UUID().uuidString.lowercased())
                #expect(
                    try serve.client().request(
                        "POST", "/hook", headers: LiveServeTests.signedHeaders(body),
                        body: Array(body.utf8)
                    ).status == 200)
                sent += uuids
            }
        }
        try post(10, "before")
        #expect(ServeProcess.eventually { Self.uuids(serve.dataDir + "/archive-a.ndjson").count == sent.count })
        try Self.write(without, to: serve)
        kill(serve.process.processIdentifier, SIGHUP)
        #expect(
            ServeProcess.eventually { serve.stderrText.contains("sink hook removed: 400 record(s)") }, "\(serve.stderrText.suffix(800))")
        // The archive moves on through several segments, each passed by every sink in the config.
        try post(30, "after")
        #expect(ServeProcess.eventually { Self.uuids(serve.dataDir + "/archive-a.ndjson").count == sent.count })
        Thread.sleep(forTimeInterval: 1.5)
        let segments = try FileManager.default.contentsOfDirectory(atPath: serve.dataDir + "/journal").filter {
            $0.hasSuffix(".seg") || $0.contains("seg")
        }
        #expect(segments.count >= 3, "\(segments)")
        var statusText = ""
        #expect(
            ServeProcess.eventually(5) {
                statusText = (try? CLITests.run(["status", "--config", serve.configPath]).out) ?? ""
                return statusText.contains("hook: 1600 record(s) waiting")
            }, "\(statusText)")
        #expect(statusText.contains("healthgate forget hook"))
        // Put back, and its endpoint answering: every record, from before and after its removal.
        gate.lock.withLock { gate.open = true }
        try Self.write(base + "\n" + hook, to: serve)
        kill(serve.process.processIdentifier, SIGHUP)
        #expect(
            ServeProcess.eventually(20) { gate.lock.withLock { gate.got.count } == sent.count },
            "\(gate.lock.withLock { gate.got.count }) of \(sent.count); \(serve.stderrText.suffix(800))")
        #expect(gate.lock.withLock { gate.got } == Set(sent))

        // Out again with records waiting, then forgotten: nothing is held for it any more.
        gate.lock.withLock { gate.open = false }
        try post(2, "late")
        try Self.write(without, to: serve)
        kill(serve.process.processIdentifier, SIGHUP)
        #expect(ServeProcess.eventually { serve.stderrText.contains("sink hook removed: 80 record(s)") }, "\(serve.stderrText.suffix(800))")
        let forgot = try CLITests.run(["forget", "hook", "--config", serve.configPath])
        #expect(forgot.status == 0 && forgot.out.contains("let go"), "\(forgot.out) \(forgot.err)")
        #expect(
            ServeProcess.eventually(5) {
                !((try? CLITests.run(["status", "--config", serve.configPath]).out) ?? "hook:").contains("hook: ")
            })
        // A sink in the config cannot be forgotten.
        #expect(try CLITests.run(["forget", "archive", "--config", serve.configPath]).status == 2)
    }

    /// The same across a restart without the sink: its records wait (and `serve` says so as it
    /// starts), and a start with it back delivers them all.
    @Test func aRestartWithoutASinkKeepsWhatWaitsForIt() throws {
        let endpoint = try ScriptedEndpoint { r in HTTPResponse(status: 200) }
        let hook = "  hook: {kind: http, url: \"\(endpoint.url)\", retry: {initial: 50ms, max: 200ms}}\n"
        let base = Self.config("journal: {segment_bytes: 64KB}", routes: "  - {from: [phone], to: [hook]}")
        let dataDir = ServeProcess.makeTempDir()
        var serve = try ServeProcess(config: Self.config("journal: {segment_bytes: 64KB}"), dataDir: dataDir)
        // The hook existed once (its directory and cursor are there), then went out of the config.
        try FileManager.default.createDirectory(atPath: dataDir + "/sinks/hook", withIntermediateDirectories: true)
        try Data("1 0 1 0\n".utf8).write(to: URL(fileURLWithPath: dataDir + "/sinks/hook/cursor"))
        serve.stop()
        serve = try ServeProcess(config: Self.config("journal: {segment_bytes: 64KB}"), dataDir: dataDir)
        var sent: [String] = []
        #expect(!serve.stderrText.contains("sink hook is not in the config"), "nothing waits yet: no warning")
        for b in 0..<30 {
            let uuids = (0..<40).map { "r-\(b)-\($0)" }
            let body = Vectors.syncBody(samples: uuids.map(CrashTests.sample), delivery: UUID().uuidString.lowercased())
            #expect(
                try serve.client().request("POST", "/hook", headers: LiveServeTests.signedHeaders(body), body: Array(body.utf8)).status
                    == 200)
            sent += uuids
        }
        #expect(ServeProcess.eventually { Self.uuids(dataDir + "/archive-a.ndjson").count == sent.count })
        Thread.sleep(forTimeInterval: 1.5)
        serve.stop()
        // A start without it says what waits for it.
        serve = try ServeProcess(config: Self.config("journal: {segment_bytes: 64KB}"), dataDir: dataDir)
        #expect(
            ServeProcess.eventually { serve.stderrText.contains("sink hook is not in the config, and 1200 record(s) wait for it") },
            "\(serve.stderrText.suffix(600))")
        serve.stop()
        serve = try ServeProcess(config: base + "\n" + hook, dataDir: dataDir)
        defer { serve.stop() }
        #expect(
            ServeProcess.eventually(20) { Set(endpoint.requests.flatMap(ScriptedEndpoint.uuids)) == Set(sent) },
            "\(Set(endpoint.requests.flatMap(ScriptedEndpoint.uuids)).count) of \(sent.count)")
    }

    /// What waits for a sink taken out of the config stays within the journal's budget: near
    /// it, the oldest segment held by such sinks alone goes to their dead letters, with why, and
    /// the phones are not refused for a sink nobody runs.
    @Test func theJournalBudgetMovesARemovedSinksOldestRecordsToItsDeadLetters() throws {
        let endpoint = try ScriptedEndpoint { _ in HTTPResponse(status: 503) }
        let journal = "journal: {segment_bytes: 64KB, max_bytes: 400KB}"
        let hook = "  hook: {kind: http, url: \"\(endpoint.url)\", retry: {initial: 50ms, max: 200ms}}\n"
        let serve = try ServeProcess(config: Self.config(journal, routes: "  - {from: [phone], to: [hook]}") + "\n" + hook)
        defer { serve.stop() }
        var n = 0
        func post(_ bodies: Int) throws -> [Int] {
            try (0..<bodies).map { _ in
                n += 1
                let uuids = (0..<40).map { "b\(n)-\($0)" }
                let body = Vectors.syncBody(samples: uuids.map(CrashTests.sample), delivery: UUID().uuidString.lowercased())
                return try serve.client().request("POST", "/hook", headers: LiveServeTests.signedHeaders(body), body: Array(body.utf8))
                    .status
            }
        }
        #expect(try post(5).allSatisfy { $0 == 200 })
        try Self.write(Self.config(journal), to: serve)
        kill(serve.process.processIdentifier, SIGHUP)
        #expect(ServeProcess.eventually { serve.stderrText.contains("sink hook removed") })
        // Four times the budget, a little at a time: never refused for long, the oldest moved out.
        var refused = 0
        for _ in 0..<40 {
            refused += try post(4).filter { $0 != 200 }.count
            Thread.sleep(forTimeInterval: 0.15)
        }
        let dead = serve.dataDir + "/sinks/hook/dead-letters.ndjson"
        #expect(ServeProcess.eventually(5) { FileManager.default.fileExists(atPath: dead) }, "\(serve.stderrText.suffix(1000))")
        let text = (try? String(contentsOfFile: dead, encoding: .utf8)) ?? ""
        #expect(text.contains("journal.max_bytes") && text.contains("\"uuid\":\"b1-0\""), "\(text.prefix(400))")
        #expect(serve.stderrText.contains("waiting record(s) moved to its dead letters"))
        #expect(refused < 40, "\(refused) of 160 requests refused")
        let onDisk = try FileManager.default.contentsOfDirectory(atPath: serve.dataDir + "/journal")
            .compactMap { try? FileManager.default.attributesOfItem(atPath: serve.dataDir + "/journal/" + $0)[.size] as? Int }.reduce(0, +)
        #expect(onDisk <= 400 * 1024 + 64 * 1024, "\(onDisk) bytes of journal")
    }

    @Test func aReloadUnderTrafficAnswersAndKeepsEveryRequest() throws {
        let serve = try ServeProcess(config: Self.config())
        let port = serve.port
        final class Results: @unchecked Sendable {
            let lock = NSLock()
            var statuses: [Int] = []
            var sent: [String] = []
            var stop = false
        }
        let results = Results()
        let traffic = Thread {
            var i = 0
            while !results.lock.withLock({ results.stop }) {
                i += 1
                let uuid = "r-\(i)"
                let delivery = UUID().uuidString.lowercased()
                let body = Vectors.syncBody(
                    samples: [PostgresSinkTests.q(uuid, "steps", Double(i), "count", at: PostgresSinkTests.base)],
                    delivery: delivery)
                let status =
                    (try? RawHTTPClient(port: port).request(
                        "POST", "/hook", headers: LiveServeTests.signedHeaders(body, delivery: delivery),
                        body: Array(body.utf8)
                    ).status) ?? -1
                results.lock.withLock {
                    results.statuses.append(status)
                    if status == 200 { results.sent.append(uuid) }
                }
            }
        }
        traffic.start()
        Thread.sleep(forTimeInterval: 0.8)

        // A new receiver, a new sink with its route, and the archive moved to another file.
        try Self.write(
            Self.config(
                "  chunks: {kind: ingest, auth: {type: bearer, token: ingest-token-123456}}", archive: "archive-b.ndjson",
                routes: "  - {from: [phone, chunks], to: [extra]}")
                + "\n  extra: {kind: file, path: \"extra.ndjson\", batch: {max_wait: 10ms}}\n", to: serve)
        kill(serve.process.processIdentifier, SIGHUP)
        // What changed is said after the "reloaded" line: wait for all of it.
        #expect(
            ServeProcess.eventually {
                let said = serve.stderrText
                return said.contains("reloaded") && said.contains("sink extra added") && said.contains("sink archive rebuilt")
                    && said.contains("receiver chunks added")
            }, "\(serve.stderrText)")
        Thread.sleep(forTimeInterval: 0.8)
        let ingest = try serve.client().request(
            "POST", "/v1/ingest",
            headers: [
                ("Authorization", "Bearer ingest-token-123456"),
                ("Content-Type", "application/json")
            ],
            body: Array(
                #"{"device_id":"ios-9","samples":[{"source_uuid":"via-chunks","data_type":"stepCount","ts":"2026-12-01T09:00:00Z","value":1,"unit":"count"}]}"#
                    .utf8))
        #expect(ingest.status == 202)

        // A bad config: refused with its problem, the running one stays.
        try Self.write(Self.config(routes: "  - {from: [phone], to: [nowhere]}"), to: serve)
        kill(serve.process.processIdentifier, SIGHUP)
        // The problem is said on the line after the refusal: wait for both.
        #expect(
            ServeProcess.eventually {
                let said = serve.stderrText
                return said.contains("is refused, the running config stays") && said.contains("no sink is named \\\"nowhere\\\"")
            }, "\(serve.stderrText)")
        Thread.sleep(forTimeInterval: 0.8)
        #expect(
            try serve.client().request(
                "POST", "/v1/ingest",
                headers: [
                    ("Authorization", "Bearer ingest-token-123456"),
                    ("Content-Type", "application/json")
                ],
                body: Array(#"{"device_id":"ios-9","samples":[]}"#.utf8)
            ).status == 202)
        results.lock.withLock { results.stop = true }
        while traffic.isExecuting { Thread.sleep(forTimeInterval: 0.05) }

        let (statuses, sent) = results.lock.withLock { (results.statuses, results.sent) }
        #expect(statuses.count > 20, "\(statuses.count) requests")
        #expect(statuses.allSatisfy { $0 == 200 }, "\(Dictionary(grouping: statuses, by: { $0 }).mapValues(\.count))")
        // Every record is in the archive — the old file before the rebuild, the new one after.
        var archived = Set<String>()
        #expect(
            ServeProcess.eventually(15) {
                archived = Self.uuids(serve.dataDir + "/archive-a.ndjson").union(Self.uuids(serve.dataDir + "/archive-b.ndjson"))
                return archived.isSuperset(of: sent)
            }, "\(Set(sent).subtracting(archived).sorted().prefix(10))")
        #expect(!Self.uuids(serve.dataDir + "/archive-b.ndjson").isEmpty)
        let extra = Self.uuids(serve.dataDir + "/extra.ndjson")
        #expect(extra.contains("via-chunks") && extra.count > 1, "\(extra.count)")
        serve.stop()
        #expect(serve.process.terminationStatus == 0)
    }
}
