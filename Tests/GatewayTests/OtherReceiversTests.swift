import Foundation
@testable import Gateway
import HealthgateCore
@testable import HealthgateTesting
@testable import Pipeline
import SinkKit
import Testing

/// Health Auto Export's REST API and InfluxDB's write endpoints, through serve.
@Suite(.serialized) struct OtherReceiversTests {
    static let config = """
        listen: 127.0.0.1:0
        data_dir: DATA_DIR
        receivers:
          hae:
            kind: hae
            auth: {type: header, header: api-key, token: sk-hae-123}
            device: my-iphone
          influx:
            kind: influx
            auth: {type: bearer, token: influx-token}
            device: my-iphone
          influx-v1:
            kind: influx
            path: /v1/write
            auth: {type: basic, user: grafana, token: secret-pw}
        routes:
          - {name: all, from: ["*"], to: [archive]}
        sinks:
          archive: {kind: file, path: "archive/{receiver}.ndjson", batch: {max_wait: 10ms}}
        """

    static func records(_ serve: ServeProcess, _ receiver: String) -> [[String: Any]] {
        ServeProcess.ndjson(under: serve.dataDir + "/archive").filter { $0["receiver"] as? String == receiver }
    }

    @Test func healthAutoExportPostsItsBody() throws {
        let serve = try ServeProcess(config: Self.config)
        let c = serve.client()
        let body = HAEFormatTests.body
        #expect(try c.request("POST", "/api/data", headers: [("Content-Type", "application/json")], body: Array(body.utf8)).status == 401)
        let r = try c.request(
            "POST", "/api/data",
            headers: [
                ("api-key", "sk-hae-123"), ("Content-Type", "application/json"),
                ("automation-name", "healthgate"), ("session-id", "s1")
            ],
            body: Array(body.utf8))
        #expect(r.status == 200, "\(r.text)")
        // Some exports wrap the object in an array.
        let wrapped =
            "[\(#"{"data":{"metrics":[{"name":"step_count","units":"count","data":[{"date":"2026-10-15 09:00:00 +0200","qty":7}]}]}}"#)]"
        #expect(try c.request("POST", "/api/data", headers: [("api-key", "sk-hae-123")], body: Array(wrapped.utf8)).status == 200)
        var got: [[String: Any]] = []
        #expect(
            ServeProcess.eventually {
                got = Self.records(serve, "hae"); return got.count == 10
            }, "\(got.count)")
        #expect(got.allSatisfy { $0["device"] as? String == "my-iphone" })
        #expect(got.contains { $0["type"] as? String == "oxygen_saturation" && $0["value"] as? Double == 0.95 })
        #expect(got.contains { $0["type"] as? String == "steps" && $0["value"] as? Int == 7 })
        #expect(try c.request("GET", "/metrics").text.contains(#"healthgate_records_unknown_type_total{receiver="hae"} 1"#))
    }

    @Test func influxDBWritesWithTokenBearerGzipAndV1() throws {
        let serve = try ServeProcess(config: Self.config)
        let c = serve.client()
        let lines = SynckyFormatsTests.influx
        let v2 = "/api/v2/write?org=home&bucket=health&precision=ns"
        #expect(try c.request("POST", v2, headers: [("Authorization", "Token wrong")], body: Array(lines.utf8)).status == 401)
        let token = try c.request("POST", v2, headers: [("Authorization", "Token influx-token")], body: Array(lines.utf8))
        #expect(token.status == 204, "\(token.text)")
        // What InfluxDB itself refuses, the Syncky template's Bearer, is taken.
        let bearer = "steps,unit=count,source=Shortcuts value=100 1791961320\n"
        #expect(
            try c.request(
                "POST", "/api/v2/write?precision=s", headers: [("Authorization", "Bearer influx-token")],
                body: Array(bearer.utf8)
            ).status == 204)
        // gzip bodies, on the v1 path of the same receiver.
        let dir = ServeProcess.makeTempDir("gz")
        try "steps,unit=count value=200 1791961380000000000\n".write(toFile: dir + "/b", atomically: true, encoding: .utf8)
        #expect(try HTTPServerTests.shell("gzip -k \(dir)/b").0 == 0)
        let gz = try [UInt8](Data(contentsOf: URL(fileURLWithPath: dir + "/b.gz")))
        #expect(
            try c.request(
                "POST", "/write?db=health",
                headers: [
                    ("Authorization", "Bearer influx-token"),
                    ("Content-Encoding", "gzip")
                ], body: gz
            ).status == 204)
        // v1 credentials as u/p query parameters, or Basic.
        let v1 = "heart_rate,unit=count/min value=61 1791961440000000000\n"
        #expect(try c.request("POST", "/v1/write?db=health&u=grafana&p=secret-pw", body: Array(v1.utf8)).status == 204)
        #expect(try c.request("POST", "/v1/write?db=health&u=grafana&p=nope", body: Array(v1.utf8)).status == 401)
        // A line InfluxDB would refuse is set aside and named in InfluxDB's own `partial write`
        // answer (400); the good ones of the same body are stored.
        let mixed = "steps,unit=count value=1 1791961500000000000\nthis is not a point\n"
        let partial = try c.request("POST", v2, headers: [("Authorization", "Token influx-token")], body: Array(mixed.utf8))
        #expect(partial.status == 400 && partial.json?["code"] as? String == "invalid", "\(partial.text)")
        #expect((partial.json?["message"] as? String)?.hasPrefix("partial write: unable to parse 'this is not a point'") == true)
        var got: [[String: Any]] = []
        #expect(
            ServeProcess.eventually {
                got = Self.records(serve, "influx"); return got.count == 6
            }, "\(got.count)")
        #expect(got.contains { $0["type"] as? String == "steps" && $0["value"] as? Int == 200 })
        #expect(got.contains { $0["type"] as? String == "steps" && $0["start"] as? String == "2026-10-14T07:02:00Z" })
        #expect(got.contains { $0["type"] as? String == "sleep_analysis" && $0["code"] as? Int == 3 })
        #expect(ServeProcess.eventually { Self.records(serve, "influx-v1").count == 1 })
        #expect(serve.ndjson(under: "quarantine").contains { ($0["reason"] as? String)?.contains("line 2") == true })
    }

    /// What real writers send: data in fields named `qty`, `state`, `duration_min`, not `value`.
    /// InfluxDB stores every such line, so healthgate keeps them all: the type as it came, the
    /// fields under `extra`, counted as unmapped; points told apart only by a tag keep their own keys.
    @Test func everyLineInfluxDBStoresIsKept() throws {
        let serve = try ServeProcess(config: Self.config)
        let c = serve.client()
        var body =
            "step_count,source=HAE qty=412i 1791961260000000000\n"
            + "sleep_state,source=Watch state=\"awake\",duration_min=12.5 1791933000000000000\n"
            + "mindful,source=Watch value=\"a string\" 1791933000000000000\n"
            + "body_mass,unit=lb qty=160 1791933000000000000\n"
            + "no_timestamp qty=1\n"
        for stage in ["awake", "rem", "core", "deep", "in_bed", "asleep"] {
            body += "sleep_phase,stage=\(stage) minutes=5 1791933000000000000\n"
        }
        let r = try c.request(
            "POST", "/api/v2/write?precision=ns", headers: [("Authorization", "Token influx-token")], body: Array(body.utf8))
        #expect(r.status == 204, "\(r.text)")
        var got: [[String: Any]] = []
        #expect(
            ServeProcess.eventually {
                got = Self.records(serve, "influx"); return got.count == 11
            }, "\(got.count)")
        func extra(_ r: [String: Any]) -> [String: Any] { r["extra"] as? [String: Any] ?? [:] }
        // Issue 48: a measurement the registry knows by another sender's name is that type, its
        // number in `qty` (Health Auto Export's name for it) its value, in the type's unit.
        let steps = try #require(got.first { $0["type"] as? String == "steps" })
        #expect(steps["value"] as? Int == 412 && extra(steps)["qty"] == nil && steps["start"] as? String == "2026-10-14T07:01:00Z")
        let sleep = try #require(got.first { $0["type"] as? String == "sleep_state" })
        #expect(extra(sleep)["state"] as? String == "awake" && extra(sleep)["duration_min"] as? Double == 12.5)
        #expect(extra(try #require(got.first { $0["type"] as? String == "mindful" }))["value"] as? String == "a string")
        let mass = got.first { $0["type"] as? String == "body_mass" }
        #expect(
            mass?["unit"] as? String == "kg" && abs((mass?["value"] as? Double ?? 0) - 72.57477920) < 1e-6, "\(String(describing: mass))")
        #expect(got.first { $0["type"] as? String == "no_timestamp" }?["start"] != nil)
        let phases = got.filter { $0["type"] as? String == "sleep_phase" }
        #expect(phases.count == 6 && Set(phases.compactMap { $0["uuid"] as? String }).count == 6)
        #expect(try c.request("GET", "/metrics").text.contains(#"healthgate_records_unknown_type_total{receiver="influx"} 9"#))
        #expect(serve.ndjson(under: "quarantine").isEmpty)
        // v1 answers a refused line with InfluxDB 1.x's {"error": "partial write: …"}.
        let v1 = try c.request(
            "POST", "/write?db=h", headers: [("Authorization", "Token influx-token")],
            body: Array("steps value=1 1791961260000000000\nsteps value= 1\n".utf8))
        #expect(
            v1.status == 400 && (v1.json?["error"] as? String)?.contains("partial write: unable to parse 'steps value= 1'") == true,
            "\(v1.text)")
    }

    @Test func gzipBombsAndGarbageAreRefused() {
        let zeros = [UInt8](repeating: 0, count: 10_000)
        #expect(throws: Never.self) {
            if case .success = InfluxReceiver.gunzip(zeros, limit: 100) { Issue.record("zeros are not gzip") }
        }
        guard case .failure(let why) = InfluxReceiver.gunzip([0x1F, 0x8B, 0x08, 0x00], limit: 100) else {
            Issue.record("a truncated gzip body must be refused")
            return
        }
        #expect(why.description.contains("gzip"))
    }
}

