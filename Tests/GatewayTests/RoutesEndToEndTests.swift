import Foundation
@testable import Gateway
import HealthgateCore
@testable import HealthgateTesting
import Testing

/// Three routes into three real sinks through `serve`, each shaping the data its own way; what
/// each sink received is checked record by record.
@Suite(.serialized) struct RoutesEndToEndTests {
    static let anna = "d_zsOZnTQUz_juWFVljuOOBQ"

    /// dedupe in front of an appending sink: the phone resends a chunk after healthgate was
    /// killed; the archive still holds each sample once (what dedupe remembers was committed
    /// with the sink's cursor), and nothing sent is missing.
    @Test func dedupeSurvivesSIGKILL() throws {
        let config = """
            listen: 127.0.0.1:0
            data_dir: DATA_DIR
            receivers:
            \(Vectors.phoneReceiver)
            routes:
              - {from: [phone], transforms: [{dedupe: {ttl: 1d}}], to: [archive]}
            sinks:
              archive: {kind: file, path: "archive.ndjson", batch: {max_wait: 10ms}}
            """
        func chunk(_ prefix: String, _ n: Int) -> [String] {
            (0..<n).map {
                #"{"uuid":"\#(prefix)\#($0)","type":"steps","value":\#($0),"unit":"count","start":"2026-12-01T08:00:00Z","end":"2026-12-01T08:00:59Z"}"#
            }
        }
        func post(_ serve: ServeProcess, _ samples: [String]) throws {
            let delivery = UUID().uuidString.lowercased()
            let body = Vectors.syncBody(samples: samples, delivery: delivery)
            let r = try serve.client().request(
                "POST", "/hook", headers: LiveServeTests.signedHeaders(body, delivery: delivery),
                body: Array(body.utf8))
            #expect(r.status == 200)
        }
        var serve = try ServeProcess(config: config)
        let file = serve.dataDir + "/archive.ndjson"
        func uuids() -> [String] { ServeProcess.ndjson(under: serve.dataDir).compactMap { $0["uuid"] as? String } }
        try post(serve, chunk("a", 50))
        try post(serve, chunk("a", 50)) // a resend while it runs
        #expect(ServeProcess.eventually { uuids().count == 50 })
        usleep(300_000) // the cursor (and what dedupe remembers) is committed after the write
        serve.stop(signal: SIGKILL)
        serve = try ServeProcess(config: config, dataDir: serve.dataDir)
        try post(serve, chunk("a", 50) + chunk("b", 10))
        #expect(ServeProcess.eventually { uuids().count >= 60 })
        usleep(300_000)
        let all = uuids()
        #expect(all.count == 60, "\(all.count) lines in \(file)")
        #expect(Set(all).count == 60)
        serve.stop()
    }

