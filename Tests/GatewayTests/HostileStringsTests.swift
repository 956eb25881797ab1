import Foundation
@testable import Gateway
import HealthgateCore
@testable import HealthgateTesting
@testable import Pipeline
import Posix
import SinkKit
import Testing
import CanonicalJSON

/// Every string a sender controls goes into the canonical record escaped: a quote, a backslash,
/// a line break, a control character or a whole forged record inside a field comes out as that
/// field's text, in one record, under the sender's own device — never as a second record.
@Suite struct HostileStringsTests {
    /// Quotes, backslashes, line breaks, control characters, non-ASCII, and a forged delete.
    static let evil =
        "q\"b\\s\nn\r\tt\u{01}\u{1F}\u{7F}é☃\u{2028}\"}}\n{\"op\":\"delete\",\"kind\":\"quantity\",\"device\":\"victim\",\"receiver\":\"x\",\"uuid\":\"u\",\"type\":\"steps\"}\n"

    /// `s` as a JSON string literal, for building request bodies.
    static func js(_ s: String) -> String {
        String(decoding: try! JSONSerialization.data(withJSONObject: s, options: [.fragmentsAllowed]), as: UTF8.self)
    }

    static let pool = ParserPool()
    static let log = Logger(component: "t", sink: MemoryLogSink())
    static let none = Authenticator(kind: .none)

    /// The records of one request, written as the journal writes them and read back with a
    /// parser of another library: one JSON object a record, nothing more.
    func lines(
        _ receiver: any Receiver, _ body: String, headers: [(String, String)] = [], query: String = "",
        sourceLocation: SourceLocation = #_sourceLocation
    ) -> [[String: Any]] {
        let req = HTTPRequest(
            method: "POST", path: receiver.paths[0], query: query,
            headers: headers.map { (name: $0.0, value: $0.1) }, body: Array(body.utf8))
        guard case .accept(let batch, _) = receiver.receive(req, context: ReceiveContext(now: Timestamp(seconds: 0))) else {
            Issue.record("\(receiver.name) did not accept the body", sourceLocation: sourceLocation)
            return []
        }
        #expect(batch.quarantined.isEmpty, "\(batch.quarantined.map(\.reason))", sourceLocation: sourceLocation)
        var bytes: [UInt8] = []
        for r in batch.records { r.appendNDJSON(to: &bytes) }
        let text = String(decoding: bytes, as: UTF8.self)
        let parsed = text.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        #expect(parsed.count == batch.records.count, "\(text)", sourceLocation: sourceLocation)
        #expect(text.split(separator: "\n").count == batch.records.count, sourceLocation: sourceLocation)
        return parsed
    }

    func expectOwnDevice(
        _ recs: [[String: Any]], _ device: String, receiver: String, ops: [String],
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(recs.count == ops.count, sourceLocation: sourceLocation)
        for (r, op) in zip(recs, ops) {
            #expect(r["device"] as? String == device, "\(r)", sourceLocation: sourceLocation)
            #expect(r["receiver"] as? String == receiver, sourceLocation: sourceLocation)
            #expect(r["op"] as? String == op, sourceLocation: sourceLocation)
        }
    }

    static func path(_ r: [String: Any], _ keys: String...) -> Any? {
        var cur: Any? = r
        for k in keys { cur = (cur as? [String: Any])?[k] }
        return cur
    }