/// One fact — 412 steps at 2026-10-14T07:01:00Z — through every sender comes out as the same
/// canonical type, value in the canonical unit and UTC start.
@Suite struct EverySenderTests {
    func records(_ receiver: any Receiver, _ body: String, headers: [(String, String)] = [], query: String = "") -> [CanonicalRecord] {
        let req = HTTPRequest(
            method: "POST", path: receiver.paths[0], query: query,
            headers: headers.map { (name: $0.0, value: $0.1) }, body: Array(body.utf8))
        guard case .accept(let batch, _) = receiver.receive(req, context: ReceiveContext(now: Timestamp(seconds: 0))) else {
            Issue.record("\(receiver.name) did not accept the body")
            return []
        }
        return batch.records
    }

    /// Pounds become kilograms and miles metres whatever the sender (line protocol kept 160 lb),
    /// with exact factors, and a sample given as one instant ends at its start.
    @Test func unitsAndInstantsAreTheSameWhateverTheSender() throws {
        let pool = ParserPool()
        let none = Authenticator(kind: .none)
        let hae = HAEReceiver(name: "h", paths: ["/api/data"], maxBodyBytes: 1 << 20, auth: none, device: "d", parsers: pool)
        let influx = InfluxReceiver(name: "i", paths: ["/write"], maxBodyBytes: 1 << 20, auth: none, device: "d")
        let ingest = IngestReceiver(name: "g", paths: ["/v1/ingest"], maxBodyBytes: 1 << 20, auth: none, maxItems: 100, parsers: pool)
        let lp = try #require(
            records(
                influx, "body_mass,unit=lb value=160 1791961260\ndistance_walking_running,unit=mi value=3.1 1791961260\n",
                query: "precision=s"
            ).first)
        #expect(lp.value == .number(160 * 0.45359237) && lp.unit == "kg", "\(lp)")
        let h = try #require(
            records(
                hae,
                #"{"data":{"metrics":[{"name":"weight_body_mass","units":"lb","data":[{"date":"2026-10-14 09:01:00 +0200","qty":160}]}]}}"#
            ).first)
        #expect(h.value == lp.value && h.unit == "kg")
        // Syncky's own formats too.
        let syncky = SynckyReceiver(
            name: "s", path: "/s", maxBodyBytes: 1 << 20, auth: none, hmacSecret: nil, device: "d",
            parsers: pool, logger: Logger(component: "t", sink: MemoryLogSink()))
        let native = records(
            syncky,
            Vectors.syncBody(samples: [#"{"uuid":"m1","type":"body_mass","value":160,"unit":"lb","start":"2026-10-14T07:01:00Z"}"#]),
            headers: [("X-Syncky-Format", "native")]
        ).first
        #expect(native?.value == lp.value && native?.unit == "kg", "\(String(describing: native))")
        let csv = records(
            syncky,
            "type,uuid,start,end,value,unit,value_name,source,device,user_entered\r\nbody_mass,m2,2026-10-14T07:01:00Z,,160,lb,,,,\r\n",
            headers: [("X-Syncky-Format", "csv")]
        ).first
        #expect(csv?.value == lp.value && csv?.unit == "kg", "\(String(describing: csv))")
        let miles = records(influx, "distance_walking_running,unit=mi value=3.1 1791961260\n", query: "precision=s").first
        let metres = records(
            ingest,
            #"{"device_id":"d","samples":[{"source_uuid":"u","data_type":"distanceWalkingRunning","ts":"2026-10-14T07:01:00Z","value":4988.9664,"unit":"m"}]}"#
        ).first
        #expect(miles?.value?.number.map { abs($0 - 4988.9664) < 1e-9 } == true, "\(String(describing: miles))")
        #expect(metres?.value?.number == 4988.9664 && miles?.unit == metres?.unit)
        for r in [lp, h, try #require(miles), try #require(metres)] {
            #expect(r.end != nil && r.end == r.start, "\(r.receiver) \(r.type): end \(String(describing: r.end))")
        }
    }

    @Test func theSameStepsThroughEverySender() throws {
        let pool = ParserPool()
        let log = Logger(component: "t", sink: MemoryLogSink())
        let none = Authenticator(kind: .none)
        let syncky = SynckyReceiver(
            name: "s", path: "/s", maxBodyBytes: 1 << 20, auth: none, hmacSecret: nil, device: nil,
            parsers: pool, logger: log)
        let hae = HAEReceiver(name: "h", paths: ["/api/data"], maxBodyBytes: 1 << 20, auth: none, device: "d", parsers: pool)
        let influx = InfluxReceiver(name: "i", paths: ["/write"], maxBodyBytes: 1 << 20, auth: none, device: "d")
        let ingest = IngestReceiver(name: "g", paths: ["/v1/ingest"], maxBodyBytes: 1 << 20, auth: none, maxItems: 100, parsers: pool)
        let healthsync = HealthSyncReceiver(
            name: "y", paths: ["/sync"], maxBodyBytes: 1 << 20, auth: none, fallbackDevice: nil,
            parsers: pool, exports: ExportLog(path: ServeProcess.makeTempDir("x") + "/e"), logger: log)
        let all: [[CanonicalRecord]] = [
            records(syncky, Vectors.syncBody(samples: [Vectors.stepsSample]), headers: [("X-Syncky-Format", "native")]),
            records(syncky, SynckyFormatsTests.csv, headers: [("X-Syncky-Format", "csv")]),
            records(
                hae,
                #"{"data":{"metrics":[{"name":"step_count","units":"count","data":[{"date":"2026-10-14 09:01:00 +0200","qty":412}]}]}}"#),
            records(influx, "steps,unit=count value=412 1791961260\n", query: "precision=s"),
            records(
                ingest,
                #"{"device_id":"d","samples":[{"source_uuid":"u","data_type":"stepCount","ts":"2026-10-14T07:01:00Z","value":412,"unit":"count"}]}"#
            ),
            records(
                healthsync,
                #"{"metrics":[{"id":"healthkit:u","type":"stepCount","value":412,"unit":"count","start_date":"2026-10-14T09:01:00+02:00"}]}"#,
                headers: [("X-Device-Id", "d")])
        ]
        for (i, recs) in all.enumerated() {
            let r = try #require(recs.first, "sender \(i)")
            #expect(r.type == "steps" && r.kind == "quantity" && r.value == .number(412) && r.unit == "count", "sender \(i)")
            #expect(r.start?.rfc3339() == "2026-10-14T07:01:00Z", "sender \(i)")
        }
    }
}

/// The official InfluxDB client libraries from PyPI (`influxdb-client` for v2, `influxdb` for
/// v1), installed into `.build/pyvenv` by `make test`, write to the influx receivers as they
/// would to InfluxDB; what they wrote is read back from the archive.
@Suite(.serialized) struct InfluxClientLibraryTests {
    static var python: String {
        if let p = ProcessInfo.processInfo.environment["HEALTHGATE_PYTHON"] { return p }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return root.appendingPathComponent(".build/pyvenv/bin/python").path
    }

    static let script = #"""
        import sys
        from influxdb_client import InfluxDBClient, Point, WritePrecision
        from influxdb_client.client.write_api import SYNCHRONOUS
        from influxdb_client.rest import ApiException
        from influxdb import InfluxDBClient as V1Client

        port = int(sys.argv[1])
        with InfluxDBClient(url=f"http://127.0.0.1:{port}", token="influx-token", org="home", enable_gzip=True) as client:
            write = client.write_api(write_options=SYNCHRONOUS)
            write.write(bucket="health", write_precision=WritePrecision.S, record=[
                Point("heart_rate").tag("unit", "count/min").tag("source", "py-v2").field("value", 61.0).time(1791961260, WritePrecision.S),
                Point("body_mass").tag("unit", "lb").field("value", 160.0).time(1791961260, WritePrecision.S),
                Point("mood").tag("source", "py-v2").field("state", "calm").field("score", 7).time(1791961260, WritePrecision.S),
            ])
            try:
                write.write(bucket="health", record="steps,unit=count value=5 1791961260000000000\nsteps value= 1")
                print("v2-partial: no error")
            except ApiException as e:
                print("v2-partial:", e.status, "partial write" in (e.body or ""))
        v1 = V1Client(host="127.0.0.1", port=port, path="v1", username="grafana", password="secret-pw", database="health")
        v1.write_points([{"measurement": "steps", "tags": {"unit": "count", "source": "py-v1"}, "time": 1791961320,
                          "fields": {"value": 100}}], time_precision="s")
        print("done")
        """#

    @Test func theOfficialPythonClientsWriteAndTheirPointsArrive() throws {
        #expect(
            FileManager.default.isExecutableFile(atPath: Self.python),
            "\(Self.python) is missing: `make test` installs influxdb-client and influxdb into .build/pyvenv")
        let serve = try ServeProcess(config: OtherReceiversTests.config)
        let dir = ServeProcess.makeTempDir("py")
        try Self.script.write(toFile: dir + "/clients.py", atomically: true, encoding: .utf8)
        let (rc, out) = try HTTPServerTests.shell("\(Self.python) \(dir)/clients.py \(serve.port)")
        #expect(rc == 0, "\(out)")
        #expect(out.contains("v2-partial: 400 True"), "\(out)")
        #expect(out.contains("done"))
        var v2: [[String: Any]] = []
        #expect(
            ServeProcess.eventually {
                v2 = OtherReceiversTests.records(serve, "influx"); return v2.count == 4
            }, "\(v2)")
        let hr = v2.first { $0["type"] as? String == "heart_rate" }
        #expect(
            hr?["value"] as? Int == 61 && hr?["start"] as? String == "2026-10-14T07:01:00Z"
                && hr?["end"] as? String == "2026-10-14T07:01:00Z")
        #expect((hr?["source"] as? [String: Any])?["app"] as? String == "py-v2" && hr?["device"] as? String == "my-iphone")
        let mass = v2.first { $0["type"] as? String == "body_mass" }
        #expect((mass?["value"] as? Double).map { abs($0 - 72.5747792) < 1e-9 } == true && mass?["unit"] as? String == "kg")
        let mood = (v2.first { $0["type"] as? String == "mood" })?["extra"] as? [String: Any]
        #expect(mood?["state"] as? String == "calm" && mood?["score"] as? Int == 7)
        #expect(v2.contains { $0["type"] as? String == "steps" && $0["value"] as? Int == 5 })
        #expect(
            ServeProcess.eventually {
                OtherReceiversTests.records(serve, "influx-v1").contains {
                    $0["type"] as? String == "steps" && $0["value"] as? Int == 100
                        && $0["start"] as? String == "2026-10-14T07:02:00Z"
                }
            })
    }
}
