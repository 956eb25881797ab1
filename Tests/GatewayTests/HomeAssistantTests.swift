import Foundation
@testable import Gateway
import HealthgateCore
@testable import HealthgateTesting
@testable import SinkMQTT
import Testing

/// A real Home Assistant (2024.3.3, the MQTT integration added as a user would) consumes what the
/// mqtt sink announces for two phones — one on Syncky, one on Health Auto Export: every sensor
/// healthgate announces exists in HA on the right device, with the state and unit healthgate
/// published, and HA logs no warning or error about any of it.
@Suite(.serialized) struct HomeAssistantTests {
    static let anna = MQTTSinkTests.device

    static func config(_ port: UInt16) -> String {
        """
        listen: 127.0.0.1:0
        data_dir: DATA_DIR
        receivers:
        \(Vectors.phoneReceiver)
          hae: {kind: hae, auth: {type: header, header: api-key, token: hae-key-123456}, device: bens-iphone}
        routes:
          - {from: [phone, hae], to: [home]}
        sinks:
          home:
            kind: mqtt
            url: mqtt://127.0.0.1:\(port)
            names: {\(anna): "Anna's iPhone", bens-iphone: "Ben's iPhone"}
            people: {Anna: [\(anna)]}
            timeout: 2s
            retry: {initial: 100ms, max: 500ms}
            batch: {max_wait: 10ms}
        """
    }

    static func iso(_ t: Int64) -> String { Timestamp(seconds: t).rfc3339() }

    /// Anna's Syncky samples: steps, heart rate, weight, oxygen, energy, distance, last night's
    /// sleep and a ride.
    static func annasSamples(now: Int64) -> [String] {
        func q(_ uuid: String, _ type: String, _ value: String, _ unit: String, ago: Int64) -> String {
            #"{"uuid":"\#(uuid)","type":"\#(type)","value":\#(value),"unit":"\#(unit)","start":"\#(iso(TestTime.ago(ago, now: now)))","end":"\#(iso(TestTime.ago(ago, now: now) + 30))","source":{"app":"com.apple.Health","device":"Apple Watch"}}"#
        }
        func sleep(_ uuid: String, _ stage: String, ago: Int64, minutes: Int64) -> String {
            #"{"uuid":"\#(uuid)","type":"sleep_analysis","value":"\#(stage)","start":"\#(iso(now - ago))","end":"\#(iso(now - ago + minutes * 60))"}"#
        }
        return [
            q("a-st1", "steps", "1200", "count", ago: 900), q("a-st2", "steps", "345", "count", ago: 300),
            q("a-hr", "heart_rate", "64", "count/min", ago: 120), q("a-kg", "body_mass", "61.4", "kg", ago: 3000),
            q("a-o2", "oxygen_saturation", "0.97", "%", ago: 600), q("a-en", "active_energy_burned", "210.5", "kcal", ago: 800),
            q("a-km", "distance_walking_running", "1830", "m", ago: 700), q("a-rhr", "resting_heart_rate", "52", "count/min", ago: 5000),
            sleep("a-s1", "asleep_core", ago: 30_000, minutes: 300), sleep("a-s2", "asleep_rem", ago: 12_000, minutes: 90),
            #"{"uuid":"a-wo","type":"workout","activity":"cycling","start":"\#(iso(now - 7200))","end":"\#(iso(now - 5400))","duration_s":1800,"energy_kcal":350,"distance_m":12000,"metadata":{},"events":[],"activities":[],"statistics":[],"source":{"app":"com.apple.Health","device":"Apple Watch"}}"#
        ]
    }

