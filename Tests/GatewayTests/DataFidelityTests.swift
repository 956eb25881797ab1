import Foundation
@testable import Gateway
import HealthgateCore
@testable import HealthgateTesting
@testable import SinkMQTT
import Testing

/// Issue 48: what the apps send comes out of the storing sinks as they mean it, through a real
/// PostgreSQL 15 (its views and the read API) and a real mosquitto (the Home Assistant sensors):
/// a night the app summed up counts like one sent as segments, a bare date is the phone's day,
/// a workout's own heart rate is used, a record's own min and max make the day's, HealthKit
/// identifiers in line protocol are the types they name, and no field of a point is lost.
@Suite(.serialized) struct DataFidelityTests {
    static let reader = "reader-token-0123456789"

    static func config(_ db: DatabaseProcess, _ broker: DatabaseProcess) -> String {
        """
        listen: 127.0.0.1:0
        data_dir: DATA_DIR
        receivers:
          hae: {kind: hae, path: /api/data, auth: {type: bearer, token: hae-token-0123456789}, device: anna}
          influx: {kind: influx, auth: {type: bearer, token: influx-token-0123456789}, device: lab}
          healthsync: {kind: healthsync, auth: {type: bearer, token: hs-token-0123456789}}
        routes:
          - {from: ["*"], to: [db, home]}
        sinks:
          db:
            kind: postgres
            dsn: "\(db.postgresURL)"
            connect_timeout: 2s
            retry: {initial: 100ms, max: 500ms}
            batch: {max_wait: 10ms}
          home:
            kind: mqtt
            url: mqtt://127.0.0.1:\(broker.port)
            timeout: 2s
            retry: {initial: 100ms, max: 500ms}
            batch: {max_wait: 10ms}
        read_api:
          sink: db
          tokens: [{token: \(reader)}]
        """
    }

