import Foundation
@testable import Gateway
import HealthgateCore
@testable import HealthgateTesting
@testable import Pipeline
import CanonicalJSON
import FastJSON
import FuzzTargets
import SinkKit
@testable import Posix
import Testing

/// `POST /v1/ingest` as its spec describes it, through serve.
@Suite(.serialized) struct IngestReceiverTests {
    /// Zone names are checked byte by byte (for every sample that gives one): letters, digits,
    /// `/ _ - +`, never a dot, a leading slash, or 64 bytes.
    @Test func zoneNamesAreCheckedByteByByte() {
        for good in ["UTC", "Europe/Budapest", "America/Argentina/Buenos_Aires", "Etc/GMT+5", "America/Port-au-Prince"] {
            #expect(TimeZones.valid(good), "\(good)")
        }
        for bad in [
            "", "../etc/passwd", "Europe/..", "Europe/Bud.apest", "/etc/localtime", "Europe/Bud apest", "Éurope/X",
            String(repeating: "a", count: 64)
        ] {
            #expect(!TimeZones.valid(bad), "\(bad)")
        }
        #expect(TimeZones.valid(String(repeating: "a", count: 63)))
    }

    static let config = """
        listen: 127.0.0.1:0
        data_dir: DATA_DIR
        receivers:
          chunks:
            kind: ingest
            auth: {type: bearer, token: device-token-1}
            max_items: 12
        routes:
          - {name: all, from: ["*"], to: [archive]}
        sinks:
          archive: {kind: file, path: "archive.ndjson", batch: {max_wait: 10ms}}
        """

    static let chunk = """
        {
          "device_id": "9a1f-phone",
          "time_zone": "Europe/Budapest",
          "samples": [
            {"source_uuid": "0B2C-1", "data_type": "stepCount", "ts": "2026-08-11T07:15:00Z", "value": 412, "unit": "count",
             "source_device": "watch", "source_bundle": "com.apple.health", "workout_source_uuid": "7F31-1"},
            {"source_uuid": "0B2C-2", "data_type": "bodyMass", "ts": "2026-01-11T07:15:00Z", "value": 70500, "unit": "g"},
            {"source_uuid": "0B2C-3", "data_type": "distanceWalkingRunning", "ts": "2026-08-11T07:15:00Z", "value": 1.2, "unit": "km"},
            {"source_uuid": "0B2C-4", "data_type": "brandNewType", "ts": "2026-08-11T07:15:00Z", "value": 3, "unit": "zz"}
          ],
          "workouts": [
            {"source_uuid": "7F31-1", "activity_type": "running", "started_at": "2026-08-10T16:02:00Z", "ended_at": "2026-08-10T16:47:00Z",
             "total_energy_kcal": 421.5, "total_distance_m": 8120,
             "route": [{"ts": "2026-08-10T16:02:05Z", "lat": 47.4979, "lon": 19.0402, "accuracy_m": 4.1}]}
          ],
          "sleep_segments": [{"source_uuid": "C4A9-1", "started_at": "2026-08-10T22:41:00Z", "ended_at": "2026-08-11T05:58:00Z", "stage": "asleepCore"}],
          "activity_summaries": [{"day": "2026-08-10", "active_energy": 512, "active_energy_goal": 600, "exercise_minutes": 34,
                                  "exercise_goal": 30, "stand_hours": 11, "stand_goal": 12}],
          "deletions": ["1D77-1"]
        }
        """