    /// Ben's Health Auto Export body (its dates in the phone's offset, +01:00).
    static func bensBody(now: Int64) -> String {
        func d(_ ago: Int64) -> String {
            let t = Timestamp(seconds: TestTime.ago(ago, now: now, offset: 3600) + 3600).rfc3339() // local time at +01:00
            return String(t.prefix(10)) + " " + String(t.dropFirst(11).prefix(8)) + " +0100"
        }
        return #"""
            {"data":{"metrics":[
             {"name":"step_count","units":"count","data":[{"date":"\#(d(600))","qty":2200}]},
             {"name":"heart_rate","units":"count/min","data":[{"date":"\#(d(300))","Min":58,"Avg":71,"Max":88}]},
             {"name":"blood_pressure","units":"mmHg","data":[{"date":"\#(d(1200))","systolic":122,"diastolic":79}]},
             {"name":"body_temperature","units":"degC","data":[{"date":"\#(d(1500))","qty":36.6}]},
             {"name":"weight_body_mass","units":"kg","data":[{"date":"\#(d(4000))","qty":82.1}]}],
             "workouts":[{"id":"B-W1","name":"Running","start":"\#(d(9000))","end":"\#(d(7200))","duration":1800,
               "activeEnergyBurned":{"qty":410,"units":"kcal"},"distance":{"qty":6.2,"units":"km"},
               "avgHeartRate":{"qty":148,"units":"bpm"},"maxHeartRate":{"qty":176,"units":"bpm"}}]}}
            """#
    }

    static func json(_ text: String) -> [String: Any]? {
        try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
    }

    @Test func homeAssistantShowsEverySensorHealthgateAnnounces() throws {
        let broker = try DatabaseProcess.mosquitto()
        var ha: DatabaseProcess
        let token: String
        (ha, token) = try DatabaseProcess.homeAssistant(brokerPort: broker.port)
        let serve = try ServeProcess(config: Self.config(broker.port))
        let now = Int64(Date().timeIntervalSince1970)
        let body = Vectors.syncBody(samples: Self.annasSamples(now: now))
        let r = try serve.client().request("POST", "/hook", headers: LiveServeTests.signedHeaders(body), body: Array(body.utf8))
        #expect(r.status == 200)
        let hae = try serve.client().request(
            "POST", "/api/data", headers: [("api-key", "hae-key-123456"), ("Content-Type", "application/json")],
            body: Array(Self.bensBody(now: now).utf8))
        #expect(hae.status == 200, "\(String(decoding: hae.body, as: UTF8.self))")

        // What healthgate announced and published (retained, so a late subscriber gets it all).
        #expect(
            ServeProcess.eventually(20) {
                !MQTTSinkTests.retained(broker, "healthgate/bens-iphone/last_workout").isEmpty
                    && !MQTTSinkTests.retained(broker, "healthgate/\(MQTTSink.deviceSlug(Self.anna))/last_workout").isEmpty
            })
        usleep(500_000)
        let recorder = try MQTTRecorder(port: broker.port, topic: "homeassistant/sensor/#")
        usleep(500_000)
        recorder.stop()
        let configs = recorder.received.compactMap { Self.json($0.payload) }
        #expect(configs.count == 24, "\(configs.count) sensors announced (12 for Anna, 11 for Ben, Anna's last sync)")

        // Home Assistant has them all.
        var dump: [String: Any] = [:]
        func mqttEntities() -> [[String: Any]] {
            ((dump["entities"] as? [[String: Any]]) ?? []).filter { $0["platform"] as? String == "mqtt" }
        }
        let complete = ServeProcess.eventually(30) {
            guard let d = try? ha.homeAssistantDump(token: token) else { return false }
            dump = d
            let ids = Set(mqttEntities().compactMap { $0["entity_id"] as? String })
            let ready = ((d["states"] as? [[String: Any]]) ?? []).filter {
                ids.contains($0["entity_id"] as? String ?? "") && !["unavailable", "unknown"].contains($0["state"] as? String ?? "")
            }
            return ids.count >= configs.count && ready.count == ids.count
        }
        #expect(complete, "Home Assistant has \(mqttEntities().count) of \(configs.count) sensors")
        let entities = mqttEntities()
        let devices = (dump["devices"] as? [[String: Any]]) ?? []
        let states = (dump["states"] as? [[String: Any]]) ?? []
        for config in configs
        where (config["model"] as? String) != "Person" && !(config["unique_id"] as? String ?? "").hasSuffix("_last_sync") {
            let uniqueID = config["unique_id"] as? String ?? "?"
            guard let entity = entities.first(where: { $0["unique_id"] as? String == uniqueID }),
                let entityID = entity["entity_id"] as? String
            else {
                Issue.record("\(uniqueID) is not in Home Assistant")
                continue
            }
            // On the phone's device, by the name the config gives.
            let device = devices.first { $0["id"] as? String == entity["device_id"] as? String }
            #expect(device?["name"] as? String == (config["device"] as? [String: Any])?["name"] as? String, "\(entityID)")
            // With the state and unit healthgate published.
            let state = states.first { $0["entity_id"] as? String == entityID }
            let attributes = state?["attributes"] as? [String: Any] ?? [:]
            #expect(attributes["unit_of_measurement"] as? String == config["unit_of_measurement"] as? String, "\(entityID)")
            #expect(attributes["device_class"] as? String == config["device_class"] as? String, "\(entityID)")
            let published = Self.json(MQTTSinkTests.retained(broker, config["state_topic"] as? String ?? ""))?["value"]
            let shown = state?["state"] as? String
            switch published {
            case let n as NSNumber:
                #expect(shown.flatMap(Double.init) == n.doubleValue, "\(entityID): \(shown ?? "nil") in HA, \(n) published")
            case let s as String:
                #expect(shown == s, "\(entityID)")
            default:
                Issue.record("\(entityID): no value published (\(String(describing: published)))")
            }
            #expect(attributes["measured_at"] != nil, "\(entityID) has no measured_at")
        }
        // The figures a person looks at.
        func shown(_ entityID: String) -> String? {
            states.first { $0["entity_id"] as? String == entityID }?["state"] as? String
        }
        #expect(shown("sensor.anna_s_iphone_steps_today") == "1545", "\(entities.compactMap { $0["entity_id"] as? String })")
        #expect(shown("sensor.anna_s_iphone_heart_rate") == "64")
        #expect(shown("sensor.anna_s_iphone_blood_oxygen") == "97")
        #expect(shown("sensor.anna_s_iphone_last_workout") == "cycling")
        #expect(shown("sensor.anna_s_iphone_last_workout_duration") == "30")
        #expect(
            shown("sensor.anna_s_iphone_last_workout_distance") == "12.0" || shown("sensor.anna_s_iphone_last_workout_distance") == "12")
        #expect(shown("sensor.ben_s_iphone_last_workout_heart_rate") == "148")
        #expect(shown("sensor.ben_s_iphone_last_workout_energy") == "410")
        // Each phone's workout fired its event entity once, with the workout's figures.
        let event = states.first { $0["entity_id"] as? String == "event.anna_s_iphone_workout" }
        let fired = event?["attributes"] as? [String: Any] ?? [:]
        #expect(fired["event_type"] as? String == "workout" && fired["activity"] as? String == "cycling", "\(String(describing: event))")
        #expect(fired["distance_km"] as? Double == 12 || fired["distance_km"] as? Int == 12, "\(fired)")
        // Last night as HA shows it: its time asleep is its stages' (whichever sleep day is the
        // latest at this hour), with bedtime and wake time.
        let sleep = states.first { $0["entity_id"] as? String == "sensor.anna_s_iphone_sleep_last_night" }
        let night = sleep?["attributes"] as? [String: Any] ?? [:]
        let stages = ["asleep_core_min", "asleep_rem_min"].compactMap { (night[$0] as? NSNumber)?.doubleValue }
        #expect(!stages.isEmpty && night["bedtime"] is String && night["wake_time"] is String, "\(night)")
        #expect(
            (sleep?["state"] as? String).flatMap(Double.init).map { abs($0 - stages.reduce(0, +) / 60) < 0.01 } == true,
            "\(String(describing: sleep))")
        // A sample's own time and source on its state.
        let heart = states.first { $0["entity_id"] as? String == "sensor.anna_s_iphone_heart_rate" }?["attributes"] as? [String: Any]
        #expect(
            heart?["start"] as? String == Self.iso(TestTime.ago(120, now: now)).replacingOccurrences(of: "Z", with: "+00:00"),
            "\(String(describing: heart))")
        #expect(heart?["source_device"] as? String == "Apple Watch")
        #expect(shown("sensor.ben_s_iphone_steps_today") == "2200")
        #expect(shown("sensor.ben_s_iphone_blood_pressure_systolic") == "122")
        #expect(shown("sensor.ben_s_iphone_body_temperature") == "36.6")
        #expect(
            Set(devices.compactMap { $0["manufacturer"] as? String == "Apple Health via healthgate" ? $0["name"] as? String : nil })
                == ["Anna's iPhone", "Ben's iPhone", "Anna"])
        // Anna's phone is grouped under her (`people:`); her device says when it last synced.
        let annaDevice = devices.first { $0["name"] as? String == "Anna" }
        let annasPhone = devices.first { $0["name"] as? String == "Anna's iPhone" }
        #expect(annasPhone?["via_device_id"] as? String == annaDevice?["id"] as? String && annaDevice != nil, "\(devices)")
        #expect(devices.first { $0["name"] as? String == "Ben's iPhone" }?["via_device_id"] is NSNull)
        let lastSync = shown("sensor.anna_last_sync") ?? ""
        let syncedAt = ISO8601DateFormatter().date(
            from: lastSync.replacingOccurrences(of: #"\.\d+"#, with: "", options: .regularExpression))
        #expect(syncedAt.map { abs($0.timeIntervalSince1970 - Double(now)) < 600 } == true, "\(lastSync)")

        // Nothing Home Assistant complained about (but its own two start-up notices: pip skipped
        // on purpose, Python 3.11 deprecated by 2024.4).
        let problems = ha.homeAssistantProblems.filter { !$0.contains("[homeassistant.bootstrap]") }
        #expect(problems.isEmpty, "Home Assistant logged:\n\(problems.joined(separator: "\n"))")
        // (The check sees what it should: a payload with a device class HA has not got is logged.)
        try DatabaseProcess.run(
            "/usr/bin/mosquitto_pub",
            [
                "-h", "127.0.0.1", "-p", "\(broker.port)", "-t",
                "homeassistant/sensor/probe/bad/config", "-m",
                #"{"name":"bad","unique_id":"probe_bad","state_topic":"probe/bad","device_class":"heart_rate"}"#
            ])
        #expect(ServeProcess.eventually(10) { ha.homeAssistantProblems.contains { $0.contains("heart_rate") } })

        // Home Assistant restarted: every sensor shows what it showed (the states are retained).
        // (An event entity is not restored by HA's MQTT integration: it waits for the next workout.)
        let before = Dictionary(
            uniqueKeysWithValues: mqttEntities().filter { ($0["entity_id"] as? String)?.hasPrefix("sensor.") == true }.compactMap { e in
                (e["entity_id"] as? String).map { id in (id, states.first { $0["entity_id"] as? String == id }?["state"] as? String ?? "") }
            })
        let again = ha.restartableHomeAssistant()
        ha.stop()
        ha = try again()
        var after: [String: String] = [:]
        let same = ServeProcess.eventually(60) {
            guard let d = try? ha.homeAssistantDump(token: token) else { return false }
            for s in (d["states"] as? [[String: Any]]) ?? [] {
                if let id = s["entity_id"] as? String, before[id] != nil { after[id] = s["state"] as? String }
            }
            return after == before
        }
        #expect(same, "before \(before.sorted { $0.key < $1.key }) after \(after.sorted { $0.key < $1.key })")
        serve.stop()
    }
}
