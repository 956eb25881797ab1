import Foundation
@testable import Gateway
import HealthgateCore
@testable import HealthgateTesting
@testable import Pipeline
import SinkKit
import Testing

/// A transform's state is committed with the sink's cursor: `healthgate-testserve` runs the
/// `count_distinct` test transform (distinct records per type, a derived record per new one),
/// and is killed with SIGKILL at random moments while phones keep sending. After the last
/// restart, the last count downstream for each type equals the distinct records sent.
@Suite(.serialized) struct StatefulTransformTests {
    /// One route from the phone through `transform` into a file sink.
    static func config(
        port: UInt16, transform: String = "{count_distinct: {}}", file: String = "counts.ndjson",
        maxItems: Int = 500
    ) -> String {
        """
        listen: 127.0.0.1:\(port)
        data_dir: DATA_DIR
        receivers:
        \(Vectors.phoneReceiver)
        routes:
          - {name: counts, from: [phone], transforms: [\(transform)], to: [archive]}
        sinks:
          archive: {kind: file, path: "\(file)", batch: {max_items: \(maxItems), max_wait: 5ms}}
        """
    }

    static func sample(_ uuid: String, type: String) -> String {
        type == "steps"
            ? #"{"uuid":"\#(uuid)","type":"steps","value":12,"unit":"count","start":"2026-10-14T07:00:00Z","end":"2026-10-14T07:01:00Z"}"#
            : CrashTests.sample(uuid)
    }

    @Test func countsSurviveSIGKILLAtRandomMoments() throws {
        let port = ScriptedEndpoint.freePort()
        let config = Self.config(port: port)
        let (dataDir, sent, serve) = try Self.sendThroughKills(config: config, port: port, binary: ServeProcess.testServeBinary) { uuids in
            uuids.enumerated().map { Self.sample($0.element, type: $0.offset % 3 == 0 ? "steps" : "heart_rate") }
        }
        let all = sent.snapshot
        #expect(all.count >= 600, "too little traffic: \(all.count)")
        let expected = [
            "count-steps": all.filter { Int($0.split(separator: "s").last ?? "").map { $0 % 3 == 0 } ?? false }.count,
            "count-heart_rate": all.filter { Int($0.split(separator: "s").last ?? "").map { $0 % 3 != 0 } ?? false }.count
        ]
        var last: [String: Int] = [:]
        let settled = ServeProcess.eventually(60) {
            last = Self.lastCounts(dataDir + "/counts.ndjson")
            return last == expected
        }
        #expect(settled, "downstream \(last), sent \(expected)")
        serve.stop()
    }

    /// `aggregate` (a daily sum of steps, the samples themselves absorbed) under the same
    /// SIGKILLs: the last daily total downstream is exactly 12 × the distinct samples sent —
    /// nothing lost, nothing counted twice, resends and replays included.
    @Test func aggregatesSurviveSIGKILLAtRandomMoments() throws {
        let port = ScriptedEndpoint.freePort()
        let config = Self.config(
            port: port, transform: "{aggregate: {types: [steps], every: day, how: sum, keep_source: false}}",
            file: "daily.ndjson", maxItems: 500)
        let (dataDir, sent, serve) = try Self.sendThroughKills(config: config, port: port, binary: nil) { uuids in
            uuids.map { Self.sample($0, type: "steps") }
        }
        let expected = 12 * sent.snapshot.count
        #expect(expected >= 12 * 600, "too little traffic: \(expected / 12)")
        var last = -1
        let settled = ServeProcess.eventually(60) {
            guard let text = try? String(contentsOfFile: dataDir + "/daily.ndjson", encoding: .utf8) else { return false }
            for line in text.split(separator: "\n") {
                if let o = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                    o["uuid"] as? String == "aggregate:sum:day:steps:2026-10-14T00:00:00", let v = o["value"] as? Double
                {
                    last = Int(v)
                }
            }
            return last == expected
        }
        #expect(settled, "downstream \(last), sent \(expected)")
        serve.stop()
    }

