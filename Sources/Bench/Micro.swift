import HealthgateCrypto
import CanonicalJSON
import FastJSON
import Foundation
import Gateway
import HealthgateCore
import Pipeline
import SinkKit
import SinkInfluxDB
import Posix

/// `healthgate-bench --micro`: the hot path's stages, one at a time, on one core.
enum Micro {
    static func run(samples: Int, only: String?) {
        let body = BenchMain.makeBody(samples: samples).bytes
        let logger = Logger(component: "micro", sink: StderrLogSink(minimum: .warning))
        let receiver = SynckyReceiver(
            name: "phone", path: "/syncky", maxBodyBytes: 4 << 20,
            auth: Authenticator(kind: .bearer, token: token), hmacSecret: nil, device: nil,
            parsers: ParserPool(), logger: logger)
        let request = HTTPRequest(
            method: "POST", path: "/syncky",
            headers: [
                (name: "X-Syncky-Format", value: "native"),
                (name: "Authorization", value: "Bearer \(token)")
            ], body: body)
        let context = ReceiveContext(now: Timestamp(seconds: 1_791_961_500))
        func time(_ name: String, _ runs: Int = 40, _ f: () -> Void) {
            if let only, !name.contains(only) {
                if name.hasPrefix("receive") || name.hasPrefix("routes") || name.hasPrefix("decode for") { f() } // what later stages read
                return
            }
            let n = Int(ProcessInfo.processInfo.environment["MICRO_RUNS"] ?? "") ?? (only == nil ? runs : 3)
            f()
            let t0 = DispatchTime.now().uptimeNanoseconds
            for _ in 0..<n { f() }
            let ms = Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e6 / Double(n)
            print(String(format: "%-28@ %7.2f ms per body  (%.0f samples/s)", name as NSString, ms, Double(samples) / ms * 1000))
        }
        let parser = JSONParser()
        time("simdjson parse only") { _ = try? parser.parse(body) }
        var lines: [UInt8] = []
        time("receive (parse, map, encode)") {
            if case .accept(let b, _) = receiver.receive(request, context: context) { lines = b.payload }
        }
        // The ingest API's chunk of as many samples (what the side-by-side with Fluent Bit posts).
        let ingestConfig = """
            data_dir: \(NSTemporaryDirectory())healthgate-micro
            receivers:
              app: {kind: ingest, auth: {type: bearer, token: \(token)}, max_body: 4MB}
            """
        let ingest = try! ConfigLoader.load(text: ingestConfig, file: "micro.yaml", environment: [:], logger: logger).receivers[0].receiver
        let ingestRequest = HTTPRequest(
            method: "POST", path: "/v1/ingest", headers: [(name: "Authorization", value: "Bearer \(token)")],
            body: Array(SideBySide.ingestBody(SideBySide.sampleObjects(count: samples)).utf8))
        time("receive, ingest API chunk") {
            guard case .accept(let b, _) = ingest.receive(ingestRequest, context: context), b.count == samples else {
                fatalError("the ingest API did not take the micro chunk")
            }
        }
        let records = CanonicalCodec.decodeLines(lines, parser: parser)
        time("encode canonical NDJSON") { _ = CanonicalCodec.encodeLines(records) }
        time("decode canonical NDJSON (parser)") { _ = CanonicalCodec.decodeLines(lines, parser: parser) }
        // What a drainer does with an entry: its lines made records (each walked once).
        var read: [Record] = []
        time("records of the lines (walked)") { read = Record.records(in: lines) { _, _, _ in }.map(\.0) }
        time("records, device + start read") {
            for (r, _) in Record.records(in: lines, bad: { _, _, _ in }) { _ = r.device; _ = r.start }
        }
        time("records, every field read") {
            for (r, _) in Record.records(in: lines, bad: { _, _, _ in }) { _ = r.canonical }
        }
        time("InfluxDB lines (from the records)") {
            _ = InfluxDBSink.encodeBench(Record.records(in: lines) { _, _, _ in }.map(\.0))
        }
        // The drainer's share for the file sink: its route, then the lines it writes (each
        // journal line as it is, or with what the route changed written anew).
        for transforms in [false, true] {
            let text = BenchMain.config(
                dataDir: NSTemporaryDirectory() + "healthgate-micro", transforms: transforms,
                sinkLine: #"archive: {kind: file, path: "a.ndjson"}"#)
            let topology = try! ConfigLoader.load(text: text, file: "bench.yaml", environment: [:], logger: logger)
            let routes = SinkRoutes(
                routes: topology.routes, sink: "archive", clock: SystemClock(),
                timeZones: SystemTimeZones(), logger: logger)
            let name = transforms ? "filter + convert + tag" : "no transforms"
            var routed: [Record] = []
            time("routes, \(name)") {
                routed = []
                // Moved out one by one, as the drainer takes them: a record still held by the
                // array would be copied by the first transform that changes it.
                var records = Array(Record.records(in: lines, bad: { _, _, _ in }).map(\.0).reversed())
                while let r = records.popLast() { _ = routes.process(r, into: &routed) }
            }
            var out: [UInt8] = []
            time("file lines, \(name)") {
                out.removeAll(keepingCapacity: true)
                for r in routed { r.appendLine(to: &out) }
            }
        }
        _ = read
        // The InfluxDB sink's point index: a request's points noted (a chunk sealed every 50,000).
        let indexDir = NSTemporaryDirectory() + "healthgate-micro-index-\(getpid())"
        try? FileManager.default.createDirectory(atPath: indexDir, withIntermediateDirectories: true)
        let pointIndex = InfluxDBSink.IndexBench(path: indexDir + "/points.sqlite", points: samples)
        time("point index, a request's points") { try! pointIndex.note() }
        try? FileManager.default.removeItem(atPath: indexDir)
        time("HMAC-SHA256") { _ = Crypto.hmacSHA256(key: Array(secret.utf8), Array("1.".utf8), body) }
        print(
            "records: \(records.count), NDJSON bytes: \(lines.count), CanonicalRecord stride: \(MemoryLayout<CanonicalRecord>.stride) bytes"
        )
    }
}