    /// Health Auto Export as its users' captures have it: heart rate as Min/Avg/Max; a night
    /// summed up with stages and a bare date (no window), and one in the form before 6.6.2
    /// (asleep only, with its windows); workouts with their heart rate three ways, and one
    /// without, whose heart rate is the samples in its window.
    static let hae = #"""
        {"data":{"metrics":[
          {"name":"heart_rate","units":"count/min","data":[
            {"date":"2024-02-06 08:00:00 -0800","Min":52,"Avg":61,"Max":75,"source":"Apple Watch"},
            {"date":"2024-02-06 09:00:00 -0800","Min":58,"Avg":90,"Max":131,"source":"Apple Watch"}]},
          {"name":"sleep_analysis","units":"hr","data":[
            {"date":"2024-02-06","totalSleep":7.5,"asleep":0.5,"core":4,"deep":1.25,"rem":1.75,"awake":0.25,"inBed":8,"source":"Apple Watch"},
            {"date":"2024-02-08 07:02:00 -0800","asleep":6.5,"inBed":7,"sleepStart":"2024-02-07 23:30:00 -0800",
             "sleepEnd":"2024-02-08 07:00:00 -0800","inBedStart":"2024-02-07 23:00:00 -0800","inBedEnd":"2024-02-08 07:02:00 -0800",
             "sleepSource":"Apple Watch","inBedSource":"iPhone"}]}],
         "workouts":[
          {"id":"w-none","name":"Yoga","start":"2024-02-06 07:59:00 -0800","end":"2024-02-06 09:30:00 -0800"},
          {"id":"w-v1","name":"Outdoor Run","start":"2024-02-06 17:00:00 -0800","end":"2024-02-06 17:30:00 -0800",
           "avgHeartRate":{"qty":150,"units":"bpm"},"maxHeartRate":{"qty":171,"units":"bpm"}},
          {"id":"w-v2","name":"Outdoor Walk","start":"2024-02-07 17:00:00 -0800","end":"2024-02-07 17:40:00 -0800",
           "heartRate":{"min":{"qty":80,"units":"bpm"},"avg":{"qty":101,"units":"bpm"},"max":{"qty":120,"units":"bpm"}}},
          {"id":"w-data","name":"Cycling","start":"2024-02-08 17:00:00 -0800","end":"2024-02-08 17:03:00 -0800",
           "heartRateData":[{"date":"2024-02-08 17:00:00 -0800","Min":100,"Avg":110,"Max":120,"units":"count/min"},
                            {"date":"2024-02-08 17:01:00 -0800","Min":120,"Avg":130,"Max":140,"units":"count/min"}]}]}}
        """#

    static let healthSync = #"""
        {"schema_version": 2, "export_id": "exp-fidelity-1", "metrics": [],
         "workouts": [{"id": "healthkit:HS-W-1", "activity_type": "elliptical", "start_date": "2024-02-05T05:00:00Z",
                       "end_date": "2024-02-05T05:30:00Z",
                       "metadata": {"average_heart_rate_bpm": "142", "max_heart_rate_bpm": "163.5"}}]}
        """#

    func post(
        _ serve: ServeProcess, _ path: String, _ token: String, _ body: String, type: String = "application/json",
        status: Int = 200, extra: [(String, String)] = []
    ) throws {
        let r = try serve.client().request(
            "POST", path, headers: [("Authorization", token), ("Content-Type", type)] + extra,
            body: Array(body.utf8))
        #expect(r.status == status, "\(path): \(r.status) \(String(decoding: r.body, as: UTF8.self))")
    }

    func get(_ serve: ServeProcess, _ pathAndQuery: String) throws -> [[String: Any]] {
        let r = try serve.client().request("GET", "/api/v1" + pathAndQuery, headers: [("Authorization", "Bearer \(Self.reader)")])
        #expect(r.status == 200, "\(pathAndQuery): \(String(decoding: r.body, as: UTF8.self))")
        return ReadAPITests.data((try? JSONSerialization.jsonObject(with: Data(r.body))) as? [String: Any] ?? [:])
    }

    @Test func nightsWorkoutsAndDaysAsTheAppsSendThem() throws {
        let db = try DatabaseProcess.postgres()
        let broker = try DatabaseProcess.mosquitto()
        let serve = try ServeProcess(config: Self.config(db, broker))
        try post(serve, "/api/data", "Bearer hae-token-0123456789", Self.hae)
        try post(serve, "/api/apple-health/sync", "Bearer hs-token-0123456789", Self.healthSync, extra: [("X-Device-Id", "bob")])
        PostgresSinkTests.expect(db, "SELECT count(*) FROM healthgate.records WHERE type = 'workout'", is: "5")

        // 1. Nights: a summary is a night like segments are, and every night has a start and an end.
        PostgresSinkTests.expect(
            db, "SELECT count(*) FROM healthgate.records WHERE kind = 'summary' AND (start_at IS NULL OR end_at IS NULL)", is: "0")
        PostgresSinkTests.expect(
            db,
            """
            SELECT string_agg(concat_ws(' ', night, asleep_hours, in_bed_min, awake_min, core_min, deep_min, rem_min,
                                        to_char(bedtime AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI'),
                                        to_char(wake_time AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI'), made_from), ' | ' ORDER BY night)
            FROM healthgate.sleep_nights WHERE device = 'anna'
            """,
            is: "2024-02-05 7.5 480 15 240 75 105 2024-02-06T00:00 2024-02-06T08:00 summary"
                + " | 2024-02-07 6.5 420 2024-02-08T07:30 2024-02-08T15:00 summary")
        let nights = try get(serve, "/sleep?device=anna")
        #expect(
            nights.count == 2 && nights.first?["night"] as? String == "2024-02-05" && nights.first?["asleep_hours"] as? Double == 7.5
                && nights.first?["deep_min"] as? Double == 75 && nights.first?["made_from"] as? String == "summary"
                && nights.first?["bedtime"] as? String == "2024-02-06T00:00:00Z", "\(nights)")
        #expect(try get(serve, "/sleep?device=anna&from=2024-02-06").map { $0["night"] as? String } == ["2024-02-07"])
        // 2. The bare date is the phone's midnight (-08:00, from the body's other times), not UTC's.
        PostgresSinkTests.expect(
            db,
            "SELECT to_char(end_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI'), utc_offset FROM healthgate.records "
                + "WHERE kind = 'summary' AND fields->>'date' LIKE '2024-02-06%'", is: "2024-02-06 08:00|-28800")

        // 3. A workout's own heart rate, three ways and from HealthSync's text; the samples' otherwise.
        PostgresSinkTests.expect(
            db,
            """
            SELECT string_agg(concat_ws(' ', uuid, round(avg_bpm::numeric, 1), round(max_bpm::numeric, 1), heart_rate_from), ' | ' ORDER BY start_at)
            FROM healthgate.workouts
            """,
            is: "HS-W-1 142.0 163.5 workout | w-none 75.5 90.0 samples | w-v1 150.0 171.0 workout"
                + " | w-v2 101.0 120.0 workout | w-data 120.0 140.0 workout")
        let workouts = try get(serve, "/workouts?device=anna")
        let v1 = workouts.first { $0["uuid"] as? String == "w-v1" }?["heart_rate"] as? [String: Any]
        #expect(v1?["avg_bpm"] as? Double == 150 && v1?["from"] as? String == "workout", "\(workouts)")

        // 4. A day's least and greatest heart rate are the records' own Min and Max.
        let days = try get(serve, "/daily?type=heart_rate&device=anna")
        #expect(
            days.count == 1 && days.first?["value"] as? Double == 75.5 && days.first?["min"] as? Double == 52
                && days.first?["max"] as? Double == 131, "\(days)")

        // The same through Home Assistant's sensors.
        let slug = MQTTSink.deviceSlug("anna")
        func state(_ object: String) -> [String: Any] {
            var text = ""
            _ = ServeProcess.eventually(10) {
                text = MQTTSinkTests.retained(broker, "healthgate/\(slug)/\(object)")
                return !text.isEmpty
            }
            return (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:]
        }
        let sleep = state("sleep_last_night")
        #expect(
            sleep["value"] as? Double == 6.5 && sleep["in_bed_min"] as? Double == 420 && sleep["made_from"] as? String == "summary"
                && sleep["bedtime"] as? String == "2024-02-07T23:30:00-08:00", "\(sleep)")
        let heart = state("heart_rate")
        #expect(heart["value"] as? Double == 90 && heart["min"] as? Double == 58 && heart["max"] as? Double == 131, "\(heart)")
        let workout = state("last_workout")
        #expect(workout["heart_rate_avg"] as? Double == 120 && workout["heart_rate_max"] as? Double == 140, "\(workout)")
        serve.stop()
    }

    /// 5 and 6: line protocol as export.xml → InfluxDB scripts and InfluxDB's clients write it.
    @Test func lineProtocolNamesTypesByHealthKitAndLosesNoField() throws {
        let db = try DatabaseProcess.postgres()
        let broker = try DatabaseProcess.mosquitto()
        let serve = try ServeProcess(config: Self.config(db, broker))
        let lines = """
            HKQuantityTypeIdentifierHeartRate,unit=count/min,sourceName=Watch value=72 1707206400
            HKQuantityTypeIdentifierBodyMass,unit=lb value=154.3 1707206400
            HKCategoryTypeIdentifierSleepAnalysis,sourceName=Watch value="HKCategoryValueSleepAnalysisAsleepCore" 1707206400
            HKCategoryTypeIdentifierSleepAnalysis,sourceName=Phone value=2i 1707210000
            cpu,host=a value=1 1707206400
            cpu,host=a load=10.0 1707206400
            cpu,host=a load=12.5 1707206400
            """
        try post(serve, "/api/v2/write?org=o&bucket=b&precision=s", "Token influx-token-0123456789", lines, type: "text/plain", status: 204)
        PostgresSinkTests.expect(
            db,
            """
            SELECT string_agg(concat_ws(' ', type, kind, round(value::numeric, 2), text_value, code, unit, extra::text), ' | '
                              ORDER BY type, start_at, text_value, value, extra::text)
            FROM healthgate.records WHERE device = 'lab'
            """,
            is: "body_mass quantity 69.99 kg"
                + " | cpu quantity 1.00 {\"tag:host\": \"a\"} | cpu quantity {\"load\": 12.5, \"tag:host\": \"a\"}"
                + " | heart_rate quantity 72.00 count/min {\"tag:sourceName\": \"Watch\"}"
                + " | sleep_analysis category asleep_core 3 {\"tag:sourceName\": \"Watch\"}"
                + " | sleep_analysis category awake 2 {\"tag:sourceName\": \"Phone\"}")
        serve.stop()
    }
}
