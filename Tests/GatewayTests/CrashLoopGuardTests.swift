import Foundation
import Glibc
@testable import HealthgateTesting
import Testing

/// No crash loop, even for a crash nobody foresaw: `healthgate-testserve`'s `crash_on` test
/// transform kills the process on one record, on a thread the sink's own thread started (as
/// the InfluxDB sink's index thread is). Three starts die on it; the fourth pauses that sink,
/// serves, delivers to the other sink, and says so in its log, `/healthz`, `status` and the
/// status page; `healthgate resume SINK --skip` puts the batch that kills it in its dead
/// letters and the sink goes on with what came after.
@Suite(.serialized) struct CrashLoopGuardTests {
    static func config(port: UInt16, crash: String) -> String {
        """
        listen: 127.0.0.1:\(port)
        data_dir: DATA_DIR
        receivers:
          phone: {kind: syncky, path: /hook, auth: {type: bearer, token: \(Vectors.token)}}
        routes:
          - {name: fragile, from: [phone], transforms: [{crash_on: {uuid: bad-1, \(crash)}}], to: [fragile]}
          - {name: steady, from: [phone], to: [steady]}
        sinks:
          fragile: {kind: file, path: "fragile.ndjson", batch: {max_items: 100, max_wait: 5ms}}
          steady: {kind: file, path: "steady.ndjson", batch: {max_items: 100, max_wait: 5ms}}
        """
    }

    static func sample(_ uuid: String) -> String {
        #"{"uuid":"\#(uuid)","type":"steps","value":12,"unit":"count","start":"2026-10-14T07:00:00Z","end":"2026-10-14T07:01:00Z"}"#
    }

    static func post(_ serve: ServeProcess, _ uuids: [String]) throws -> Int {
        try serve.client().request(
            "POST", "/hook", headers: [("X-Syncky-Format", "native"), ("Authorization", "Bearer \(Vectors.token)")],
            body: Array(Vectors.syncBody(samples: uuids.map(sample), delivery: UUID().uuidString.lowercased()).utf8)
        ).status
    }

    static func uuids(in file: String) -> Set<String> {
        guard let text = try? String(contentsOfFile: file, encoding: .utf8) else { return [] }
        var out = Set<String>()
        for line in text.split(separator: "\n") {
            guard let o = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { continue }
            if let u = o["uuid"] as? String { out.insert(u) }
            if let r = o["record"] as? [String: Any], let u = r["uuid"] as? String { out.insert(u) }
        }
        return out
    }

    /// An abort on a thread the sink's thread started, and a trap on the sink's thread itself.
    /// Under a sanitizer, the Swift runtime's backtracer is off for serve: it reads the other
    /// threads' stacks, which AddressSanitizer reports, and takes minutes there; the signal then
    /// ends the process as it would without it (our handler hands it on all the same).
    @Test(arguments: ["thread: helper", "how: trap"])
    func aSinkThatKillsTheProcessIsPausedAtTheFourthStart(crash: String) throws {
        let port = ScriptedEndpoint.freePort()
        let dataDir = ServeProcess.makeTempDir()
        let config = Self.config(port: port, crash: crash)
        let environment = ProcessInfo.processInfo.environment["HEALTHGATE_SANITIZER"] == nil ? [:] : ["SWIFT_BACKTRACE": "enable=no"]
        // The first start takes the request, then dies on the record while its sink writes.
        var serve = try ServeProcess(config: config, dataDir: dataDir, environment: environment, binary: ServeProcess.testServeBinary)
        #expect(try Self.post(serve, ["good-1", "bad-1", "good-2"]) == 200)
        for start in 1...3 {
            #expect(serve.process.waitUntilExit(within: 60), "start \(start) did not die on the record")
            #expect(serve.process.terminationReason == .uncaughtSignal, "start \(start): \(serve.stderrText.suffix(600))")
            serve.stop()
            // The restart may die on the record before it listens: not waited for.
            if start < 3 {
                serve = try ServeProcess(
                    config: config, dataDir: dataDir, environment: environment, binary: ServeProcess.testServeBinary,
                    listening: false)
            }
        }
        // The fourth start serves, with the sink paused.
        serve = try ServeProcess(config: config, dataDir: dataDir, environment: environment, binary: ServeProcess.testServeBinary)
        defer { serve.stop() }
        #expect(ServeProcess.eventually(10) { serve.stderrText.contains("sink fragile is paused") }, "\(serve.stderrText.suffix(1500))")
        #expect(serve.stderrText.contains("healthgate resume fragile"))
        #expect(try Self.post(serve, ["good-3"]) == 200)
        #expect(
            ServeProcess.eventually(10) { Self.uuids(in: dataDir + "/steady.ndjson") == ["good-1", "bad-1", "good-2", "good-3"] },
            "\(Self.uuids(in: dataDir + "/steady.ndjson"))")
        usleep(300_000)
        #expect(serve.process.isRunning)
        #expect(Self.uuids(in: dataDir + "/fragile.ndjson").isEmpty)

