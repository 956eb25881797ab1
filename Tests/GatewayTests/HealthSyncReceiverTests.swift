import Foundation
@testable import Gateway
import HealthgateCore
@testable import HealthgateTesting
@testable import Pipeline
import SinkKit
import Testing

/// The HealthSync app's backend contract, through serve.
@Suite(.serialized) struct HealthSyncReceiverTests {
    static let config = """
        listen: 127.0.0.1:0
        data_dir: DATA_DIR
        receivers:
          healthsync:
            kind: healthsync
            auth: {type: bearer, token: hs-token}
        routes:
          - {name: all, from: ["*"], to: [archive]}
        sinks:
          archive: {kind: file, path: "archive.ndjson", batch: {max_wait: 10ms}}
        """

    static let v2 = """
        {"schema_version": 2, "export_id": "exp-001",
         "metrics": [
           {"id": "healthkit:5E1D0000-0000-4000-8000-000000000001", "type": "stepCount", "value": 412, "unit": "count",
            "start_date": "2026-10-14T07:01:00Z", "end_date": "2026-10-14T07:01:59Z", "source": "Apple Watch"},
           {"id": "healthkit:AA-2", "type": "bodyMass", "value": 70500, "unit": "g", "start_date": "2026-10-14T07:00:00+02:00",
            "metadata": {"HKWasUserEntered": "1"}},
           {"id": "healthkit:AA-3", "type": "oxygenSaturation", "value": 0.97, "unit": "%", "start_date": "2026-10-14T07:00:00Z",
            "metadata": {"aggregation": "original"}},
           {"id": "healthkit:AA-4", "type": "sleepAnalysis", "value": "asleepCore", "start_date": "2026-10-13T23:10:00Z",
            "end_date": "2026-10-14T00:40:00Z"},
           {"id": "healthkit:AA-5", "type": "someFutureType", "value": 1, "unit": "zz", "start_date": "2026-10-14T07:00:00Z"}
         ],
         "workouts": [
           {"id": "healthkit:0B6F0000-0000-4000-8000-000000000001", "activity_type": "elliptical", "start_date": "2026-10-14T05:00:00Z",
            "end_date": "2026-10-14T05:31:10Z", "active_energy_kcal": 312.4, "total_energy_kcal": 380.1, "distance_meters": 5020,
            "metadata": {"hk_workout_activity_type": "16", "average_heart_rate_bpm": "142", "average_mets": "7.9"}},
           {"id": "healthkit:WW-2", "activity_type": "hk_84", "start_date": "2026-10-14T06:00:00Z", "end_date": "2026-10-14T06:30:00Z",
            "metadata": {"hk_workout_activity_type": "84"}}
         ],
         "deletions": [{"id": "healthkit:DD-1", "kind": "metric"}, {"id": "healthkit:DD-2", "kind": "workout"}]}
        """

