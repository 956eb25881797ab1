import CanonicalJSON
import Foundation
@testable import Gateway
import HealthgateCore
@testable import HealthgateTesting
@testable import Pipeline
import SinkKit
import Testing

/// The sink lifecycle seen from outside: building a sink touches nothing, and a sink has one
/// writer — `replay` beside a running `serve` goes through it.
@Suite(.serialized) struct OneWriterTests {
    /// `check`, `status`, `link`, `write` and `delete` build every sink and must not touch one:
    /// no connection to an http or influxdb destination, no file of the file sink, no index.
    @Test func commandsOtherThanServeTouchNoDestination() throws {
        let http = ListeningSocket()
        let influx = ListeningSocket()
        let dir = ServeProcess.makeTempDir("touch")
        let config = """
            listen: 127.0.0.1:0
            data_dir: \(dir)/data
            receivers:
            \(Vectors.phoneReceiver.dropLast())\(", write_back: true}")
            routes:
              - {from: [phone], to: [archive, hook, influx]}
            sinks:
              archive: {kind: file, path: "\(dir)/out/{device}.ndjson"}
              hook: {kind: http, url: "http://127.0.0.1:\(http.port)/hook"}
              influx: {kind: influxdb, url: "http://127.0.0.1:\(influx.port)", org: o, bucket: b, token: t}
            """
        try config.write(toFile: dir + "/c.yaml", atomically: true, encoding: .utf8)
        let cfg = ["--config", dir + "/c.yaml"]
        for args in [
            ["check"], ["status"], ["link", "--host", "example.net"],
            ["write", "dietary_water", "0.25", "L", "--at", "2026-10-14T07:00:00Z"], ["delete", "c_1"]
        ] {
            let r = try CLITests.run(args + cfg)
            #expect(r.status == 0, "\(args): \(r.err)")
        }
        usleep(200_000)
        #expect(http.accepted() == 0)
        #expect(influx.accepted() == 0)
        #expect(!FileManager.default.fileExists(atPath: dir + "/out"))
        let sinkFiles = (try? FileManager.default.subpathsOfDirectory(atPath: dir + "/data/sinks")) ?? []
        #expect(sinkFiles.isEmpty, "\(sinkFiles)")
        // serve, by contrast, opens them: the probe connects to the http and influxdb hosts.
        let serve = try ServeProcess(config: config.replacingOccurrences(of: "\(dir)/data", with: "DATA_DIR"))
        #expect(ServeProcess.eventually { http.accepted() > 0 })
        #expect(ServeProcess.eventually { influx.accepted() > 0 })
        serve.stop()
    }