        let health = try serve.client().request("GET", "/healthz")
        #expect(health.status == 200)
        let h = try #require(try JSONSerialization.jsonObject(with: Data(health.body)) as? [String: Any])
        #expect(h["status"] as? String == "degraded")
        #expect((h["sinks"] as? [String: Any])?["fragile"] as? String == "paused")
        #expect((h["sinks"] as? [String: Any])?["steady"] as? String != "paused")
        let pausedAt = (h["paused"] as? [String: Any])?["fragile"] as? [String: Any]
        #expect(pausedAt?["crashes"] as? Int == 3)
        #expect((pausedAt?["resume"] as? String)?.contains("healthgate resume fragile --skip") == true)

        // The status page (loopback) says it, as HTML and as JSON.
        let page = String(decoding: try serve.client().request("GET", "/").body, as: UTF8.self)
        #expect(page.contains("paused") && page.contains("healthgate resume fragile"), "\(page.suffix(2000))")
        let status = try #require(
            try JSONSerialization.jsonObject(with: Data(try serve.client().request("GET", "/status").body)) as? [String: Any])
        let sinks = (status["sinks"] as? [[String: Any]]) ?? []
        #expect((sinks.first { $0["name"] as? String == "fragile" }?["paused"] as? [String: Any])?["crashes"] as? Int == 3)
        #expect(sinks.first { $0["name"] as? String == "steady" }?["paused"] is NSNull)

        // `status` says it, from the status file serve writes every second.
        var statusOut = ""
        #expect(
            ServeProcess.eventually(5) {
                statusOut = (try? Command.run(ServeProcess.testServeBinary, ["status", "--config", serve.configPath]).1) ?? ""
                return statusOut.contains("fragile: PAUSED")
            }, "\(statusOut)")
        #expect(statusOut.contains("healthgate resume fragile"))

        // Resumed past the batch that kills it: that batch in the dead letters, what came after delivered.
        let (rc, out) = try Command.run(ServeProcess.testServeBinary, ["resume", "fragile", "--skip", "--config", serve.configPath])
        #expect(rc == 0, "\(out)")
        #expect(out.contains("resumed"), "\(out)")
        #expect(
            ServeProcess.eventually(10) { Self.uuids(in: dataDir + "/fragile.ndjson") == ["good-3"] },
            "\(Self.uuids(in: dataDir + "/fragile.ndjson")) \(serve.stderrText.suffix(1500))")
        #expect(Self.uuids(in: dataDir + "/sinks/fragile/dead-letters.ndjson") == ["good-1", "bad-1", "good-2"])
        #expect(serve.process.isRunning)
        let after = try serve.client().request("GET", "/healthz")
        #expect(String(decoding: after.body, as: UTF8.self).contains("\"status\":\"ok\""), "\(String(decoding: after.body, as: UTF8.self))")
        // Resuming what is not paused says so and changes nothing.
        let (rc2, out2) = try Command.run(ServeProcess.testServeBinary, ["resume", "fragile", "--config", serve.configPath])
        #expect(rc2 == 0 && out2.contains("not paused"), "\(out2)")
    }
}
