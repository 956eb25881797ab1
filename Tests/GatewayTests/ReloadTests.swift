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
        try text.replacingOccurrences(of: "DATA_DIR", with: serve.dataDir).write(toFile: serve.configPath, atomically: true, encoding: .utf8)
    }

    static func uuids(_ path: String) -> Set<String> {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        return Set(text.split(separator: "\n").compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])?["uuid"] as? String
        })
    }

    /// New certificate files and SIGHUP: the same port serves the new certificate; a key that
    /// does not go with its certificate is refused and the one in use stays.
    @Test func theTLSCertificateIsReloadedOnTheSameSocket() throws {
        let dir = ServeProcess.makeTempDir("tls-reload")
        func makeCert(_ name: String) throws {
            let (rc, out) = try HTTPServerTests.shell("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 "
                                                      + "-subj /CN=localhost -keyout \(dir)/\(name)-key.pem -out \(dir)/\(name)-cert.pem")
            #expect(rc == 0, "\(out)")
        }
        try makeCert("one")
        try makeCert("two")
        try makeCert("three")
        _ = try HTTPServerTests.shell("cp \(dir)/one-key.pem \(dir)/key.pem && cp \(dir)/one-cert.pem \(dir)/cert.pem")
        let config = Self.config().replacingOccurrences(of: "data_dir: DATA_DIR", with: "data_dir: DATA_DIR\ntls: {cert: \(dir)/cert.pem, key: \(dir)/key.pem}")
        let serve = try ServeProcess(config: config)
        func status(trusting name: String) throws -> String {
            try HTTPServerTests.shell("curl -s -o /dev/null -w '%{http_code}' --cacert \(dir)/\(name)-cert.pem https://localhost:\(serve.port)/healthz").1
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
                let body = Vectors.syncBody(samples: [PostgresSinkTests.q(uuid, "steps", Double(i), "count", at: PostgresSinkTests.base)],
                                            delivery: delivery)
                let status = (try? RawHTTPClient(port: port).request("POST", "/hook", headers: LiveServeTests.signedHeaders(body, delivery: delivery),
                                                                     body: Array(body.utf8)).status) ?? -1
                results.lock.withLock {
                    results.statuses.append(status)
                    if status == 200 { results.sent.append(uuid) }
                }
            }
        }
        traffic.start()
        Thread.sleep(forTimeInterval: 0.8)

        // A new receiver, a new sink with its route, and the archive moved to another file.
        try Self.write(Self.config("  chunks: {kind: ingest, auth: {type: bearer, token: ingest-token-123456}}", archive: "archive-b.ndjson",
                                   routes: "  - {from: [phone, chunks], to: [extra]}")
                       + "\n  extra: {kind: file, path: \"extra.ndjson\", batch: {max_wait: 10ms}}\n", to: serve)
        kill(serve.process.processIdentifier, SIGHUP)
        // What changed is said after the "reloaded" line: wait for all of it.
        #expect(ServeProcess.eventually {
            let said = serve.stderrText
            return said.contains("reloaded") && said.contains("sink extra added") && said.contains("sink archive rebuilt")
                && said.contains("receiver chunks added")
        }, "\(serve.stderrText)")
        Thread.sleep(forTimeInterval: 0.8)
        let ingest = try serve.client().request("POST", "/v1/ingest", headers: [("Authorization", "Bearer ingest-token-123456"),
                                                                              ("Content-Type", "application/json")],
                                                body: Array(#"{"device_id":"ios-9","samples":[{"source_uuid":"via-chunks","data_type":"stepCount","ts":"2026-12-01T09:00:00Z","value":1,"unit":"count"}]}"#.utf8))
        #expect(ingest.status == 202)

        // A bad config: refused with its problem, the running one stays.
        try Self.write(Self.config(routes: "  - {from: [phone], to: [nowhere]}"), to: serve)
        kill(serve.process.processIdentifier, SIGHUP)
        // The problem is said on the line after the refusal: wait for both.
        #expect(ServeProcess.eventually {
            let said = serve.stderrText
            return said.contains("is refused, the running config stays") && said.contains("no sink is named \\\"nowhere\\\"")
        }, "\(serve.stderrText)")
        Thread.sleep(forTimeInterval: 0.8)
        #expect(try serve.client().request("POST", "/v1/ingest", headers: [("Authorization", "Bearer ingest-token-123456"),
                                                                          ("Content-Type", "application/json")],
                                           body: Array(#"{"device_id":"ios-9","samples":[]}"#.utf8)).status == 202)
        results.lock.withLock { results.stop = true }
        while traffic.isExecuting { Thread.sleep(forTimeInterval: 0.05) }

        let (statuses, sent) = results.lock.withLock { (results.statuses, results.sent) }
        #expect(statuses.count > 20, "\(statuses.count) requests")
        #expect(statuses.allSatisfy { $0 == 200 }, "\(Dictionary(grouping: statuses, by: { $0 }).mapValues(\.count))")
        // Every record is in the archive — the old file before the rebuild, the new one after.
        var archived = Set<String>()
        #expect(ServeProcess.eventually(15) {
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