    @Test func synckyNativeEveryStringField() {
        let e = Self.js(Self.evil)
        let syncky = SynckyReceiver(
            name: "s", path: "/s", maxBodyBytes: 1 << 20, auth: Self.none, hmacSecret: nil, device: nil,
            parsers: Self.pool, logger: Self.log)
        let samples = [
            #"{"uuid":\#(e),"type":"steps","value":1,"unit":\#(e),"start":"2026-10-14T07:01:00Z","source":{"app":\#(e),"device":\#(e)},"metadata":{\#(e):\#(e)},\#(e):\#(e)}"#,
            #"{"uuid":"c1","type":"sleep_analysis","value":\#(e),"start":"2026-10-14T07:01:00Z","end":"2026-10-14T08:01:00Z"}"#,
            #"{"uuid":"w1","type":"workout","activity":\#(e),"start":"2026-10-14T07:01:00Z","end":"2026-10-14T08:01:00Z","location":\#(e)}"#,
            #"{"uuid":"t1","type":\#(e),"value":1,"start":"2026-10-14T07:01:00Z"}"#,
            #"{"uuid":"characteristic:x","type":"characteristic","name":\#(e),"value":\#(e)}"#
        ]
        let body = Vectors.syncBody(device: "d_evil\\\"dev", samples: samples, deleted: [#"{"uuid":\#(e),"type":\#(e)}"#])
        let recs = lines(syncky, body, headers: [("X-Syncky-Format", "native")])
        expectOwnDevice(recs, "d_evil\"dev", receiver: "s", ops: ["upsert", "upsert", "upsert", "upsert", "upsert", "delete"])
        guard recs.count == 6 else { return }
        #expect(recs[0]["uuid"] as? String == Self.evil)
        #expect(recs[0]["unit"] as? String == Self.evil)
        #expect(Self.path(recs[0], "source", "app") as? String == Self.evil)
        #expect(Self.path(recs[0], "source", "device") as? String == Self.evil)
        #expect(Self.path(recs[0], "metadata", Self.evil) as? String == Self.evil)
        #expect(Self.path(recs[0], "extra", Self.evil) as? String == Self.evil)
        #expect(recs[1]["value"] as? String == Self.evil)
        #expect(recs[2]["activity"] as? String == Self.evil)
        #expect(recs[2]["location"] as? String == Self.evil)
        #expect(recs[3]["type"] as? String == Self.evil)
        #expect(recs[4]["value"] as? String == Self.evil)
        #expect(recs[5]["uuid"] as? String == Self.evil && recs[5]["type"] as? String == Self.evil)
    }

    /// CSV fields with quotes and line breaks inside double quotes, quotes doubled.
    @Test func synckyCSVEveryStringField() {
        let c = "\"" + Self.evil.replacingOccurrences(of: "\"", with: "\"\"") + "\""
        let syncky = SynckyReceiver(
            name: "s", path: "/s", maxBodyBytes: 1 << 20, auth: Self.none, hmacSecret: nil, device: "dev-1",
            parsers: Self.pool, logger: Self.log)
        let csv =
            "type,uuid,start,end,value,unit,value_name,source,device,user_entered\r\n"
            + "steps,\(c),2026-10-14T09:01:00+02:00,,412,\(c),,\(c),\(c),false\r\n"
            + "sleep_analysis,u2,2026-10-14T01:10:00+02:00,2026-10-14T02:40:00+02:00,3,,\(c),,,\r\n"
            + "characteristic,\("\"characteristic:" + Self.evil.replacingOccurrences(of: "\"", with: "\"\"") + "\""),,,,,\(c),,,\r\n"
            + "\(c),\(c),,,,,deleted,,,\r\n"
        let recs = lines(syncky, csv, headers: [("X-Syncky-Format", "csv")])
        expectOwnDevice(recs, "dev-1", receiver: "s", ops: ["upsert", "upsert", "upsert", "delete"])
        guard recs.count == 4 else { return }
        #expect(recs[0]["uuid"] as? String == Self.evil)
        #expect(recs[0]["unit"] as? String == Self.evil)
        #expect(Self.path(recs[0], "source", "app") as? String == Self.evil)
        #expect(Self.path(recs[0], "source", "device") as? String == Self.evil)
        #expect(recs[1]["value"] as? String == Self.evil)
        #expect(recs[2]["name"] as? String == Self.evil)
        #expect(recs[2]["value"] as? String == Self.evil)
        #expect(recs[3]["type"] as? String == Self.evil && recs[3]["uuid"] as? String == Self.evil)
    }

    /// Line protocol cannot carry a raw line break, but quotes, backslashes, tabs, control
    /// characters and a forged record in tags and string fields must all come through.
    @Test func lineProtocolEveryStringField() {
        let plain = "q\"b\\sé\"}}{\"op\":\"delete\",\"device\":\"victim\"}"
        // Tag values refuse control characters (a test of its own); string fields take them.
        let control = plain + "\tt\u{01}\u{7F}"
        // Tag values and measurements escape commas, spaces and equals signs; string fields escape quotes and backslashes.
        func tag(_ s: String) -> String {
            // As InfluxDB reads them: a backslash before any other character is itself.
            s.replacingOccurrences(of: ",", with: "\\,")
                .replacingOccurrences(of: " ", with: "\\ ").replacingOccurrences(of: "=", with: "\\=")
        }
        func field(_ s: String) -> String {
            "\"" + s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
        }
        let body =
            "steps,unit=count,source=\(tag(plain)),device=\(tag(plain)),\(tag(plain))=\(tag(plain)) value=5,note=\(field(control)) 1791961260\n"
        let syncky = SynckyReceiver(
            name: "s", path: "/s", maxBodyBytes: 1 << 20, auth: Self.none, hmacSecret: nil, device: "dev-1",
            parsers: Self.pool, logger: Self.log)
        let influx = InfluxReceiver(name: "i", paths: ["/write"], maxBodyBytes: 1 << 20, auth: Self.none, device: "dev-2")
        for (recs, device, receiver) in [
            (lines(syncky, body, headers: [("X-Syncky-Format", "influx")], query: "precision=s"), "dev-1", "s"),
            (lines(influx, body, query: "precision=s"), "dev-2", "i")
        ] {
            expectOwnDevice(recs, device, receiver: receiver, ops: ["upsert"])
            guard let r = recs.first else { continue }
            #expect(Self.path(r, "source", "app") as? String == plain)
            #expect(Self.path(r, "source", "device") as? String == plain)
            #expect(Self.path(r, "extra", "note") as? String == control, "\(r)")
            #expect(Self.path(r, "extra", "tag:" + plain) as? String == plain, "\(r)")
        }
    }

    @Test func healthAutoExportEveryStringField() {
        let e = Self.js(Self.evil)
        let hae = HAEReceiver(name: "h", paths: ["/api/data"], maxBodyBytes: 1 << 20, auth: Self.none, device: "dev\"3", parsers: Self.pool)
        let body =
            #"{"data":{"metrics":[{"name":"step_count","units":"count","data":[{"date":"2026-10-14 09:01:00 +0200","qty":412,"source":\#(e),\#(e):\#(e)}]},{"name":\#(e),"units":\#(e),"data":[{"date":"2026-10-14 09:01:00 +0200","qty":1}]}],"workouts":[{"id":\#(e),"name":\#(e),"start":"2026-10-14 09:01:00 +0200","end":"2026-10-14 10:01:00 +0200","location":\#(e)}]}}"#
        let recs = lines(hae, body)
        expectOwnDevice(recs, "dev\"3", receiver: "h", ops: ["upsert", "upsert", "upsert"])
        guard recs.count == 3 else { return }
        #expect(Self.path(recs[0], "source", "device") as? String == Self.evil)
        #expect(Self.path(recs[0], "extra", Self.evil) as? String == Self.evil)
        #expect(recs[1]["unit"] as? String == Self.evil)
        #expect(recs.contains { $0["activity"] as? String == Self.evil || $0["uuid"] as? String == Self.evil })
    }

    @Test func ingestEveryStringField() {
        let e = Self.js(Self.evil)
        let ingest = IngestReceiver(
            name: "g", paths: ["/v1/ingest"], maxBodyBytes: 1 << 20, auth: Self.none, maxItems: 100, parsers: Self.pool)
        let body =
            #"{"device_id":"own\"dev","time_zone":\#(e),"samples":[{"source_uuid":\#(e),"data_type":\#(e),"ts":"2026-10-14T07:01:00Z","value":\#(e),"unit":\#(e),"source_device":\#(e),"source_bundle":\#(e),"workout_source_uuid":\#(e),\#(e):\#(e)}],"workouts":[{"source_uuid":"w","started_at":"2026-10-14T07:01:00Z","activity_type":\#(e)}],"sleep_segments":[{"source_uuid":"z","started_at":"2026-10-14T07:01:00Z","ended_at":"2026-10-14T08:01:00Z","stage":\#(e)}],"deletions":[\#(e)]}"#
        let recs = lines(ingest, body)
        expectOwnDevice(recs, "own\"dev", receiver: "g", ops: ["upsert", "upsert", "upsert", "delete"])
        guard recs.count == 4 else { return }
        for key in ["uuid", "type", "value", "unit"] { #expect(recs[0][key] as? String == Self.evil, "\(key)") }
        #expect(Self.path(recs[0], "source", "app") as? String == Self.evil)
        #expect(Self.path(recs[0], "source", "device") as? String == Self.evil)
        #expect(recs[0]["timezone"] as? String == Self.evil)
        #expect(Self.path(recs[0], "extra", "workout_uuid") as? String == Self.evil)
        #expect(Self.path(recs[0], "extra", Self.evil) as? String == Self.evil)
        #expect(recs[1]["activity"] as? String == Self.evil)
        #expect(recs[2]["value"] as? String == Self.evil)
        #expect(recs[3]["uuid"] as? String == Self.evil)
    }

    @Test func healthSyncEveryStringField() throws {
        let e = Self.js(Self.evil)
        let healthsync = HealthSyncReceiver(
            name: "y", paths: ["/sync"], maxBodyBytes: 1 << 20, auth: Self.none, fallbackDevice: nil,
            parsers: Self.pool, exports: ExportLog(path: ServeProcess.makeTempDir("x") + "/e"), logger: Self.log)
        let body =
            #"{"export_id":\#(e),"metrics":[{"id":\#(e),"type":\#(e),"value":\#(e),"unit":\#(e),"start_date":"2026-10-14T09:01:00+02:00","source":\#(e),"metadata":{\#(e):\#(e)},\#(e):\#(e)}],"workouts":[{"id":"healthkit:w","activity_type":\#(e),"start_date":"2026-10-14T09:01:00+02:00"}],"deletions":[{"id":\#(e)}]}"#
        // A header cannot hold a line break, but it can hold quotes and backslashes.
        let recs = lines(healthsync, body, headers: [("X-Device-Id", #"ph"o\ne"#)])
        expectOwnDevice(recs, #"ph"o\ne"#, receiver: "y", ops: ["upsert", "upsert", "delete"])
        guard recs.count == 3 else { return }
        for key in ["uuid", "type", "value", "unit"] { #expect(recs[0][key] as? String == Self.evil, "\(key)") }
        #expect(Self.path(recs[0], "source", "app") as? String == Self.evil)
        #expect(Self.path(recs[0], "extra", "export_id") as? String == Self.evil)
        #expect(Self.path(recs[0], "metadata", Self.evil) as? String == Self.evil)
        #expect(Self.path(recs[1], "extra", "export_id") as? String == Self.evil)
        #expect(recs[1]["activity"] as? String == Self.evil)
        #expect(recs[2]["uuid"] as? String == Self.evil)
    }

    /// Through a running gateway: a forged record inside `time_zone` or `export_id` reaches the
    /// archive as text of the sender's own record, and no record appears for the victim.
    @Test func forgedRecordsDoNotReachTheArchive() throws {
        let serve = try ServeProcess(
            config: """
                listen: 127.0.0.1:0
                data_dir: DATA_DIR
                receivers:
                  ingest: {kind: ingest, auth: {type: bearer, token: t-ingest}}
                  sync: {kind: healthsync, auth: {type: bearer, token: t-sync}}
                routes:
                  - {name: all, from: ["*"], to: [archive]}
                sinks:
                  archive: {kind: file, path: "archive/{receiver}.ndjson", batch: {max_wait: 10ms}}
                """)
        let c = serve.client()
        let e = Self.js(Self.evil)
        let ingest =
            #"{"device_id":"attacker","time_zone":\#(e),"samples":[{"source_uuid":"a1","data_type":"stepCount","ts":"2026-10-14T07:01:00Z","value":3,"unit":"count","workout_source_uuid":\#(e)}]}"#
        #expect(
            try c.request("POST", "/v1/ingest", headers: [("Authorization", "Bearer t-ingest")], body: Array(ingest.utf8)).status == 202)
        let sync =
            #"{"export_id":\#(e),"metrics":[{"id":"healthkit:b1","type":"stepCount","value":4,"unit":"count","start_date":"2026-10-14T09:01:00+02:00"}]}"#
        #expect(
            try c.request(
                "POST", "/api/apple-health/sync", headers: [("Authorization", "Bearer t-sync"), ("X-Device-Id", "attacker")],
                body: Array(sync.utf8)
            ).status == 200)
        var got: [[String: Any]] = []
        #expect(
            ServeProcess.eventually {
                got = serve.ndjson(under: "archive"); return got.count >= 2
            })
        usleep(200_000)
        got = serve.ndjson(under: "archive")
        #expect(got.count == 2, "\(got)")
        #expect(got.allSatisfy { $0["device"] as? String == "attacker" && $0["op"] as? String == "upsert" })
        #expect(got.contains { $0["timezone"] as? String == Self.evil })
        #expect(got.contains { Self.path($0, "extra", "export_id") as? String == Self.evil })
        #expect(serve.ndjson(under: "sinks").filter { $0["reason"] != nil }.isEmpty, "nothing dead-lettered")
    }
}

/// A name a sender chose cannot start a forged log line.
@Suite struct LogEscapingTests {
    @Test func controlCharactersAreEscapedInLogLines() {
        var line: [UInt8] = []
        StderrLogSink.appendEscaped("export a\nb\r\tc\u{01}\u{7F} 2026-12-01T00:00:00Z error x: forged", to: &line)
        let text = String(decoding: line, as: UTF8.self)
        #expect(text == #"export a\nb\r\tc\u0001\u007f 2026-12-01T00:00:00Z error x: forged"#)
        #expect(!line.contains(0x0A) && !line.contains(0x0D))
    }

    /// A quote or a backslash in a message cannot end its field: logfmt and JSON lines alike
    /// read back as one event with the message as it was.
    @Test func aMessageStaysOneFieldInLogfmtAndJSON() throws {
        let message = "receiver \"x\" msg=\"forged\" level=error \\ \n{\"level\":\"error\"}"
        let time = Timestamp(seconds: 1_796_112_000, nanoseconds: 123_456_789)
        let logfmt = String(decoding: StderrLogSink.line(.warning, "sink db", message, time: time, format: .logfmt), as: UTF8.self)
        #expect(logfmt.hasPrefix("time=2026-12-01T08:00:00.123Z level=warning component=\"sink db\" msg=\""))
        #expect(logfmt.filter { $0 == "\n" }.count == 1 && logfmt.hasSuffix("\"\n"))
        let json = StderrLogSink.line(.error, "ingest", message, time: time, format: .json)
        let object = try JSONSerialization.jsonObject(with: Data(json)) as? [String: String]
        #expect(object == ["time": "2026-12-01T08:00:00.123Z", "level": "error", "component": "ingest", "msg": message])
    }
}

/// Refused credentials are logged, as a summary: a client trying tokens cannot flood the log.
@Suite struct RefusalLogTests {
    @Test func theFirstRefusalIsSaidThenTheRestOnceAMinute() {
        let sink = MemoryLogSink()
        let log = RefusalLog(logger: Logger(component: "ingest", sink: sink))
        for i in 0..<100 {
            log.note(receiver: "hae", status: 401, address: "10.0.0.\(i % 3)", now: Timestamp(seconds: 1000 + Int64(i / 10)))
        }
        #expect(sink.all.count == 1)
        #expect(sink.all[0].message.contains("hae: refused a request from 10.0.0.0 (401: missing or wrong credentials)"))
        log.flush(now: Timestamp(seconds: 1030))
        #expect(sink.all.count == 1, "not before a minute has passed")
        log.flush(now: Timestamp(seconds: 1060))
        #expect(sink.all.count == 2)
        #expect(
            sink.all[1].message == "hae: refused 99 more request(s) in the last minute (401: missing or wrong credentials) "
                + "from 10.0.0.0, 10.0.0.1, 10.0.0.2")
        log.flush(now: Timestamp(seconds: 1200))
        #expect(sink.all.count == 2, "nothing more to say")
    }

    @Test func aRefusedRequestReachesTheLogOfServeWithoutItsToken() throws {
        let serve = try ServeProcess(
            config: """
                listen: 127.0.0.1:0
                data_dir: DATA_DIR
                receivers:
                  hae: {kind: hae, auth: {type: bearer, token: right-token}}
                """)
        for _ in 0..<5 {
            #expect(
                try serve.client().request("POST", "/api/data", headers: [("Authorization", "Bearer guess-Zq81")], body: Array("{}".utf8))
                    .status == 401)
        }
        #expect(ServeProcess.eventually { serve.stderrText.contains("hae: refused a request from 127.0.0.1 (401") }, "\(serve.stderrText)")
        #expect(
            try serve.client().request("GET", "/metrics").text.contains(
                #"healthgate_requests_refused_total{receiver="hae",reason="auth"} 5"#))
        serve.stop()
        #expect(!serve.stderrText.contains("guess-Zq81") && !serve.stderrText.contains("right-token"))
    }
}