    @Test func threeRoutesThreeSinksEachGetsWhatItsRouteSays() throws {
        let influx = try DatabaseProcess.influxDB()
        let pg = try DatabaseProcess.postgres()
        let config = """
            listen: 127.0.0.1:0
            data_dir: DATA_DIR
            receivers:
            \(Vectors.phoneReceiver)
            routes:
              - name: dashboards                  # heart rate and steps only, labelled, weight in pounds
                from: [phone]
                transforms:
                  - filter: {types: [heart_rate, steps, body_mass], values: {heart_rate: {min: 25, max: 250}}}
                  - convert: {body_mass: lb}
                  - tag: {person: anna}
                to: [influx]
              - name: database                    # everything, the phone under a readable name
                from: ["*"]
                transforms:
                  - rename: {devices: {\(Self.anna): anna-iphone}}
                  - tag: {household: home}
                to: [db]
              - name: archive                     # everything but beats, no metadata, locations coarsened
                from: [phone]
                transforms:
                  - filter: {exclude_kinds: [heartbeat_series]}
                  - drop: {fields: [metadata], coarsen_location: 2}
                to: [archive]
            sinks:
              influx: {kind: influxdb, api: v1, url: "\(influx.url)", database: health, precision: s, batch: {max_wait: 10ms}}
              db: {kind: postgres, dsn: "\(pg.postgresURL)", batch: {max_wait: 10ms}}
              archive: {kind: file, path: "archive/{device}.ndjson", batch: {max_wait: 10ms}}
            """
        let serve = try ServeProcess(config: config)
        let t = "2026-12-01T08:00:00Z", t2 = "2026-12-01T08:00:30Z"
        let samples = [
            #"{"uuid":"hr1","type":"heart_rate","value":62,"unit":"count/min","start":"\#(t)","end":"\#(t)","metadata":{"HKMetadataKeyHeartRateMotionContext":1}}"#,
            #"{"uuid":"hr2","type":"heart_rate","value":900,"unit":"count/min","start":"\#(t2)","end":"\#(t2)"}"#,
            #"{"uuid":"st1","type":"steps","value":412,"unit":"count","start":"\#(t)","end":"\#(t2)"}"#,
            #"{"uuid":"kg1","type":"body_mass","value":70,"unit":"kg","start":"\#(t)","end":"\#(t)"}"#,
            #"{"uuid":"o2","type":"oxygen_saturation","value":0.97,"unit":"%","start":"\#(t)","end":"\#(t)"}"#,
            #"{"uuid":"rt1","type":"workout_route","start":"\#(t)","end":"\#(t2)","part":0,"parts":1,"count":2,"points":[{"lat":47.497912,"lon":19.040235},{"lat":47.498011,"lon":19.041001}]}"#,
            #"{"uuid":"hb1","type":"heartbeat_series","start":"\#(t)","end":"\#(t2)","count":2,"part":0,"parts":1,"beats":[[0,0],[842,0]]}"#
        ]
        let body = Vectors.syncBody(samples: samples)
        let r = try serve.client().request("POST", "/hook", headers: LiveServeTests.signedHeaders(body), body: Array(body.utf8))
        #expect(r.status == 200, "\(String(decoding: r.body, as: UTF8.self))")

        // influx: heart rate (the implausible one filtered out), steps, weight in lb; labelled.
        #expect(ServeProcess.eventually { ((try? influx.influxRows("SELECT * FROM body_mass")) ?? []).count == 1 })
        let hr = try influx.influxRows("SELECT * FROM heart_rate")
        #expect(hr.count == 1 && hr.first?["value"] as? Double == 62 && hr.first?["person"] as? String == "anna", "\(hr)")
        #expect(try influx.influxRows("SELECT * FROM steps").first?["value"] as? Double == 412)
        let kg = try influx.influxRows("SELECT * FROM body_mass").first
        #expect(
            abs((kg?["value"] as? Double ?? 0) - 154.32358352941433) < 1e-9 && kg?["unit"] as? String == "lb", "\(String(describing: kg))")
        #expect(try influx.influxRows("SELECT * FROM oxygen_saturation").isEmpty)

        // db: every record, under the new device name, with the household label.
        #expect(ServeProcess.eventually(15) { (try? pg.psql("SELECT count(*) FROM healthgate.records")) == "7" })
        #expect(try pg.psql("SELECT DISTINCT device || ' ' || (tags->>'household') FROM healthgate.records") == "anna-iphone home")
        #expect(try pg.psql("SELECT value FROM healthgate.records WHERE uuid = 'kg1'") == "70") // no convert on this route
        #expect(try pg.psql("SELECT count(*) FROM healthgate.records WHERE metadata IS NOT NULL") == "1")

        // archive: no beats, no metadata, the route's points at 2 decimals, nothing converted or labelled.
        #expect(ServeProcess.eventually { ServeProcess.ndjson(under: serve.dataDir + "/archive").count == 6 })
        let lines = ServeProcess.ndjson(under: serve.dataDir + "/archive")
        #expect(Set(lines.compactMap { $0["uuid"] as? String }) == ["hr1", "hr2", "st1", "kg1", "o2", "rt1"])
        #expect(lines.allSatisfy { $0["metadata"] == nil && $0["tags"] == nil })
        let route = lines.first { $0["uuid"] as? String == "rt1" }
        let points = route?["points"] as? [[String: Double]]
        #expect(points == [["lat": 47.5, "lon": 19.04], ["lat": 47.5, "lon": 19.04]], "\(String(describing: route))")
        serve.stop()
    }
}