    /// Each drainer probes its destination when it opens the sink (and every 30 s when idle):
    /// /healthz and `status` say which one cannot be reached, and the gateway stays up.
    @Test func healthzAndStatusSayWhichDestinationIsUnreachable() throws {
        let up = ListeningSocket()
        let config = """
            listen: 127.0.0.1:0
            data_dir: DATA_DIR
            receivers:
            \(Vectors.phoneReceiver)
            routes:
              - {from: [phone], to: [archive, up, down]}
            sinks:
              archive: {kind: file, path: "archive.ndjson"}
              up: {kind: http, url: "http://127.0.0.1:\(up.port)/hook"}
              down: {kind: http, url: "http://127.0.0.1:\(ScriptedEndpoint.freePort())/hook"}
            """
        let serve = try ServeProcess(config: config)
        var body: [String: Any] = [:]
        #expect(
            ServeProcess.eventually {
                guard let r = try? serve.client().request("GET", "/healthz"), r.status == 200 else { return false }
                body = (try? JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any]) ?? [:]
                // Each drainer probes on its own thread: wait for all three, not the first.
                return (body["sinks"] as? [String: String]) == ["archive": "reachable", "up": "reachable", "down": "unreachable"]
            }, "\(body)")
        #expect(body["status"] as? String == "degraded")
        #expect(
            ServeProcess.eventually {
                let s = (try? CLITests.run(["status", "--config", serve.configPath]))?.out ?? ""
                return s.contains("destination unreachable") && s.contains("    unreachable: ")
            })
        serve.stop()
    }

    static func archiveRecords(_ n: Int) -> [CanonicalRecord] {
        (0..<n).map { i in
            CanonicalRecord(
                kind: "quantity", device: "restored", receiver: "phone", uuid: "replayed-\(i)", type: "steps",
                start: Timestamp(seconds: 1_791_961_260 + Int64(i)), end: Timestamp(seconds: 1_791_961_260 + Int64(i)),
                value: .number(Double(i)), unit: "count")
        }
    }

    /// `replay --sink` while serve runs and phones keep sending: serve journals the replayed
    /// records and delivers them from its own drainer, so the file sink has one writer — every
    /// line whole, every record once.
    @Test func replayBesideARunningServeGoesThroughIt() throws {
        let serve = try ServeProcess(
            config: QueueLimitTests.config(port: 9, queue: "").replacingOccurrences(
                of: "to: [archive, hook]", with: "to: [archive]"))
        let archive = serve.dataDir + "/restore.ndjson"
        let replayed = Self.archiveRecords(3000)
        try Data(CanonicalCodec.encodeLines(replayed)).write(to: URL(fileURLWithPath: archive))
        let sent = LockedSet()
        let port = serve.port
        let traffic = Thread {
            let c = RawHTTPClient(port: port)
            for i in 0..<40 {
                guard let (r, uuids) = try? QueueLimitTests.post(c, i), r.status == 200 else { continue }
                sent.insert(uuids)
            }
        }
        traffic.start()
        let r = try CLITests.run(["replay", archive, "--sink", "archive", "--config", serve.configPath])
        #expect(r.status == 0, "\(r.err)")
        #expect(r.out.contains("serve is running: the records are handed to it"), "\(r.out)")
        #expect(r.out.contains("archive: 3000 record(s) delivered"), "\(r.out)")
        #expect(ServeProcess.eventually(20) { sent.count == 800 })
        let file = serve.dataDir + "/archive.ndjson"
        #expect(
            ServeProcess.eventually(20) {
                ((try? String(contentsOfFile: file, encoding: .utf8))?.split(separator: "\n").count ?? 0) >= 3800
            })
        serve.stop()
        let text = try String(contentsOfFile: file, encoding: .utf8)
        #expect(text.hasSuffix("\n"))
        var seen: [String: Int] = [:]
        for line in text.split(separator: "\n") {
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            let uuid = try #require(object?["uuid"] as? String, "a torn or foreign line: \(line.prefix(120))")
            seen[uuid, default: 0] += 1
        }
        #expect(seen.count == 3800)
        #expect(seen.values.allSatisfy { $0 == 1 }, "\(seen.filter { $0.value > 1 }.prefix(5))")
        #expect(replayed.allSatisfy { seen[$0.uuid] == 1 })
        #expect(sent.snapshot.allSatisfy { seen[$0] == 1 })
    }

    /// With no serve running, replay is the one writer: it holds the data dir's lock while it
    /// delivers, so a serve started meanwhile says so instead of writing beside it.
    @Test func replayWithoutServeHoldsTheDataDirLock() throws {
        let endpoint = try ScriptedEndpoint { _ in
            usleep(300_000)
            return HTTPResponse(status: 200)
        }
        let dir = ServeProcess.makeTempDir("lock")
        let config = """
            listen: 127.0.0.1:0
            data_dir: \(dir)
            receivers:
            \(Vectors.phoneReceiver)
            routes:
              - {from: [phone], to: [hook]}
            sinks:
              hook: {kind: http, url: "\(endpoint.url)", batch: {max_items: 10}}
            """
        try config.write(toFile: dir + ".yaml", atomically: true, encoding: .utf8)
        let archive = dir + "-in.ndjson"
        try Data(CanonicalCodec.encodeLines(Self.archiveRecords(60))).write(to: URL(fileURLWithPath: archive))
        let result = LockedBox<CLITests.Run?>(nil)
        let replay = Thread {
            result.value = try? CLITests.run(["replay", archive, "--sink", "hook", "--config", dir + ".yaml"])
        }
        replay.start()
        #expect(ServeProcess.eventually { !endpoint.requests.isEmpty })
        var refused = ""
        do {
            let serve = try ServeProcess(config: config.replacingOccurrences(of: dir, with: "DATA_DIR"), dataDir: dir)
            serve.stop()
        } catch {
            refused = "\(error)"
        }
        #expect(refused.contains("is using the data dir"), "\(refused)")
        #expect(ServeProcess.eventually(20) { result.value != nil })
        #expect(result.value?.status == 0, "\(result.value?.err ?? "")")
        #expect(result.value?.out.contains("hook: 60 record(s) delivered") == true)
        #expect(endpoint.requests.flatMap(ScriptedEndpoint.uuids).count == 60)
    }
}

final class LockedBox<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var v: T
    init(_ v: T) { self.v = v }
    var value: T {
        get { lock.lock(); defer { lock.unlock() }; return v }
        set { lock.lock(); v = newValue; lock.unlock() }
    }

    func update(_ f: (inout T) -> Void) { lock.lock(); f(&v); lock.unlock() }
}