    /// `dedupe` in front of an appending archive under the same SIGKILLs, every body carrying its
    /// 20 new samples and the 20 of the request before (each sample sent twice): every sample
    /// sent is in the archive, and a repeat gets through only from the batch a kill cut (at most
    /// one batch of 50 per kill) — without dedupe, half the archive would be repeats (checked:
    /// 4,240 repeats in 8,500 lines).
    @Test func dedupeSurvivesSIGKILLAtRandomMoments() throws {
        let port = ScriptedEndpoint.freePort()
        let config = Self.config(port: port, transform: "{dedupe: {ttl: 1d}}", file: "once.ndjson", maxItems: 50)
        let (dataDir, sent, serve) = try Self.sendThroughKills(config: config, port: port, binary: nil) { uuids in
            // The request before this one, from its uuids: t<t>-r<i>-s<k> → t<t>-r<i-1>-s<k>.
            let previous = uuids.compactMap { u -> String? in
                let parts = u.split(separator: "-")
                guard parts.count == 3, let i = Int(parts[1].dropFirst()), i > 0 else { return nil }
                return "\(parts[0])-r\(i - 1)-\(parts[2])"
            }
            return (uuids + previous).map { Self.sample($0, type: "steps") }
        }
        let all = sent.snapshot
        #expect(all.count >= 600, "too little traffic: \(all.count)")
        var lines: [String] = []
        let settled = ServeProcess.eventually(60) {
            lines = ServeProcess.ndjson(under: dataDir).compactMap { $0["uuid"] as? String }
            return all.isSubset(of: Set(lines))
        }
        #expect(settled, "\(all.subtracting(lines).count) sample(s) sent are not in the archive")
        let repeats = lines.count - Set(lines).count
        #expect(repeats <= 4 * 50, "\(repeats) repeats in \(lines.count) lines")
        serve.stop()
    }

    /// Three phones send 20-sample bodies (each until it is acknowledged: a request cut by the
    /// kill is sent again, with a new delivery id, so some records reach the journal twice) while
    /// serve is killed with SIGKILL four times at random moments and started again. The data dir,
    /// every uuid acknowledged, and the serve running at the end.
    static func sendThroughKills(
        config: String, port: UInt16, binary: String?,
        samples: @escaping @Sendable ([String]) -> [String]
    ) throws -> (String, LockedSet, ServeProcess) {
        var serve = try ServeProcess(config: config, binary: binary)
        let dataDir = serve.dataDir
        let sent = LockedSet()
        let stop = LockedFlag()
        let group = DispatchGroup()
        for t in 0..<3 {
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                var i = 0
                while !stop.isSet {
                    let uuids = (0..<20).map { "t\(t)-r\(i)-s\($0)" }
                    let body = Vectors.syncBody(samples: samples(uuids))
                    while true {
                        let c = RawHTTPClient(port: port)
                        if let r = try? c.request(
                            "POST", "/hook", headers: LiveServeTests.signedHeaders(body),
                            body: Array(body.utf8)), r.status == 200
                        {
                            break
                        }
                        c.close()
                        usleep(30_000)
                    }
                    sent.insert(uuids)
                    i += 1
                    usleep(15_000) // a steady flow, not a flood: the state is rewritten whole per commit
                }
            }
        }
        for _ in 0..<4 {
            usleep(useconds_t.random(in: 250_000...800_000))
            serve.stop(signal: SIGKILL)
            serve = try ServeProcess(config: config, dataDir: dataDir, binary: binary)
        }
        usleep(300_000)
        stop.set()
        group.wait()
        return (dataDir, sent, serve)
    }

    /// The last count per derived key; every line must be a whole JSON object.
    static func lastCounts(_ path: String) -> [String: Int] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [:] }
        var out: [String: Int] = [:]
        for line in text.split(separator: "\n") {
            guard let o = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                out["torn line"] = (out["torn line"] ?? 0) + 1
                continue
            }
            if o["device"] as? String == "count", let uuid = o["uuid"] as? String, let v = o["value"] as? Double {
                out[uuid] = Int(v)
            }
        }
        return out
    }
}
