import CZlib
import CanonicalJSON
import FastJSON
import Foundation
@testable import Gateway
import HealthgateCore
@testable import HealthgateTesting
@testable import HTTPDelivery
@testable import Pipeline
@testable import SinkInfluxDB
import SinkKit
@testable import Sinks
import Posix
import Storage
import Synchronization
import Testing
import Transforms
import YAMLConfig

/// The InfluxDB sink against real InfluxDB 1.x and VictoriaMetrics (Debian packages), and
/// against a scripted endpoint for what they will not do.
@Suite(.serialized) struct InfluxDBSinkTests {
    static func config(_ sink: String) -> String {
        """
        listen: 127.0.0.1:0
        data_dir: DATA_DIR
        receivers:
          phone:
            kind: syncky
            path: /hook
            auth: {type: bearer, token: \(Vectors.token)}
            device: my-iphone
        routes:
          - {name: all, from: ["*"], to: [influx]}
        sinks:
          influx: \(sink)
        """
    }

    static func post(_ serve: ServeProcess, _ body: String) throws -> Int {
        try serve.client().request(
            "POST", "/hook", headers: [("X-Syncky-Format", "native"), ("Authorization", "Bearer \(Vectors.token)")],
            body: Array(body.utf8)
        ).status
    }

    /// Issue 47: `api: v2` against InfluxDB 1.6 (Debian's) is answered 404 for every write. That
    /// is the sink's config, not the records: they used to go to the dead letters with a log line
    /// each while status said "up to date … reachable". Now they wait, the sink shows as failing
    /// (status, /healthz), the log says what to change about once a minute, and once the config
    /// is fixed and reloaded everything arrives.
    @Test func aWrongEndpointKeepsTheRecordsAndSaysTheSinkIsFailing() throws {
        let db = try DatabaseProcess.influxDB()
        let wrong =
            "{kind: influxdb, url: \"\(db.url)\", api: v2, org: home, bucket: health, token: t0123456789, precision: s, "
            + "batch: {max_wait: 10ms}, retry: {initial: 100ms, max: 300ms}}"
        let serve = try ServeProcess(config: Self.config(wrong))
        let samples = (0..<300).map { i in
            #"{"uuid":"w-\#(i)","type":"steps","value":\#(i + 1),"unit":"count","start":"\#(Timestamp(seconds: 1_796_112_000 + Int64(i) * 60).rfc3339())"}"#
        }
        #expect(try Self.post(serve, Vectors.syncBody(samples: samples)) == 200)
        var health: [String: Any] = [:]
        #expect(
            ServeProcess.eventually(15) {
                health = serve.healthz()
                return (health["sinks"] as? [String: String])?["influx"] == "failing"
            }, "\(health)")
        #expect(health["status"] as? String == "degraded")
        Thread.sleep(forTimeInterval: 2) // several tries at 100–300 ms
        let dead = serve.dataDir + "/sinks/influx/dead-letters.ndjson"
        #expect((FileIO.fileSize(dead) ?? 0) == 0, "records were dead-lettered")
        let status = try CLITests.run(["status", "--config", serve.configPath])
        #expect(
            status.out.contains("FAILING") && status.out.contains("404") && status.out.contains("api (v1 for InfluxDB 1.x)"),
            "\(status.out)")
        // The counters agree: what is retried is a part of what waits, not a count of tries.
        #expect(
            status.out.contains("300 record(s) waiting") && status.out.contains("300 of those waiting being retried")
                && !status.out.contains("kept for retry"), "\(status.out)")
        let said = serve.stderrText.split(separator: "\n").filter { $0.contains("404") }
        #expect(!said.isEmpty && said.count <= 3, "\(said.count) lines: \(said.prefix(5))")
        // Fixed, and reloaded: everything arrives, nothing twice.
        let right =
            "{kind: influxdb, url: \"\(db.url)\", api: v1, database: health, precision: s, batch: {max_wait: 10ms}, "
            + "retry: {initial: 100ms, max: 300ms}}"
        try Self.config(right).replacingOccurrences(of: "DATA_DIR", with: serve.dataDir).write(
            toFile: serve.configPath, atomically: true, encoding: .utf8)
        kill(serve.process.processIdentifier, SIGHUP)
        var count = 0
        #expect(
            ServeProcess.eventually(20) {
                count = ((try? db.influxRows("SELECT count(value) FROM steps"))?.first?["count"] as? Int) ?? 0
                return count == 300
            }, "\(count)")
        #expect(
            ServeProcess.eventually(10) {
                let h = serve.healthz()
                return h["status"] as? String == "ok"
            })
    }

    @Test func writesToInfluxDB1AndAResendAddsNoPoint() throws {
        let db = try DatabaseProcess.influxDB()
        let serve = try ServeProcess(
            config: Self.config(
                "{kind: influxdb, url: \"\(db.url)\", api: v1, database: health, precision: s, batch: {max_wait: 10ms}, tags: {person: me}}"
            ))
        let body = Vectors.syncBody(samples: [Vectors.stepsSample, Vectors.sleepSample, Vectors.workoutSample])
        #expect(try Self.post(serve, body) == 200)
        var steps: [[String: Any]] = []
        #expect(
            ServeProcess.eventually(15) {
                steps = (try? db.influxRows("SELECT * FROM steps")) ?? []; return steps.count == 1
            },
            "\(serve.stderrText.suffix(1500)) \((try? db.influxQuery("SHOW DATABASES")) ?? [:])")
        let p = try #require(steps.first)
        #expect(p["time"] as? String == "2026-10-14T07:01:00Z")
        #expect(p["value"] as? Double == 412 || p["value"] as? Int == 412)
        #expect(p["unit"] as? String == "count" && p["device"] as? String == "Apple Watch" && p["source"] as? String == "com.apple.Health")
        #expect(p["phone"] as? String == "d_zsOZnTQUz_juWFVljuOOBQ" && p["person"] as? String == "me")
        var sleep: [[String: Any]] = []
        #expect(
            ServeProcess.eventually {
                sleep = (try? db.influxRows("SELECT * FROM sleep_analysis")) ?? []; return sleep.count == 1
            })
        #expect(sleep.first?["value_name"] as? String == "asleep_core")
        let workout = try db.influxRows("SELECT * FROM workout")
        #expect(workout.first?["activity"] as? String == "running" && workout.first?["distance_m"] != nil)
        // The same samples again: the same points, not new ones.
        #expect(try Self.post(serve, body) == 200)
        #expect(
            ServeProcess.eventually {
                (try? serve.client().request("GET", "/metrics").text.contains(#"healthgate_sink_records_sent_total{sink="influx"} 6"#))
                    == true
            })
        #expect(try db.influxRows("SELECT * FROM steps").count == 1)
        // A deletion from the phone removes the point it names, and nothing else.
        let deletion = Vectors.syncBody(samples: [], deleted: [#"{"uuid": "5E1D0000-0000-4000-8000-000000000001", "type": "steps"}"#])
        #expect(try Self.post(serve, deletion) == 200)
        #expect(ServeProcess.eventually(15) { (try? db.influxRows("SELECT * FROM steps"))?.isEmpty == true })
        #expect(try db.influxRows("SELECT * FROM sleep_analysis").count == 1)
        #expect(try db.influxRows("SELECT * FROM workout").count == 1)
    }

    /// Issue 45: 110,000 samples of one phone whose uuids count up in their first group (so
    /// the point index's sort keys of a chunk differ in three bytes) into a real influxd, with
    /// `serve` as it ships (`HEALTHGATE_BIN`: the release build in `make test`). The release
    /// build's seal threw a garbage error there (a compiler bug: a tail call to memmove left
    /// the error register clobbered) and the process aborted at the second chunk; every point
    /// is delivered and serve stays up.
    @Test func sequentialUUIDsAreAllDeliveredAndServeStaysUp() throws {
        let db = try DatabaseProcess.influxDB()
        let serve = try ServeProcess(
            config: Self.config(
                "{kind: influxdb, url: \"\(db.url)\", api: v1, database: health, precision: s, batch: {max_items: 10000, max_wait: 5ms}}"))
        defer { serve.stop() }
        let total = 110_000, per = 5_000
        for first in stride(from: 1, through: total, by: per) {
            let samples = (first..<min(total + 1, first + per)).map { i in
                #"{"uuid":"\#(String(format: "%08X", i))-0000-4000-8000-000000000001","type":"steps","value":\#(i % 500),"unit":"count","start":"\#(Timestamp(seconds: 1_760_000_000 + Int64(i) * 60).rfc3339())","end":"\#(Timestamp(seconds: 1_760_000_000 + Int64(i) * 60 + 59).rfc3339())"}"#
            }
            let status = try? Self.post(serve, Vectors.syncBody(samples: samples, delivery: UUID().uuidString.lowercased()))
            #expect(status == 200, "serve is gone: \(serve.stderrText.suffix(1200))")
            if status == nil { return }
        }
        var count = 0
        let all = ServeProcess.eventually(60) {
            count = ((try? db.influxRows("SELECT count(value) FROM steps"))?.first?["count"] as? Int) ?? 0
            return count == total || !serve.process.isRunning
        }
        #expect(all && count == total, "\(count) of \(total) points; \(serve.stderrText.suffix(1200))")
        #expect(serve.process.isRunning, "\(serve.stderrText.suffix(2000))")
        #expect(!serve.stderrText.contains("cannot note"), "\(serve.stderrText.suffix(1200))")
    }

    @Test func deletesThroughTheV2API() throws {
        let endpoint = try ScriptedEndpoint { _ in HTTPResponse(status: 204) }
        let s = try sink("http://127.0.0.1:\(endpoint.port)", extra: ", org: home, bucket: health, token: secret")
        let written = PipelineTests.record("w1")
        #expect(s.write(SinkBatch(records: [written])) == .accepted)
        let gone = CanonicalRecord(op: .delete, kind: "quantity", device: written.device, receiver: "r", uuid: "w1", type: "steps")
        #expect(s.write(SinkBatch(records: [gone])) == .accepted)
        let d = try #require(endpoint.requests.last)
        #expect(d.path == "/api/v2/delete" && d.queryParameter("org") == "home" && d.queryParameter("bucket") == "health")
        #expect(d.header("authorization") == "Token secret")
        let body = try #require(try JSONSerialization.jsonObject(with: Data(d.body)) as? [String: String])
        #expect(body["start"] == "2026-10-14T07:01:00Z" && body["stop"] == "2026-10-14T07:01:00.000000001Z")
        #expect(body["predicate"] == #"_measurement="steps" AND phone="phone-1" AND unit="count""#)
        // Written, deleted and written again in one batch: the point stays.
        let requestsBefore = endpoint.requests.count
        #expect(s.write(SinkBatch(records: [written, gone, written])) == .accepted)
        #expect(endpoint.requests.dropFirst(requestsBefore).map(\.path) == ["/api/v2/write", "/api/v2/delete", "/api/v2/write"])
    }

    @Test func writesToVictoriaMetricsThroughTheV2API() throws {
        let vm = try DatabaseProcess.victoriaMetrics()
        let serve = try ServeProcess(
            config: Self.config(
                "{kind: influxdb, url: \"\(vm.url)\", api: v2, org: home, bucket: health, token: t0k, batch: {max_wait: 10ms}}"))
        #expect(try Self.post(serve, Vectors.syncBody(samples: [Vectors.stepsSample])) == 200)
        var series: [[String: Any]] = []
        #expect(
            ServeProcess.eventually(20) {
                series = (try? vm.vmExport(#"{__name__="steps_value"}"#)) ?? []
                return !series.isEmpty
            }, "VictoriaMetrics never showed the point")
        let metric = series.first?["metric"] as? [String: String]
        #expect(metric?["unit"] == "count" && metric?["phone"] == "d_zsOZnTQUz_juWFVljuOOBQ")
        #expect((series.first?["values"] as? [Double])?.first == 412)
        #expect((series.first?["timestamps"] as? [Int])?.first == 1_791_961_260_000)
    }

    func sink(_ url: String, api: String = "v2", extra: String = "") throws -> InfluxDBSink {
        let node = try parseYAML("{kind: influxdb, url: \"\(url)\", api: \(api)\(extra)}", file: "t", environment: [:])
        let dir = ServeProcess.makeTempDir("s")
        let built = try InfluxDBSink.build(name: "influx", node: node, path: "sinks.influx", context: SinkBuildContext(dataDir: dir))
        let opened = try built.open(
            SinkContext(
                name: "influx", dataDir: dir, stateDir: dir + "/sinks/influx", clock: SystemClock(),
                logger: Logger(component: "t", sink: MemoryLogSink())))
        return try #require(opened as? InfluxDBSink)
    }

    /// A body's text, inflated when it is gzip (the sink sends plain to a server on loopback,
    /// as these tests' endpoints are, unless the config asks for gzip).
    static func inflate(_ data: [UInt8]) -> String {
        if !data.starts(with: [0x1F, 0x8B]) { return String(decoding: data, as: UTF8.self) }
        guard case .success(let b) = InfluxReceiver.gunzip(data, limit: 1 << 20) else { return "" }
        return String(decoding: b, as: UTF8.self)
    }

    @Test func speaksEachAPIWithItsAuthAndGzip() throws {
        let endpoint = try ScriptedEndpoint { _ in HTTPResponse(status: 204) }
        let base = "http://127.0.0.1:\(endpoint.port)"
        let records = [PipelineTests.record("a")]
        #expect(
            try sink(base, extra: ", org: home, bucket: health, token: secret, gzip: true").write(SinkBatch(records: records)) == .accepted)
        #expect(try sink(base, api: "v3", extra: ", database: health, token: secret").write(SinkBatch(records: records)) == .accepted)
        #expect(
            try sink(base, api: "v1", extra: ", database: health, retention_policy: week, username: u, password: p, gzip: false")
                .write(SinkBatch(records: records)) == .accepted)
        let r = endpoint.requests
        #expect(r[0].path == "/api/v2/write" && r[0].queryParameter("org") == "home" && r[0].queryParameter("bucket") == "health")
        #expect(r[0].header("authorization") == "Token secret" && r[0].header("content-encoding") == "gzip")
        #expect(Self.inflate(r[0].body) == "steps,phone=phone-1,unit=count value=412 1791961260000000000\n")
        #expect(r[1].path == "/api/v3/write_lp" && r[1].queryParameter("db") == "health" && r[1].header("authorization") == "Bearer secret")
        #expect(r[2].path == "/write" && r[2].queryParameter("rp") == "week" && r[2].queryParameter("precision") == "n")
        #expect(r[2].header("authorization") == "Basic dTpw")
        #expect(String(decoding: r[2].body, as: UTF8.self).hasPrefix("steps,"))
        #expect(r[1].header("content-encoding") == nil && String(decoding: r[1].body, as: UTF8.self).hasPrefix("steps,"))
    }

    @Test func gzipsUnlessTheServerIsOnThisMachine() throws {
        for url in [
            "http://localhost:8086", "http://LOCALHOST", "http://127.0.0.1:8086/", "http://127.8.9.10",
            "https://[::1]:8086", "http://u:p@127.0.0.1:8086"
        ] {
            #expect(InfluxDBSink.isLoopback(url: url), "\(url)")
        }
        for url in [
            "http://influxdb:8086", "https://eu-central-1-1.aws.cloud2.influxdata.com", "http://192.168.1.20:8086",
            "http://127.0.0.1.example.com", "http://localhost.example.com", "http://[::2]:8086", "http://10.0.0.1",
            "http://x/127.0.0.1", "not a url"
        ] {
            #expect(!InfluxDBSink.isLoopback(url: url), "\(url)")
        }
        // What a user sees: the default sends plain to loopback; `gzip: true` still gzips there.
        let endpoint = try ScriptedEndpoint { _ in HTTPResponse(status: 204) }
        let base = "http://127.0.0.1:\(endpoint.port)"
        let records = [PipelineTests.record("a")]
        #expect(try sink(base, api: "v1", extra: ", database: health").write(SinkBatch(records: records)) == .accepted)
        #expect(try sink(base, api: "v1", extra: ", database: health, gzip: true").write(SinkBatch(records: records)) == .accepted)
        let r = endpoint.requests
        #expect(r[0].header("content-encoding") == nil && String(decoding: r[0].body, as: UTF8.self).hasPrefix("steps,"))
        #expect(r[1].header("content-encoding") == "gzip" && r[1].body.starts(with: [0x1F, 0x8B]))
    }

    @Test func refusesOnlyTheLinesInfluxDBRefusesAndKeepsTheRestMoving() throws {
        let endpoint = try ScriptedEndpoint { req in
            Self.inflate(req.body).contains("poison")
                ? HTTPResponse(status: 400, body: Array(#"{"error":"partial write: field type conflict"}"#.utf8))
                : HTTPResponse(status: 204)
        }
        let s = try sink("http://127.0.0.1:\(endpoint.port)", extra: ", org: o, bucket: b, token: t")
        var records = (0..<8).map { PipelineTests.record("r\($0)") }
        records[5].type = "poison"
        var characteristic = CanonicalRecord(
            kind: "characteristic", device: "d", receiver: "r", uuid: "characteristic:blood_type",
            type: "characteristic", value: .string("a_positive"))
        characteristic.code = 1
        records.append(characteristic)
        records.append(CanonicalRecord(op: .delete, kind: "quantity", device: "d", receiver: "r", uuid: "gone", type: "steps"))
        guard case .perRecord(let outcomes) = s.write(SinkBatch(records: records)) else {
            Issue.record("expected per-record outcomes")
            return
        }
        for (i, o) in outcomes.enumerated() {
            switch i {
            case 5:
                #expect(
                    o == .rejected(reason: "400 from http://127.0.0.1:\(endpoint.port)/api/v2/write: partial write: field type conflict"))
            case 8: #expect(o == .rejected(reason: "a characteristic without a start time has no place in a time series"))
            case 9:
                // A delete of a point this sink never wrote has nothing to do.
                #expect(o == .accepted)
            default: #expect(o == .accepted, "record \(i)")
            }
        }
        // 401 keeps everything and says what to fix.
        endpoint.answer { _ in HTTPResponse(status: 401) }
        guard case .keep(let why, _) = s.write(SinkBatch(records: [PipelineTests.record("x")])) else {
            Issue.record("401 must keep")
            return
        }
        #expect(why.contains("sinks.influx.token"))
    }

    /// Every status class InfluxDB answers with, against a scripted endpoint. (A 429 or 503
    /// once lost its Retry-After on the way out of the sink; this caught it.)
    @Test(arguments: [
        (500, "keep"), (502, "keep"), (503, "keep-after"), (429, "keep-after"), (401, "keep"), (403, "keep"),
        (400, "reject"), (404, "keep")
    ])
    func handlesEveryStatusClass(_ status: Int, _ expected: String) throws {
        let endpoint = try ScriptedEndpoint { _ in
            HTTPResponse(status: status, headers: status == 503 || status == 429 ? [HTTPHeader("Retry-After", "12")] : [])
        }
        let s = try sink("http://127.0.0.1:\(endpoint.port)", extra: ", org: o, bucket: b, token: t")
        let result = s.write(SinkBatch(records: [PipelineTests.record("one")]))
        switch (expected, result) {
        case ("keep", .keep(_, let after)): #expect(after == nil)
        case ("keep-after", .keep(_, let after)): #expect(after == 12)
        case ("reject", .perRecord(let o)):
            if case .rejected(let why) = o[0] { #expect(why.hasPrefix("\(status) from")) } else { Issue.record("\(o)") }
        default: Issue.record("\(status): expected \(expected), got \(result)")
        }
    }

    @Test func halvesWhatInfluxDBFindsTooLarge() throws {
        let endpoint = try ScriptedEndpoint { r in
            Self.inflate(r.body).split(separator: "\n").count > 2 ? HTTPResponse(status: 413) : HTTPResponse(status: 204)
        }
        let s = try sink("http://127.0.0.1:\(endpoint.port)", extra: ", org: o, bucket: b, token: t")
        #expect(s.write(SinkBatch(records: (0..<7).map { PipelineTests.record("r\($0)") })) == .accepted)
        let written = endpoint.requests.filter { Self.inflate($0.body).split(separator: "\n").count <= 2 }
        #expect(written.reduce(0) { $0 + Self.inflate($1.body).split(separator: "\n").count } == 7)
    }

    /// Two requests in flight, answered out of order: the first request's lines are held until
    /// the second request is in, answered at once, and then refused for now (503). The sink
    /// says every record waits — the drainer's cursor moves past none of them, not even those
    /// the second request got in — and the next write, answered, takes them all. Then the other
    /// way round: the first taken, the second refused line by line (400 for a marked line
    /// only): just that line is rejected, in its place.
    @Test func requestsInFlightAreTakenInOrderWhateverOrderTheyAreAnswered() throws {
        let state = Mutex<(secondIn: Bool, overlapped: Bool, mode: Int)>((false, false, 0))
        // Each connection on a thread of its own: holding the first request holds nothing else.
        let endpoint = ThreadedEndpoint { r in
            let body = Self.inflate(r.body)
            let mode = state.withLock { $0.mode }
            if body.split(separator: "\n").count == InfluxDBSink.linesPerRequest {
                // The first request: held until the second is in (at most 10 s).
                for _ in 0..<1000 where !state.withLock({ $0.secondIn }) { usleep(10_000) }
                state.withLock { $0.overlapped = $0.secondIn }
                return HTTPResponse(status: mode == 0 ? 503 : 204)
            }
            state.withLock { $0.secondIn = true }
            if mode == 1, body.contains("marked") {
                return HTTPResponse(status: 400, body: Array(#"{"error":"partial write: bad line"}"#.utf8))
            }
            return HTTPResponse(status: 204)
        }
        let s = try sink("http://127.0.0.1:\(endpoint.port)", extra: ", org: o, bucket: b, token: t")
        let records = (0..<(InfluxDBSink.linesPerRequest + 10)).map { PipelineTests.record("r\($0)") }
        guard case .keep = s.write(SinkBatch(records: records)) else {
            Issue.record("a batch whose first request was refused for now must wait whole")
            return
        }
        #expect(state.withLock { $0.overlapped }, "the second request went out while the first was unanswered")
        state.withLock { $0 = (false, false, 2) }
        #expect(s.write(SinkBatch(records: records)) == .accepted)

        state.withLock { $0 = (false, false, 1) }
        var marked = records
        marked[InfluxDBSink.linesPerRequest + 3] = PipelineTests.record("m", type: "marked")
        guard case .perRecord(let outcomes) = s.write(SinkBatch(records: marked)) else {
            Issue.record("one refused line makes per-record outcomes")
            return
        }
        #expect(state.withLock { $0.overlapped })
        for (i, o) in outcomes.enumerated() {
            if i == InfluxDBSink.linesPerRequest + 3 {
                guard case .rejected = o else { Issue.record("the marked line is rejected, not \(o)"); continue }
            } else {
                #expect(o == .accepted, "record \(i)")
            }
        }
    }

    static func row(_ uuid: String, _ series: String, time: Int64, device: String = "phone-1", part: Int? = nil) -> PointIndex.Row {
        PointIndex.Row(device: device, uuid: uuid, part: part, series: ArraySlice(Array(series.utf8)), timeNanos: time)
    }

    /// The point indexes of earlier versions (one table, `points`; then one keyed table,
    /// `record_points`) are still read and cleaned: a record written before the upgrade can be
    /// deleted after it. New points go to the chunks, a series stored once however many points
    /// it has.
    @Test func thePointIndexReadsAndCleansTheTablesOfEarlierVersions() throws {
        let path = ServeProcess.makeTempDir("pi") + "/points.sqlite"
        do {
            let old = try SQLite(path: path)
            try old.execute(
                """
                CREATE TABLE points (device TEXT NOT NULL, uuid TEXT NOT NULL, part INTEGER NOT NULL,
                    measurement TEXT NOT NULL, tags TEXT NOT NULL, time INTEGER NOT NULL, PRIMARY KEY (device, uuid, part))
                """)
            try old.execute(
                "INSERT INTO points VALUES (?, ?, ?, ?, ?, ?)",
                [.text("ph"), .text("old"), .int(-1), .text("steps"), .text(PointIndex.pack([("unit", "count")])), .int(7)])
            try old.execute(
                """
                CREATE TABLE series (id INTEGER PRIMARY KEY, measurement TEXT NOT NULL, tags TEXT NOT NULL, UNIQUE (measurement, tags))
                """)
            try old.execute(
                """
                CREATE TABLE record_points (device TEXT NOT NULL, uuid TEXT NOT NULL, part INTEGER NOT NULL,
                    series INTEGER NOT NULL, time INTEGER NOT NULL, PRIMARY KEY (device, uuid, part)) WITHOUT ROWID
                """)
            try old.execute(
                "INSERT INTO series VALUES (1, 'heart_rate', ?)", [.text(PointIndex.pack([("phone", "ph"), ("unit", "count/min")]))])
            try old.execute("INSERT INTO record_points VALUES ('ph', 'keyed', -1, 1, 8)")
        }
        let index = PointIndex(path: path)
        #expect(
            try index.points(device: "ph", uuid: "old") == [PointIndex.Point(measurement: "steps", tags: [("unit", "count")], timeNanos: 7)]
        )
        let point = PointIndex.Point(measurement: "heart_rate", tags: [("phone", "ph"), ("unit", "count/min")], timeNanos: 9)
        #expect(
            try index.points(device: "ph", uuid: "keyed") == [PointIndex.Point(measurement: "heart_rate", tags: point.tags, timeNanos: 8)])
        try index.record([
            Self.row("new", "heart_rate,phone=ph,unit=count/min", time: 9), Self.row("new2", "heart_rate,phone=ph,unit=count/min", time: 9)
        ])
        #expect(try index.points(device: "phone-1", uuid: "new") == [point])
        try index.remove(device: "ph", uuid: "old")
        try index.remove(device: "ph", uuid: "keyed")
        #expect(try index.points(device: "ph", uuid: "old").isEmpty)
        #expect(try index.points(device: "ph", uuid: "keyed").isEmpty)
        index.close()
        let db = try SQLite(path: path)
        #expect(try db.query("SELECT count(*) FROM series").first?.first?.int == 1)
        #expect(try db.query("SELECT count(*) FROM points").first?.first?.int == 0)
        #expect(try db.query("SELECT count(*) FROM record_points").first?.first?.int == 0)
    }

    /// The sealed chunks and, for each, whether its points are in key order.
    static func sealedChunks(_ path: String) throws -> [Int64] {
        let db = try SQLite(path: path)
        var out: [Int64] = []
        for row in try db.query("SELECT chunk, keys FROM psealed ORDER BY chunk") {
            let keys = (row[1].blob ?? []).withUnsafeBytes { b in
                stride(from: PackedPoints.headSize, to: b.count, by: PackedPoints.SortedKeys.size).map {
                    b.loadUnaligned(fromByteOffset: $0, as: Int64.self)
                }
            }
            #expect(!keys.isEmpty)
            #expect(keys == keys.sorted(), "chunk \(row[0].int ?? -1) is sorted by key")
            out.append(row[0].int ?? -1)
        }
        return out
    }

    /// A request's points are appended to the open chunk as one packed row (a B-tree keyed by
    /// random uuids made every commit rewrite a page per point, and a row a point cost a third of
    /// the drain); the write that fills a chunk sorts its points by key into one blob, and it is
    /// never written again but to mark a point removed. Lookups find a key in every chunk, each
    /// point once, also the old point of a record written again with another time; a delete
    /// forgets them all, and all of it holds across a reopen.
    @Test func thePointIndexIsALogOfChunksIndexedWhenFull() throws {
        let path = ServeProcess.makeTempDir("pi") + "/points.sqlite"
        var index = PointIndex(path: path, chunkRows: 3)
        try index.record([Self.row("a", "steps,unit=count", time: 1), Self.row("b", "steps,unit=count", time: 2)])
        // Not full: not sorted, one run.
        #expect(try Self.sealedChunks(path).isEmpty)
        #expect(try SQLite(path: path).query("SELECT count(*) FROM pruns").first?.first?.int == 1)
        // A new index's pages are 16 KiB: a run of 5,000 points is 18 pages in the WAL, not 70.
        #expect(try SQLite(path: path).query("PRAGMA page_size").first?.first?.int == 16_384)
        try index.record([
            Self.row("c", "hr,unit=bpm", time: 3), Self.row("a", "steps,unit=count", time: 1),
            Self.row("d", "hr,unit=bpm", time: 4, part: 0), Self.row("d", "hr,unit=bpm", time: 5, part: 1)
        ])
        #expect(try Self.sealedChunks(path) == [1])
        // "a" again, at another time, into the next chunk; "a" written twice at 1 is one point.
        try index.record([Self.row("a", "steps,unit=count", time: 6)])
        let steps = { (t: Int64) in PointIndex.Point(measurement: "steps", tags: [("unit", "count")], timeNanos: t) }
        #expect(try index.points(device: "phone-1", uuid: "a") == [steps(1), steps(6)])
        #expect(try index.points(device: "phone-1", uuid: "d").map(\.timeNanos) == [4, 5])
        #expect(try index.points(device: "other", uuid: "a").isEmpty)
        index.close()
        index = PointIndex(path: path, chunkRows: 3)
        #expect(try index.points(device: "phone-1", uuid: "a") == [steps(1), steps(6)])
        try index.remove(device: "phone-1", uuid: "a")
        #expect(try index.points(device: "phone-1", uuid: "a").isEmpty)
        #expect(try index.points(device: "phone-1", uuid: "b") == [steps(2)])
        try index.record((0..<61).map { Self.row("x\($0)", "steps,unit=count", time: Int64($0)) })
        #expect(try Self.sealedChunks(path) == [1, 2])
        for k in [0, 17, 60] { #expect(try index.points(device: "phone-1", uuid: "x\(k)") == [steps(Int64(k))]) }
        try index.remove(device: "phone-1", uuid: "x17")
        #expect(try index.points(device: "phone-1", uuid: "x17").isEmpty)
        #expect(try index.points(device: "phone-1", uuid: "x16") == [steps(16)])
        index.close()
    }

    /// Runs that queued while the one before was written are noted together (`record(runs:)`:
    /// one transaction, each its own run): every point found as if noted one run at a time,
    /// across the seal that the runs together fill, and a removal among them.
    @Test func runsNotedTogetherAreFoundAsIfNotedOneByOne() throws {
        let path = ServeProcess.makeTempDir("pi") + "/points.sqlite"
        var index = PointIndex(path: path, chunkRows: 5)
        var runs: [[PointIndex.Row]] = []
        for r in 0..<4 {
            let series = r % 2 == 0 ? "steps,unit=count" : "hr,unit=bpm"
            runs.append((0..<3).map { (p: Int) -> PointIndex.Row in Self.row("u\(r)-\(p)", series, time: Int64(r * 10 + p)) })
        }
        try index.record(runs: Array(runs[..<3]))
        #expect(try Self.sealedChunks(path) == [1], "nine points fill a chunk of five: sealed once")
        try index.record(runs: [runs[3], []])
        try index.remove(device: "phone-1", uuid: "u1-1")
        index.close()
        index = PointIndex(path: path, chunkRows: 5)
        for r in 0..<4 {
            for p in 0..<3 {
                let expected = r == 1 && p == 1 ? [] : [Int64(r * 10 + p)]
                #expect(try index.points(device: "phone-1", uuid: "u\(r)-\(p)").map(\.timeNanos) == expected, "u\(r)-\(p)")
            }
        }
        index.close()
    }

    /// A point removed stays removed: marked where it lies in its run, left out of the keys when
    /// its chunk is sealed later, and found by no lookup after the index is opened again.
    @Test func aRemovedPointStaysRemovedAcrossASealAndAReopen() throws {
        let path = ServeProcess.makeTempDir("pi") + "/points.sqlite"
        var index = PointIndex(path: path, chunkRows: 4)
        try index.record([Self.row("gone", "steps,unit=count", time: 1), Self.row("kept", "steps,unit=count", time: 2)])
        try index.remove(device: "phone-1", uuid: "gone")
        try index.record([Self.row("more", "steps,unit=count", time: 3), Self.row("other", "steps,unit=count", time: 4)])
        #expect(try Self.sealedChunks(path) == [1])
        let keys = try SQLite(path: path).query("SELECT keys FROM psealed").first?.first?.blob ?? []
        #expect(keys.count == PackedPoints.headSize + 3 * PackedPoints.SortedKeys.size, "the removed point is not among the keys")
        try index.remove(device: "phone-1", uuid: "more")
        index.close()
        index = PointIndex(path: path, chunkRows: 4)
        #expect(try index.points(device: "phone-1", uuid: "gone").isEmpty)
        #expect(try index.points(device: "phone-1", uuid: "more").isEmpty)
        #expect(try index.points(device: "phone-1", uuid: "kept").map(\.timeNanos) == [2])
        #expect(try index.points(device: "phone-1", uuid: "other").map(\.timeNanos) == [4])
        index.close()
    }

    /// Points of more series than the index keeps at hand, taken in turn (as a body's types
    /// come), and series that differ in one byte or in length only, each keep their own series —
    /// across runs, and once the index is opened again.
    @Test func pointsOfManySeriesTakenInTurnKeepTheirOwn() throws {
        let path = ServeProcess.makeTempDir("pi") + "/points.sqlite"
        var index = PointIndex(path: path, chunkRows: 7)
        let series = (0..<11).map { "m\($0 % 3),unit=u\($0)" } + ["m0,unit=u1x", "m0,unit=u"]
        var rows: [PointIndex.Row] = []
        for i in 0..<(series.count * 3) { rows.append(Self.row("p\(i)", series[i % series.count], time: Int64(i))) }
        try index.record(Array(rows[..<20]))
        try index.record(Array(rows[20...]))
        func check() throws {
            for (i, row) in rows.enumerated() {
                let parsed = PointIndex.parseSeries(row.series)
                #expect(
                    try index.points(device: "phone-1", uuid: "p\(i)")
                        == [PointIndex.Point(measurement: parsed.measurement, tags: parsed.tags, timeNanos: Int64(i))], "p\(i)")
            }
        }
        try check()
        index.close()
        index = PointIndex(path: path, chunkRows: 7)
        try check()
        try index.record([Self.row("late", series[12], time: 99)])
        #expect(try index.points(device: "phone-1", uuid: "late").map(\.tags.first?.1) == ["u"])
        index.close()
    }

    /// An open chunk that is full when the index opens (the process that filled it stopped
    /// before sealing it) is sealed then.
    @Test func aFullOpenChunkIsSealedWhenTheIndexOpens() throws {
        let path = ServeProcess.makeTempDir("pi") + "/points.sqlite"
        var index = PointIndex(path: path, chunkRows: 3)
        try index.record([Self.row("a", "steps,unit=count", time: 1), Self.row("b", "steps,unit=count", time: 2)])
        index.close()
        index = PointIndex(path: path, chunkRows: 2)
        #expect(try index.points(device: "phone-1", uuid: "b").map(\.timeNanos) == [2])
        let db = try SQLite(path: path)
        #expect(try db.query("SELECT id, sealed FROM point_chunks ORDER BY id").map { $0.map { $0.int ?? -1 } } == [[1, 1], [2, 0]])
        index.close()
    }

    /// A sealed chunk's keys are sorted by key, then by run and place (the order they are read
    /// in): the radix sort gives what a comparison sort of the three does, negative keys, keys
    /// alike in some bytes and keys met twice included.
    @Test func aSealedChunksKeysAreSortedAsTheComparisonSortWould() {
        var rng = SystemRandomNumberGenerator()
        for n in [0, 1, 2, 7, 1_000, 50_000] {
            var order: [(key: Int64, run: UInt32, index: UInt32)] = []
            for i in 0..<n {
                let key: Int64 =
                    switch i % 4 {
                    case 0: Int64.random(in: .min ... .max, using: &rng)
                    case 1: Int64.random(in: -300...300, using: &rng) // high bytes alike, both signs
                    case 2: order.isEmpty ? 5 : order[Int.random(in: 0..<order.count, using: &rng)].key // met again
                    default: Int64.random(in: 0...Int64(1) << 40, using: &rng) << 20 // low bytes alike
                    }
                order.append((key, UInt32(i / 100), UInt32(i % 100)))
            }
            let expected = order.sorted { ($0.key, $0.run, $0.index) < ($1.key, $1.run, $1.index) }
            PointIndex.radixSortByKey(&order)
            #expect(order.elementsEqual(expected) { $0 == $1 }, "n = \(n)")
        }
    }

    /// A UUID's text is stored as its 16 bytes (and its case), anything else as text: the same
    /// UUID in upper and in lower case, in mixed case, and a uuid that is no UUID are four keys,
    /// each found alone, on one device and not on another.
    /// A UUID's text is read eight digits to a word (`StoredKey.hex8`): as a digit-by-digit
    /// reading reads it, for UUIDs in either case, mixed ones, and every byte value anywhere.
    @Test func uuidTextsAreReadAsADigitByDigitReadingReadsThem() {
        func reference(_ t: [UInt8]) -> [UInt64]? {
            guard t.count == 36, t[8] == 0x2D, t[13] == 0x2D, t[18] == 0x2D, t[23] == 0x2D else { return nil }
            var w0: UInt64 = 0, w1: UInt64 = 0, n = 0
            var lower = false, upper = false
            for (i, c) in t.enumerated() where ![8, 13, 18, 23].contains(i) {
                let d: UInt64
                switch c {
                case 0x30...0x39: d = UInt64(c - 0x30)
                case 0x61...0x66: d = UInt64(c - 0x57); lower = true
                case 0x41...0x46: d = UInt64(c - 0x37); upper = true
                default: return nil
                }
                if n < 16 { w0 = w0 << 4 | d } else { w1 = w1 << 4 | d }
                n += 1
            }
            if lower && upper { return nil }
            return [w0, w1, upper ? 1 : 0]
        }
        var x: UInt64 = 0x2545_F491_4F6C_DD1D
        func next() -> UInt64 {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17
            return x
        }
        let hex = Array("0123456789abcdef".utf8)
        var mismatches: [String] = [], read = 0
        for round in 0..<100_000 {
            var t = (0..<36).map { i -> UInt8 in [8, 13, 18, 23].contains(i) ? 0x2D : hex[Int(next() % 16)] }
            switch round % 5 {
            case 1: t = t.map { $0 >= 0x61 ? $0 - 0x20 : $0 } // upper case
            case 2: t[Int(next() % 36)] = UInt8(truncatingIfNeeded: next()) // any byte anywhere
            case 3: if let i = t.firstIndex(where: { $0 >= 0x61 }) { t[i] -= 0x20 } // mixed case
            case 4: t[Int(next() % 36)] = [0x2F, 0x3A, 0x40, 0x47, 0x60, 0x67, 0x80, 0xC0, 0xFF, 0x00][Int(next() % 10)]
            default: break
            }
            let ours = t.withUnsafeBufferPointer { PointIndex.StoredKey.parse($0) }
            let expected = reference(t)
            if expected != nil { read += 1 }
            if ours.map({ [$0.0.bigEndian, $0.1.bigEndian, UInt64($0.2)] }) != expected {
                mismatches.append(String(decoding: t, as: UTF8.self))
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(5))")
        #expect(read > 40_000)
    }

    @Test func uuidsAreStoredCompactlyAndStayApart() throws {
        let lower = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", upper = lower.uppercased()
        let mixed = "0A1B2C3D-4e5f-4a6b-8c7d-9e0f1a2b3c4d", other = "hae-0a1b2c3d"
        #expect(PointIndex.StoredKey(uuid: lower).bytes != nil && PointIndex.StoredKey(uuid: upper).bytes != nil)
        #expect(PointIndex.StoredKey(uuid: mixed).bytes == nil && PointIndex.StoredKey(uuid: other).bytes == nil)
        #expect(PointIndex.StoredKey(uuid: lower).key == 0x0a1b_2c3d_4e5f_4a6b)
        #expect(
            PointIndex.StoredKey(uuid: lower).bytes.map { [$0.0.bigEndian, $0.1.bigEndian] } == [
                0x0a1b_2c3d_4e5f_4a6b, 0x8c7d_9e0f_1a2b_3c4d
            ])
        // Every digit's place is read: a byte that is no hex digit at any of them keeps the uuid as text.
        for i in 0..<36 where ![8, 13, 18, 23].contains(i) {
            var b = Array(lower.utf8)
            b[i] = UInt8(ascii: "g")
            #expect(PointIndex.StoredKey(uuid: String(decoding: b, as: UTF8.self)).bytes == nil, "\(i)")
        }
        // Read from a journal line's bytes (the sink makes no string of a UUID), the same keys.
        for var text in [lower, upper, mixed, other] {
            let (a, b) = (PointIndex.StoredKey(uuid: text), text.withUTF8 { PointIndex.StoredKey(utf8: $0) })
            #expect(a.key == b.key && a.bytes.map { [$0.0, $0.1, UInt64($0.2)] } == b.bytes.map { [$0.0, $0.1, UInt64($0.2)] }, "\(text)")
        }
        // In a sealed chunk (found by a search of its blob in place) and in the open one's runs.
        for chunkRows in [3, 100] {
            let path = ServeProcess.makeTempDir("pi") + "/points.sqlite"
            let index = PointIndex(path: path, chunkRows: chunkRows)
            let uuids = [lower, upper, mixed, other]
            try index.record(uuids.enumerated().map { Self.row($1, "steps,unit=count", time: Int64($0)) })
            try index.record([Self.row("zz-after", "steps,unit=count", time: 9, device: "phone-2")])
            #expect(try Self.sealedChunks(path) == (chunkRows == 3 ? [1] : []))
            for (t, u) in uuids.enumerated() {
                #expect(try index.points(device: "phone-1", uuid: u).map(\.timeNanos) == [Int64(t)], "\(u)")
                #expect(try index.points(device: "phone-2", uuid: u).isEmpty)
            }
            try index.remove(device: "phone-1", uuid: upper)
            try index.remove(device: "phone-1", uuid: other)
            #expect(try index.points(device: "phone-1", uuid: upper).isEmpty)
            #expect(try index.points(device: "phone-1", uuid: other).isEmpty)
            #expect(try index.points(device: "phone-1", uuid: lower).map(\.timeNanos) == [0])
            #expect(try index.points(device: "phone-1", uuid: mixed).map(\.timeNanos) == [2])
            #expect(try index.points(device: "phone-2", uuid: "zz-after").map(\.timeNanos) == [9])
            index.close()
        }
    }

    /// The chunks of the version before the packing (`hchunk_<n>`: a row a point, indexed by key
    /// when sealed) are read and cleaned after the upgrade; their open chunk is sealed as it is
    /// (indexed by key), and new points go to packed chunks.
    @Test func theChunksOfARowAPointAreStillRead() throws {
        let path = ServeProcess.makeTempDir("pi") + "/points.sqlite"
        let uuid = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
        do {
            let old = try SQLite(path: path)
            try old.execute(
                "CREATE TABLE series (id INTEGER PRIMARY KEY, measurement TEXT NOT NULL, tags TEXT NOT NULL, UNIQUE (measurement, tags))")
            try old.execute("CREATE TABLE devices (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)")
            try old.execute(
                "CREATE TABLE point_chunks (id INTEGER PRIMARY KEY, rows INTEGER NOT NULL, sealed INTEGER NOT NULL, hashed INTEGER NOT NULL DEFAULT 1)"
            )
            try old.execute("INSERT INTO series VALUES (1, 'steps', ?)", [.text(PointIndex.pack([("unit", "count")]))])
            try old.execute("INSERT INTO devices VALUES (1, 'ph')")
            let stored = PointIndex.StoredKey(uuid: uuid)
            for (id, sealed) in [(1, 1), (2, 0)] {
                try old.execute(
                    "CREATE TABLE hchunk_\(id) (key INTEGER NOT NULL, device INTEGER NOT NULL, uuid NOT NULL, part INTEGER NOT NULL, series INTEGER NOT NULL, time INTEGER NOT NULL)"
                )
                try old.execute(
                    "INSERT INTO hchunk_\(id) VALUES (?, 1, ?, -1, 1, ?)", [.int(stored.key), stored.value(text: uuid), .int(Int64(id))])
                try old.execute(
                    "INSERT INTO hchunk_\(id) VALUES (?, 1, ?, -1, 1, ?)",
                    [.int(PointIndex.StoredKey(uuid: "text\(id)").key), .text("text\(id)"), .int(Int64(10 + id))])
                try old.execute("INSERT INTO point_chunks VALUES (?, 2, ?, 1)", [.int(Int64(id)), .int(Int64(sealed))])
            }
            try old.execute("CREATE INDEX hchunk_1_key ON hchunk_1 (key)")
        }
        let index = PointIndex(path: path, chunkRows: 100)
        let steps = { (t: Int64) in PointIndex.Point(measurement: "steps", tags: [("unit", "count")], timeNanos: t) }
        #expect(try index.points(device: "ph", uuid: uuid) == [steps(1), steps(2)])
        #expect(try index.points(device: "ph", uuid: "text2") == [steps(12)])
        try index.record([Self.row(uuid, "steps,unit=count", time: 9, device: "ph")])
        #expect(try index.points(device: "ph", uuid: uuid) == [steps(1), steps(2), steps(9)])
        try index.remove(device: "ph", uuid: uuid)
        #expect(try index.points(device: "ph", uuid: uuid).isEmpty)
        #expect(try index.points(device: "ph", uuid: "text1") == [steps(11)])
        index.close()
        let db = try SQLite(path: path)
        #expect(
            try db.query("SELECT id, sealed, hashed FROM point_chunks ORDER BY id").map { $0.map { $0.int ?? -1 } }
                == [[1, 1, 1], [2, 1, 1], [3, 0, 2]])
        #expect(try db.query("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'hchunk_2_key'").first?.first?.int == 1)
        #expect(try db.query("SELECT count(*) FROM hchunk_1").first?.first?.int == 1)
        // An index made with SQLite's default pages keeps them (only a new file takes 16 KiB).
        #expect(try db.query("PRAGMA page_size").first?.first?.int == 4_096)
    }

    /// The chunks of the version before the hash (`chunk_<n>`, indexed by device and uuid, and
    /// `point_chunks` without its `hashed` column) are read and cleaned after the upgrade; their
    /// open chunk is sealed as it is, and new points go to hashed chunks.
    @Test func theChunksOfTheVersionBeforeTheHashAreStillRead() throws {
        let path = ServeProcess.makeTempDir("pi") + "/points.sqlite"
        do {
            let old = try SQLite(path: path)
            try old.execute(
                "CREATE TABLE series (id INTEGER PRIMARY KEY, measurement TEXT NOT NULL, tags TEXT NOT NULL, UNIQUE (measurement, tags))")
            try old.execute("CREATE TABLE point_chunks (id INTEGER PRIMARY KEY, rows INTEGER NOT NULL, sealed INTEGER NOT NULL)")
            try old.execute("INSERT INTO series VALUES (1, 'steps', ?)", [.text(PointIndex.pack([("unit", "count")]))])
            for (id, sealed) in [(1, 1), (2, 0)] {
                try old.execute(
                    "CREATE TABLE chunk_\(id) (device TEXT NOT NULL, uuid TEXT NOT NULL, part INTEGER NOT NULL, series INTEGER NOT NULL, time INTEGER NOT NULL)"
                )
                try old.execute("INSERT INTO chunk_\(id) VALUES ('ph', ?, -1, 1, ?)", [.text("old\(id)"), .int(Int64(id))])
                try old.execute("INSERT INTO point_chunks VALUES (?, 1, ?)", [.int(Int64(id)), .int(Int64(sealed))])
            }
            try old.execute("CREATE INDEX chunk_1_key ON chunk_1 (device, uuid)")
        }
        let index = PointIndex(path: path, chunkRows: 100)
        let steps = { (t: Int64) in PointIndex.Point(measurement: "steps", tags: [("unit", "count")], timeNanos: t) }
        #expect(try index.points(device: "ph", uuid: "old1") == [steps(1)])
        #expect(try index.points(device: "ph", uuid: "old2") == [steps(2)])
        try index.record([Self.row("old2", "steps,unit=count", time: 9, device: "ph")])
        #expect(try index.points(device: "ph", uuid: "old2") == [steps(2), steps(9)])
        try index.remove(device: "ph", uuid: "old2")
        #expect(try index.points(device: "ph", uuid: "old2").isEmpty)
        #expect(try index.points(device: "ph", uuid: "old1") == [steps(1)])
        index.close()
        let db = try SQLite(path: path)
        #expect(
            try db.query("SELECT id, sealed, hashed FROM point_chunks ORDER BY id").map { $0.map { $0.int ?? -1 } }
                == [[1, 1, 0], [2, 1, 0], [3, 0, 2]])
        #expect(try db.query("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'chunk_2_key'").first?.first?.int == 1)
    }

    /// The series the index notes is read back from the line's bytes as InfluxDB stores it:
    /// escapes undone, a tab written as a space, a trailing backslash dropped — so a delete
    /// names the point InfluxDB has.
    @Test func aSeriesIsReadBackFromItsLineAsInfluxDBStoresIt() {
        let e = LineProtocolEncoder(measurement: "{type}", phoneTag: "phone", tags: [("k=1", "a b,c")], precision: .ns)
        var r = CanonicalRecord(
            kind: "quantity", device: "ph one", receiver: "r", uuid: "u", type: "weird,type x=1",
            start: Timestamp(seconds: 1), value: .number(2), unit: "tab\tend\\")
        r.source = RecordSource(app: "a\\,b", device: "Watch=2")
        var out: [UInt8] = []
        guard case .line(let end, let time) = e.encode(r, into: &out) else { Issue.record("not encoded"); return }
        #expect(time == 1_000_000_000)
        let (m, tags) = PointIndex.parseSeries(out[..<end])
        #expect(m == "weird,type x=1")
        #expect(tags.map { "\($0.0)=\($0.1)" } == ["device=Watch=2", "k=1=a b,c", "phone=ph one", #"source=a\,b"#, "unit=tab end"])
    }

    /// A record's labels from routes sort among the sink's own tags, and one named as a tag of
    /// the sink's gives way to it; an empty label is left off.
    @Test func labelsSortAmongTheSinksTagsAndGiveWayToThem() {
        let e = LineProtocolEncoder(measurement: "{type}", phoneTag: "phone", tags: [("app", "{source}"), ("z", "fixed")], precision: .s)
        var r = PipelineTests.record("l", type: "hr", device: "ph,2")
        r.source = RecordSource(app: "app", device: "Watch")
        r.tags = [RecordTag("person", "bob"), RecordTag("unit", "taken"), RecordTag("b c", "d=e"), RecordTag("empty", "")]
        var out: [UInt8] = []
        _ = e.encode(r, into: &out)
        #expect(
            String(decoding: out, as: UTF8.self)
                == #"hr,app=app,b\ c=d\=e,device=Watch,person=bob,phone=ph\,2,source=app,unit=count,z=fixed value=412 1791961260"# + "\n")
    }

    /// The sink writes each point from the record as its journal line reads it: every shape of
    /// record gives, so, the point (and the series and time the point index notes) the record
    /// made of its fields gives — labels, templates, escapes, workouts, categories, every
    /// precision. Through the sink, a batch of such records is one body of those points.
    @Test func pointsOfRecordsReadFromTheirLinesAreTheWholeRecordsPoints() throws {
        let encoders = [
            LineProtocolEncoder(measurement: "{type}", phoneTag: "phone", tags: [("app", "{source}"), ("person", "me")], precision: .ns),
            LineProtocolEncoder(
                measurement: "h_{kind}.{unit}", phoneTag: "",
                tags: [
                    ("unit", "dup"), ("who", "{phone}@{receiver}"),
                    ("z", "")
                ], precision: .s),
            LineProtocolEncoder(measurement: "fixed name", phoneTag: "dev ice", tags: [], precision: .ms)
        ]
        var records = TransformTests.shapes
        var w = CanonicalRecord(kind: "workout", device: "p", receiver: "r", uuid: "w", type: "workout", start: Timestamp(seconds: 5))
        w.activity = "running"
        w.durationS = 60.5
        w.energyKcal = 312
        w.fields = [RecordField("route", RawJSON(#"[{"lat":1}]"#))]
        w.source = RecordSource(app: "app", device: "Watch")
        records.append(w)
        var c = CanonicalRecord(
            kind: "category", device: "ph 1,=x", receiver: "r", uuid: "c", type: "sleep_analysis",
            start: Timestamp(seconds: 9, nanoseconds: 1), value: .string("asleep_core"))
        c.code = 3
        c.part = 2
        c.extra = [RecordField("time_zone", .string("Europe/Berlin"))]
        c.tags = [RecordTag("person", "bob"), RecordTag("unit", "taken"), RecordTag("b c", "d=e")]
        records.append(c)
        var escaped = c
        escaped.uuid = "e"
        escaped.device = #"ph "1"\"#
        escaped.value = .string("a \"b\"\n")
        records.append(escaped)
        var odd = PipelineTests.record("o", type: "", device: "ph")
        odd.value = .number(-1e-7)
        odd.unit = ""
        records.append(odd)
        var noStart = PipelineTests.record("ns")
        noStart.start = nil
        records.append(noStart)
        var noValue = PipelineTests.record("nv")
        noValue.value = nil
        records.append(noValue)
        for e in encoders {
            for r in records where r.op == .upsert {
                var expected = Array("m v=1 1\n".utf8) // after a line before it, as in a request's body
                var got = expected
                let a = e.encode(Record(r), into: &expected)
                let b = e.encode(try Record.read(line: CanonicalCodec.encodeLine(r)[...]), into: &got)
                #expect(String(decoding: got, as: UTF8.self) == String(decoding: expected, as: UTF8.self), "\(r.uuid)")
                switch (a, b) {
                case (.line(let s1, let t1), .line(let s2, let t2)): #expect(s1 == s2 && t1 == t2, "\(r.uuid)")
                case (.cannot(let r1), .cannot(let r2)): #expect(r1 == r2)
                default: Issue.record("\(r.uuid): encoded one way from the record, another from its line")
                }
            }
        }
        let endpoint = try ScriptedEndpoint { _ in HTTPResponse(status: 204) }
        let s = try sink("http://127.0.0.1:\(endpoint.port)", api: "v1", extra: ", database: health")
        let sent = [PipelineTests.record("a"), escaped, PipelineTests.record("b", type: "heart_rate")]
        let batch = try sent.map { try Record.read(line: CanonicalCodec.encodeLine($0)[...]) }
        #expect(s.write(SinkBatch(records: batch)) == .accepted)
        var expected: [UInt8] = []
        for r in sent {
            _ = LineProtocolEncoder(measurement: "{type}", phoneTag: "phone", tags: [], precision: .ns).encode(r, into: &expected)
        }
        #expect(String(decoding: endpoint.requests[0].body, as: UTF8.self) == String(decoding: expected, as: UTF8.self))
    }

    @Test func aGzipLevelOutOfRangeIsAConfigError() throws {
        #expect(throws: ConfigProblems.self) { try sink("http://x", extra: ", org: o, bucket: b, token: t, gzip_level: 0") }
        #expect(throws: ConfigProblems.self) { try sink("http://x", extra: ", org: o, bucket: b, token: t, gzip_level: 10") }
        _ = try sink("http://x", extra: ", org: o, bucket: b, token: t, gzip_level: 9")
    }

    @Test func measurementAndTagTemplatesRenderPerRecord() throws {
        let endpoint = try ScriptedEndpoint { _ in HTTPResponse(status: 204) }
        let s = try sink(
            "http://127.0.0.1:\(endpoint.port)",
            extra: ", org: o, bucket: b, token: t, gzip: false, measurement: \"health_{kind}\", phone_tag: \"\","
                + " tags: {metric: \"{type}\", who: \"{phone}@{receiver}\", app: \"{source}\", person: alice}")
        #expect(
            s.write(SinkBatch(records: [PipelineTests.record("a"), PipelineTests.record("b", type: "heart rate", device: "ph,2")]))
                == .accepted)
        // {source} is empty for these records, so the app tag is left off; tag values are escaped.
        #expect(
            String(decoding: endpoint.requests[0].body, as: UTF8.self) == """
                health_quantity,metric=steps,person=alice,unit=count,who=phone-1@r value=412 1791961260000000000
                health_quantity,metric=heart\\ rate,person=alice,unit=count,who=ph\\,2@r value=412 1791961260000000000

                """)
    }

    /// The bytes the encoder writes, for the awkward cases: escapes, an empty or backslash-ended
    /// name, negative and fractional numbers, nanosecond times, a category's code and name.
    @Test func encodesTheAwkwardCasesByteForByte() {
        let e = LineProtocolEncoder(measurement: "{type}", phoneTag: "phone", tags: [("k=1", "a b,c")], precision: .ns)
        var r = CanonicalRecord(
            kind: "quantity", device: "ph one", receiver: "r", uuid: "u", type: "weird,type x=1",
            start: Timestamp(seconds: 1_791_961_260, nanoseconds: 123_456_789), value: .number(-2.5), unit: "tab\tend\\")
        r.source = RecordSource(app: "\\", device: "Watch=2")
        var out: [UInt8] = []
        _ = e.encode(r, into: &out)
        r.kind = "category"
        r.value = .string("in \"bed\"\n\\")
        r.code = 0
        r.start = Timestamp(seconds: -1, nanoseconds: 0)
        r.unit = nil
        _ = e.encode(r, into: &out)
        r.kind = "quantity"
        r.value = .number(1e20)
        r.code = nil
        _ = e.encode(r, into: &out)
        #expect(
            String(decoding: out, as: UTF8.self) == #"""
                weird\,type\ x=1,device=Watch\=2,k\=1=a\ b\,c,phone=ph\ one,source=_,unit=tab\ end value=-2.5 1791961260123456789
                weird\,type\ x=1,device=Watch\=2,k\=1=a\ b\,c,phone=ph\ one,source=_ value=0,value_name="in \"bed\"\n\\" -1000000000
                weird\,type\ x=1,device=Watch\=2,k\=1=a\ b\,c,phone=ph\ one,source=_ value=1e+20 -1000000000

                """#)
    }

    @Test func anUnknownPlaceholderIsAConfigError() {
        do {
            _ = try sink("http://x", extra: ", org: o, bucket: b, token: t, measurement: \"{typ}\", tags: {a: \"{devise}\"}")
            Issue.record("an unknown placeholder must be refused")
        } catch let e as ConfigProblems {
            #expect(e.description.contains("sinks.influx.measurement: unknown placeholder {typ}; a template may use {type}"))
            #expect(e.description.contains("sinks.influx.tags.a: unknown placeholder {devise}"))
        } catch {
            Issue.record("\(error)")
        }
    }

    /// TLS against a real InfluxDB serving HTTPS with a self-signed certificate: trusted through
    /// `ca_file`, refused (and kept, with the reason) without it.
    @Test func writesOverTLSTrustingTheCAFile() throws {
        let db = try DatabaseProcess.influxDB(tls: true)
        let url = "https://127.0.0.1:\(db.port)"
        let untrusted = try sink(url, api: "v1", extra: ", database: health")
        guard case .keep(let why, _) = untrusted.write(SinkBatch(records: [PipelineTests.record("a")])) else {
            Issue.record("a certificate nobody vouched for must not be trusted")
            return
        }
        #expect(why.contains("certificate"), "\(why)")
        let trusted = try sink(url, api: "v1", extra: ", database: health, ca_file: \"\(db.dir)/cert.pem\"")
        #expect(trusted.write(SinkBatch(records: [PipelineTests.record("a")])) == .accepted)
        let answer = try CurlClient(options: .init(caFile: db.dir + "/cert.pem"))
            .send("GET", url: url + "/query?db=health&q=SELECT%20count(value)%20FROM%20steps", headers: [], body: [])
        #expect(String(decoding: answer.body, as: UTF8.self).contains(#""values":[["1970-01-01T00:00:00Z",1]]"#))
    }

    @Test func configNamesWhatEachAPINeeds() {
        do {
            _ = try sink("http://x", api: "v2", extra: ", database: nope")
            Issue.record("a v2 sink without org, bucket and token must be refused")
        } catch let e as ConfigProblems {
            let text = e.description
            #expect(text.contains("needs \"org\"") && text.contains("needs \"bucket\"") && text.contains("needs \"token\""))
            #expect(text.contains("\"database\" has no meaning for api v2"))
        } catch {
            Issue.record("\(error)")
        }
    }
}

/// The drainer into the influxdb sink against an InfluxDB that answers late and refuses some
/// requests for now: the cursor never passes what it has not taken.
@Suite struct InfluxDBDrainerTests {
    /// 40 batches of 25 records (journal entries of 10, so cursors fall inside entries) go to a
    /// scripted InfluxDB that holds every other request a while, refuses the first attempt of
    /// every seventh request with a 503, and once one whole request with a 500 after a later one
    /// was taken. Each time the drainer commits its cursor, every record before it must have been
    /// taken by a 204; at the end every record is taken and the cursor is at the end. With a
    /// second route that copies every third record, some batches come out larger than
    /// `max_items` and are written in parts.
    @Test(arguments: [false, true]) func theCursorNeverPassesARecordInfluxDBHasNotTaken(copying: Bool) throws {
        struct State {
            var taken = Set<Int>()
            var fiveHundred = false
        }
        let state = Mutex(State())
        let script = OutOfOrderScript()
        let endpoint = ThreadedEndpoint { r in
            // Each line's time (precision s) is its record's number.
            let times = InfluxDBSinkTests.inflate(r.body).split(separator: "\n").compactMap {
                $0.split(separator: " ").last.flatMap { Int($0) }
            }
            let refuse = script.arrive(first: times.first ?? -1)
            if refuse { return HTTPResponse(status: 503) }
            let failLate = state.withLock { s -> Bool in
                // Once: a request that comes after others were taken fails whole.
                if !s.fiveHundred && s.taken.count > 300 && !times.contains(where: { s.taken.contains($0) }) {
                    s.fiveHundred = true
                    return true
                }
                return false
            }
            if failLate { return HTTPResponse(status: 500) }
            state.withLock { s in for t in times { s.taken.insert(t) } }
            return HTTPResponse(status: 204)
        }
        let dir = ServeProcess.makeTempDir("pipelined")
        let logger = Logger(component: "test", sink: MemoryLogSink())
        let total = 1000, perEntry = 10
        let j = try PipelineTests.journal(dir: dir, records: total, perEntry: perEntry, logger: logger) { n in
            var r = PipelineTests.record("u\(n)", type: n % 3 == 0 ? "marked" : "steps")
            r.start = Timestamp(seconds: Int64(n))
            return r
        }
        let node = try parseYAML(
            """
            {kind: influxdb, url: "http://127.0.0.1:\(endpoint.port)", api: v1, database: d, precision: s,
             batch: {max_items: 25}, retry: {initial: 5ms, max: 20ms}}
            """, file: "t", environment: [:])
        let built = try InfluxDBSink.build(name: "influx", node: node, path: "sinks.influx", context: SinkBuildContext(dataDir: dir))
        let metrics = SinkMetrics(name: "influx")
        let violations = Mutex<[String]>([])
        let commits = Mutex(0)
        let lastCommit = Mutex(0)
        var routes = [Route(name: "all", from: [Glob("*")], transforms: [], to: ["influx"])]
        if copying {
            routes.append(
                Route(
                    name: "marked", from: [Glob("*")], transforms: [FilterTransform(types: ["marked"], excludeTypes: nil)], to: ["influx"]))
        }
        let d = SinkDrainer(
            name: "influx", built: built, routes: routes,
            journal: j, dataDir: dir, logger: logger, metrics: metrics
        ) {
            // The cursor just committed: every record before it must be in InfluxDB.
            let seq = Int(metrics.cursorSeq.load(ordering: .relaxed)), skip = metrics.cursorSkip.load(ordering: .relaxed)
            let before = (seq - 1) * perEntry + skip
            // Cursors only move forward: a batch's cursor is never committed before an earlier one's.
            let back = lastCommit.withLock { last -> Bool in
                defer { last = max(last, before) }; return before < last
            }
            if back { violations.withLock { $0.append("cursor \(seq)/\(skip) went back") } }
            let missing = state.withLock { s in (0..<before).filter { !s.taken.contains($0) } }
            commits.withLock { $0 += 1 }
            if !missing.isEmpty { violations.withLock { $0.append("cursor \(seq)/\(skip) passed \(missing.prefix(5))") } }
        }
        try PipelineTests.drainToEnd(d, entries: total / perEntry, violations: violations)
        let s = state.withLock { $0 }
        #expect(s.taken.count == total)
        #expect(!script.refused.isEmpty && s.fiveHundred, "the script refused some")
        #expect(commits.withLock { $0 } >= 10)
        #expect(metrics.kept.load(ordering: .relaxed) > 0)
    }
}

extension LineProtocolEncoder {
    /// The point of a record made of its fields (the tests' form).
    func encode(_ r: CanonicalRecord, into out: inout [UInt8]) -> Encoded { encode(Record(r), into: &out) }
}