    @Test func takesAChunkAndAnswers202WithWhatItTook() throws {
        let serve = try ServeProcess(config: Self.config)
        let c = serve.client()
        let auth = [("Authorization", "Bearer device-token-1"), ("Content-Type", "application/json")]
        let r = try c.request("POST", "/v1/ingest", headers: auth, body: Array(Self.chunk.utf8))
        #expect(r.status == 202, "\(r.text)")
        let json = try #require(r.json)
        #expect((json["batch_id"] as? String)?.count == 36)
        #expect(json["max_items"] as? Int == 12)
        let received = try #require(json["received"] as? [String: Int])
        #expect(received == ["samples": 4, "workouts": 1, "sleep_segments": 1, "activity_summaries": 1, "deletions": 1])
        var got: [[String: Any]] = []
        #expect(
            ServeProcess.eventually {
                got = serve.ndjson(under: ""); return got.count == 8
            }, "\(got.count)")
        func rec(_ uuid: String) -> [String: Any]? { got.first { $0["uuid"] as? String == uuid } }
        #expect(rec("0B2C-1")?["type"] as? String == "steps")
        #expect(rec("0B2C-1")?["device"] as? String == "9a1f-phone")
        #expect(rec("0B2C-1")?["utc_offset"] as? String == "+02:00") // summer time in Budapest
        #expect(rec("0B2C-1")?["timezone"] as? String == "Europe/Budapest") // the zone the phone named
        #expect((rec("0B2C-1")?["extra"] as? [String: Any])?["workout_uuid"] as? String == "7F31-1")
        #expect(rec("0B2C-2")?["value"] as? Double == 70.5 && rec("0B2C-2")?["unit"] as? String == "kg")
        #expect(rec("0B2C-2")?["utc_offset"] as? String == "+01:00") // winter time
        #expect(rec("0B2C-3")?["value"] as? Int == 1200 && rec("0B2C-3")?["unit"] as? String == "m")
        #expect(rec("0B2C-4")?["type"] as? String == "brandNewType" && rec("0B2C-4")?["unit"] as? String == "zz")
        let w = try #require(rec("7F31-1"))
        #expect(w["activity"] as? String == "running" && w["duration_s"] as? Int == 2700 && w["distance_m"] as? Int == 8120)
        #expect((w["route"] as? [[String: Any]])?.first?["lat"] as? Double == 47.4979)
        #expect(rec("C4A9-1")?["value"] as? String == "asleep_core" && rec("C4A9-1")?["code"] as? Int == 3)
        #expect(rec("activity_summary:2026-08-10")?["stand_goal"] as? Int == 12)
        #expect(rec("1D77-1")?["op"] as? String == "delete")
        #expect(try c.request("GET", "/metrics").text.contains(#"healthgate_records_unknown_type_total{receiver="chunks"} 1"#))
        // The same chunk again is another batch, with an id of its own.
        let again = try c.request("POST", "/v1/ingest", headers: auth, body: Array(Self.chunk.utf8))
        #expect(again.status == 202 && again.json?["batch_id"] as? String != json["batch_id"] as? String, "\(again.text)")
    }

    @Test func refusesWhatTheSpecRefuses() throws {
        let serve = try ServeProcess(config: Self.config)
        let c = serve.client()
        let auth = [("Authorization", "Bearer device-token-1")]
        #expect(
            try c.request("POST", "/v1/ingest", headers: [("Authorization", "Bearer nope")], body: Array(Self.chunk.utf8)).status == 401)
        let bad = try c.request("POST", "/v1/ingest", headers: auth, body: Array("{not json".utf8))
        #expect(bad.status == 400 && bad.header("Content-Type") == "application/problem+json")
        #expect(try c.request("POST", "/v1/ingest", headers: auth, body: Array(#"{"samples":[]}"#.utf8)).status == 400)
        // 13 items counting route points: over max_items 12 → 413 with a problem document.
        let points = (0..<9).map { _ in #"{"ts":"2026-08-10T16:02:05Z","lat":1,"lon":2}"# }.joined(separator: ",")
        let big = Self.chunk.replacingOccurrences(
            of: #""route": [{"ts": "2026-08-10T16:02:05Z", "lat": 47.4979, "lon": 19.0402, "accuracy_m": 4.1}]"#,
            with: #""route": [\#(points)]"#)
        #expect(big != Self.chunk)
        let tooMany = try c.request("POST", "/v1/ingest", headers: auth, body: Array(big.utf8))
        #expect(tooMany.status == 413)
        #expect(tooMany.header("Content-Type") == "application/problem+json")
        #expect(tooMany.text.contains("Halve it"))
        // A chunk with only deletions is valid.
        let onlyDeletions = try c.request("POST", "/v1/ingest", headers: auth, body: Array(#"{"device_id":"p","deletions":["x"]}"#.utf8))
        #expect(onlyDeletions.status == 202)
    }

    /// A chunk that cycles through more types, units and sources than the receiver keeps from
    /// one sample to the next (eight types, four strings a field): every record is still its own
    /// sample's, whatever came before it.
    @Test func eachSampleIsItsOwnWhateverCameBeforeIt() throws {
        let given: [(type: String, value: String, unit: String, want: (type: String, value: Double?, name: String?, unit: String))] = [
            ("stepCount", "412", "count", ("steps", 412, nil, "count")),
            ("heartRate", "72", "count/min", ("heart_rate", 72, nil, "count/min")),
            ("bodyMass", "70500", "g", ("body_mass", 70.5, nil, "kg")),
            ("distanceWalkingRunning", "1.5", "km", ("distance_walking_running", 1500, nil, "m")),
            ("activeEnergyBurned", "12", "kcal", ("active_energy_burned", 12, nil, "kcal")),
            ("restingHeartRate", "55", "count/min", ("resting_heart_rate", 55, nil, "count/min")),
            ("oxygenSaturation", "0.97", "%", ("oxygen_saturation", 0.97, nil, "%")),
            ("flightsClimbed", "3", "count", ("flights_climbed", 3, nil, "count")),
            ("HKQuantityTypeIdentifierBodyMass", "154", "lb", ("body_mass", 154 * 0.45359237, nil, "kg")),
            ("appleStandHour", #""idle""#, "", ("apple_stand_hour", nil, "idle", "")),
            ("brandNewType", "3", "zz", ("brandNewType", 3, nil, "zz")),
            ("distanceWalkingRunning", "800", "m", ("distance_walking_running", 800, nil, "m"))
        ]
        let sources = [
            ("watch", "com.apple.health"), ("phone", "com.example.a"), ("ring", "com.example.b"),
            ("scale", "com.example.c"), ("band", "com.example.d")
        ]
        var items: [String] = []
        for i in 0..<60 {
            let g = given[i % given.count], (dev, app) = sources[i % sources.count]
            let unit = g.unit.isEmpty ? "" : #","unit":"\#(g.unit)""#
            items.append(
                #"{"source_uuid":"u-\#(i)","data_type":"\#(g.type)","ts":"2026-0\#(1 + i % 9)-11T07:15:00Z","value":\#(g.value)\#(unit),"#
                    + #""source_device":"\#(dev)","source_bundle":"\#(app)"}"#)
        }
        // One sample that ends before it starts: set aside, the others kept.
        items.append(
            #"{"source_uuid":"backwards","data_type":"stepCount","ts":"2026-08-11T07:15:00Z","end_ts":"2026-08-11T07:14:00Z","value":1}"#)
        let body = #"{"device_id":"p1","time_zone":"America/New_York","samples":["# + items.joined(separator: ",") + "]}"
        let receiver = IngestReceiver(
            name: "chunks", paths: ["/v1/ingest"], maxBodyBytes: 1 << 20, auth: Authenticator(kind: .none),
            maxItems: 1000, parsers: ParserPool())
        let reception = receiver.receive(
            HTTPRequest(method: "POST", path: "/v1/ingest", headers: [], body: Array(body.utf8)),
            context: ReceiveContext(now: Timestamp(seconds: 1_791_961_500)))
        guard case .accept(let batch, let reply) = reception else { Issue.record("not accepted: \(reception)"); return }
        #expect(reply.status == 202)
        #expect(batch.quarantined.map(\.reason) == [#""end_ts" is before "ts""#])
        let records = CanonicalCodec.decodeLines(batch.payload, parser: JSONParser())
        try #require(records.count == 60)
        for (i, r) in records.enumerated() {
            let want = given[i % given.count].want, (dev, app) = sources[i % sources.count]
            #expect(r.uuid == "u-\(i)" && r.type == want.type && (r.unit ?? "") == want.unit, "\(i): \(r.type) \(r.unit ?? "-")")
            if let v = want.value {
                guard case .number(let got)? = r.value else { Issue.record("\(i): no number"); continue }
                #expect(abs(got - v) < 1e-9 * max(1, abs(v)), "\(i): \(got) \(v)")
            } else {
                #expect(r.value == .string(want.name!) && r.kind == RecordKind.category && r.code == 1, "\(i)")
            }
            #expect(r.source == RecordSource(app: app, device: dev), "\(i)")
            #expect(r.extra.isEmpty && r.timeZone == "America/New_York", "\(i)")
            #expect(r.end == r.start && r.utcOffset == ((1 + i % 9) >= 3 && (1 + i % 9) <= 10 ? -4 : -5) * 3600, "\(i)")
        }
    }

    @Test func timeZoneOffsetsFollowDaylightSaving() {
        #expect(TimeZones.offset("Europe/Budapest", at: 1_786_432_500) == 7200) // 2026-08-11
        #expect(TimeZones.offset("Europe/Budapest", at: 1_768_115_700) == 3600) // 2026-01-11
        #expect(TimeZones.offset("America/New_York", at: 1_786_432_500) == -4 * 3600)
        #expect(TimeZones.offset("UTC", at: 0) == 0)
        #expect(TimeZones.offset("../../etc/passwd", at: 0) == nil)
        #expect(TimeZones.offset("Mars/Olympus_Mons", at: 0) == nil)
    }

    /// Before standard time a zone keeps its local mean time, in seconds (Budapest +1:16:20 until
    /// 1890, Amsterdam +0:19:32 until 1937, Detroit -5:32:11 until 1905): offsets are whole minutes
    /// (the nearest), as a record's `utc_offset` (±hh:mm) can say. Found by `make fuzz` (ingest:
    /// a sample of 1013 in Europe/Budapest was kept for the drainers with +1:16:20 while its
    /// journal line said +01:16).
    @Test func localMeanTimeIsRoundedToAWholeMinute() throws {
        let year1013 = Timestamp.parseRFC3339("1013-12-01T16:05:00Z")!.0.seconds
        #expect(TimeZones.offset("Europe/Budapest", at: year1013) == 76 * 60)
        #expect(TimeZones.offset("Europe/Amsterdam", at: -2_000_000_000) == 20 * 60)
        #expect(TimeZones.offset("America/Detroit", at: -2_500_000_000) == -(5 * 60 + 32) * 60)
        #expect(TimeZones.wholeMinutes(89) == 60 && TimeZones.wholeMinutes(90) == 120 && TimeZones.wholeMinutes(-90) == -120)

        // What ingest keeps for the drainers that take its records is what the journal's line
        // decodes to (the fuzz targets' oracle), and that line says +01:16.
        let config = """
            receivers:
              ingest: {kind: ingest}
            sinks:
              out: {kind: file, path: out.ndjson}
            routes:
              - {from: [ingest], to: [out]}
            """
        let topology = try ConfigLoader.load(
            text: config, file: "t.yaml", environment: [:],
            logger: Logger(component: "t", sink: MemoryLogSink()))
        let receiver = try #require(topology.receivers.first?.receiver)
        let body = Array(
            #"{"device_id":"ios-1","time_zone":"Europe/Budapest","samples":[{"source_uuid":"hr-a","data_type":"heartRate","ts":"1013-12-01T16:05:00Z","value":140,"unit":"count/min"}]}"#
                .utf8)
        let request = HTTPRequest(method: "POST", path: receiver.paths[0], query: "", headers: [], body: body)
        let reception = receiver.receive(request, context: ReceiveContext(now: Timestamp(seconds: 1_800_000_000)))
        #expect(FuzzTargets.problem(nil, reception, of: "ingest") == nil)
        guard case .accept(let batch, _) = reception else {
            Issue.record("not accepted: \(reception)")
            return
        }
        #expect(String(decoding: batch.payload, as: UTF8.self).contains(#""utc_offset":"+01:16""#))
    }
}