    @Test func takesABatchAndRecognisesItWhenSentAgain() throws {
        let serve = try ServeProcess(config: Self.config)
        let c = serve.client()
        let headers = [
            ("Authorization", "Bearer hs-token"), ("Content-Type", "application/json"),
            ("X-Device-Id", "phone-A"), ("X-App-Version", "1.4")
        ]
        let r = try c.request("POST", "/api/apple-health/sync", headers: headers, body: Array(Self.v2.utf8))
        #expect(r.status == 200, "\(r.text)")
        #expect(r.json?["duplicate"] as? Bool == false)
        #expect(r.json?["accepted"] as? [String: Int] == ["metrics": 5, "workouts": 2, "deletions": 2])
        var got: [[String: Any]] = []
        #expect(
            ServeProcess.eventually {
                got = serve.ndjson(under: ""); return got.count == 9
            }, "\(got.count)")
        func rec(_ uuid: String) -> [String: Any]? { got.first { $0["uuid"] as? String == uuid } }
        let steps = try #require(rec("5E1D0000-0000-4000-8000-000000000001"))
        #expect(steps["type"] as? String == "steps" && steps["value"] as? Int == 412 && steps["device"] as? String == "phone-A")
        #expect(rec("AA-2")?["value"] as? Double == 70.5 && rec("AA-2")?["unit"] as? String == "kg")
        #expect(rec("AA-2")?["start"] as? String == "2026-10-14T05:00:00Z" && rec("AA-2")?["utc_offset"] as? String == "+02:00")
        #expect(rec("AA-3")?["value"] as? Double == 0.97)
        #expect(rec("AA-4")?["value"] as? String == "asleep_core" && rec("AA-4")?["code"] as? Int == 3)
        #expect(rec("AA-5")?["type"] as? String == "someFutureType")
        let w = try #require(rec("0B6F0000-0000-4000-8000-000000000001"))
        #expect(w["activity"] as? String == "elliptical" && w["energy_kcal"] as? Double == 312.4 && w["distance_m"] as? Int == 5020)
        #expect((w["metadata"] as? [String: String])?["average_heart_rate_bpm"] == "142")
        #expect((w["extra"] as? [String: Any])?["total_energy_kcal"] as? Double == 380.1)
        #expect(rec("WW-2")?["activity"] as? String == "underwater_diving")
        #expect(rec("DD-1")?["op"] as? String == "delete" && rec("DD-1")?["device"] as? String == "phone-A")
        #expect(rec("DD-2")?["kind"] as? String == "workout")
        // The same export again: recognised, answered, not stored twice.
        let again = try c.request("POST", "/api/apple-health/sync", headers: headers, body: Array(Self.v2.utf8))
        #expect(again.status == 200 && again.json?["duplicate"] as? Bool == true)
        // …also after a restart.
        serve.stop()
        let restarted = try ServeProcess(config: Self.config, dataDir: serve.dataDir)
        let third = try restarted.client().request("POST", "/api/apple-health/sync", headers: headers, body: Array(Self.v2.utf8))
        #expect(third.json?["duplicate"] as? Bool == true)
        // Another device may use the same export id: it is a different batch.
        let other = try restarted.client().request(
            "POST", "/api/apple-health/sync",
            headers: [("Authorization", "Bearer hs-token"), ("X-Device-Id", "phone-B")],
            body: Array(Self.v2.utf8))
        #expect(other.json?["duplicate"] as? Bool == false)
        #expect(ServeProcess.eventually { restarted.ndjson(under: "").count == 18 })
    }

    /// An empty batch does not register its export id: the real batch sent later with that
    /// id used to be answered `duplicate: true` and never stored.
    @Test func anEmptyBatchDoesNotMarkItsExportIDAsSeen() throws {
        let serve = try ServeProcess(config: Self.config)
        let c = serve.client()
        let headers = [("Authorization", "Bearer hs-token"), ("X-Device-Id", "phone-E")]
        let empty = try c.request(
            "POST", "/api/apple-health/sync", headers: headers,
            body: Array(#"{"export_id":"exp-9","metrics":[],"workouts":[]}"#.utf8))
        #expect(empty.status == 200 && empty.json?["duplicate"] as? Bool == false)
        let real =
            #"{"export_id":"exp-9","metrics":[{"id":"healthkit:E1","type":"stepCount","value":5,"unit":"count","start_date":"2026-10-14T07:00:00Z"}]}"#
        let first = try c.request("POST", "/api/apple-health/sync", headers: headers, body: Array(real.utf8))
        #expect(first.json?["duplicate"] as? Bool == false, "\(first.text)")
        #expect(ServeProcess.eventually { serve.ndjson(under: "").contains { $0["uuid"] as? String == "E1" } })
        // Now it has stored records, a resend is recognised; an id with a line break in it too.
        #expect(
            try c.request("POST", "/api/apple-health/sync", headers: headers, body: Array(real.utf8)).json?["duplicate"] as? Bool == true)
        let odd = real.replacingOccurrences(of: "exp-9", with: #"exp\n10"#)
        #expect(
            try c.request("POST", "/api/apple-health/sync", headers: headers, body: Array(odd.utf8)).json?["duplicate"] as? Bool == false)
        #expect(ServeProcess.eventually { serve.ndjson(under: "").filter { $0["uuid"] as? String == "E1" }.count == 2 })
        #expect(
            try c.request("POST", "/api/apple-health/sync", headers: headers, body: Array(odd.utf8)).json?["duplicate"] as? Bool == true)
    }

    @Test func refusesWhatItCannotTake() throws {
        let serve = try ServeProcess(config: Self.config)
        let c = serve.client()
        let v1 =
            #"{"metrics":[{"id":"healthkit:X1","type":"restingHeartRate","value":55,"unit":"count/min","start_date":"2026-10-14T07:00:00Z"}]}"#
        #expect(
            try c.request(
                "POST", "/api/apple-health/sync", headers: [("Authorization", "Bearer hs-token"), ("X-Device-Id", "p")],
                body: Array(v1.utf8)
            ).status == 200)
        #expect(
            try c.request(
                "POST", "/api/apple-health/sync", headers: [("Authorization", "Bearer nope"), ("X-Device-Id", "p")],
                body: Array(v1.utf8)
            ).status == 401)
        let noDevice = try c.request(
            "POST", "/api/apple-health/sync", headers: [("Authorization", "Bearer hs-token")], body: Array(v1.utf8))
        #expect(noDevice.status == 400 && noDevice.text.contains("X-Device-Id"))
        let v3 = try c.request(
            "POST", "/api/apple-health/sync", headers: [("Authorization", "Bearer hs-token"), ("X-Device-Id", "p")],
            body: Array(#"{"schema_version":3}"#.utf8))
        #expect(v3.status == 400 && v3.text.contains("schema version 3"))
        // A bad metric beside a good one: the good one is taken, the bad one set aside.
        let mixed =
            #"{"metrics":[{"id":"healthkit:G","type":"stepCount","value":1,"start_date":"2026-10-14T07:00:00Z"},{"type":"stepCount","value":2}]}"#
        let m = try c.request(
            "POST", "/api/apple-health/sync", headers: [("Authorization", "Bearer hs-token"), ("X-Device-Id", "p")],
            body: Array(mixed.utf8))
        #expect(m.json?["accepted"] as? [String: Int] == ["metrics": 1, "workouts": 0, "deletions": 0])
        #expect(ServeProcess.eventually { !serve.ndjson(under: "quarantine").isEmpty })
    }
}
