import Foundation
@testable import Gateway
import HealthgateCore
@testable import HealthgateTesting
@testable import SinkMQTT
import Posix
import SinkKit
import Testing
import YAMLConfig

/// The mqtt sink through `serve`, against a real mosquitto: sensors announce themselves, states
/// are retained and stay right through a resend, a deletion and a late older sample; Home
/// Assistant's birth message brings the configs back; SIGKILL leaves the last will; a broker
/// restart mid-stream loses nothing.
@Suite(.serialized) struct MQTTSinkTests {
    static let device = "d_zsOZnTQUz_juWFVljuOOBQ"
    static var slug: String { MQTTSink.deviceSlug(device) }

    static func config(_ port: UInt16) -> String {
        """
        listen: 127.0.0.1:0
        data_dir: DATA_DIR
        receivers:
        \(Vectors.phoneReceiver)
        routes:
          - {from: [phone], to: [home]}
        sinks:
          home:
            kind: mqtt
            url: mqtt://127.0.0.1:\(port)
            names: {\(device): "Anna's iPhone"}
            timeout: 2s
            retry: {initial: 100ms, max: 500ms}
            batch: {max_wait: 10ms}
        """
    }

    static func iso(_ secondsAgo: Int) -> String {
        Timestamp(seconds: TestTime.ago(Int64(secondsAgo))).rfc3339()
    }

    static func steps(_ uuid: String, _ value: Int, ago: Int = 600) -> String {
        #"{"uuid":"\#(uuid)","type":"steps","value":\#(value),"unit":"count","start":"\#(iso(ago))","end":"\#(iso(ago - 60))"}"#
    }

    static func heartRate(_ uuid: String, _ value: Int, ago: Int) -> String {
        #"{"uuid":"\#(uuid)","type":"heart_rate","value":\#(value),"unit":"count/min","start":"\#(iso(ago))","end":"\#(iso(ago))","source":{"app":"com.apple.Health","device":"Apple Watch"}}"#
    }

    func post(_ serve: ServeProcess, samples: [String], deleted: [String] = []) throws {
        let body = Vectors.syncBody(samples: samples, deleted: deleted)
        let r = try serve.client().request("POST", "/hook", headers: LiveServeTests.signedHeaders(body), body: Array(body.utf8))
        #expect(r.status == 200, "\(String(decoding: r.body, as: UTF8.self))")
    }

    /// The retained message on `topic`, or "" when there is none (read in process: a retained
    /// message comes with the subscription).
    static func retained(_ broker: DatabaseProcess, _ topic: String) -> String {
        guard let r = try? MQTTRecorder(port: broker.port, topic: topic) else { return "" }
        let until = Date().addingTimeInterval(0.3)
        while r.payloads.isEmpty && Date() < until { usleep(10_000) }
        r.stop()
        return r.payloads.first ?? ""
    }

    static func value(_ broker: DatabaseProcess, _ object: String) -> Any? {
        let text = retained(broker, "healthgate/\(slug)/\(object)")
        return (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])?["value"]
    }

    @Test func sensorsAppearAndStatesStayRight() throws {
        let broker = try DatabaseProcess.mosquitto()
        var serve = try ServeProcess(config: Self.config(broker.port))
        try post(serve, samples: [Self.steps("s1", 100), Self.steps("s2", 50), Self.heartRate("h1", 61, ago: 300)])
        #expect(ServeProcess.eventually { Self.value(broker, "steps_today") as? Int == 150 })
        #expect(Self.retained(broker, "healthgate/status") == "online")
        // Discovery: one device per phone, sensors with HA's own classes only.
        let configTopic = "homeassistant/sensor/healthgate_\(Self.slug)/steps_today/config"
        let config = try #require(try JSONSerialization.jsonObject(with: Data(Self.retained(broker, configTopic).utf8)) as? [String: Any])
        #expect(config["unique_id"] as? String == "healthgate_\(Self.slug)_steps_today")
        #expect(config["object_id"] as? String == "anna_s_iphone_steps_today") // from the name, as HA makes ids
        #expect(config["unit_of_measurement"] as? String == "steps")
        #expect(config["state_class"] as? String == "total")
        #expect(config["device_class"] == nil)
        #expect(config["state_topic"] as? String == "healthgate/\(Self.slug)/steps_today")
        #expect((config["device"] as? [String: Any])?["name"] as? String == "Anna's iPhone")
        #expect(((config["availability"] as? [[String: Any]])?.first)?["topic"] as? String == "healthgate/status")
        let hr = try #require(
            try JSONSerialization.jsonObject(with: Data(Self.retained(broker, "healthgate/\(Self.slug)/heart_rate").utf8))
                as? [String: Any])
        #expect(hr["value"] as? Int == 61)
        #expect(hr["source_app"] as? String == "com.apple.Health")
        #expect(hr["measured_at"] as? String != nil)

        // The phone sends the same steps again, with a newer heart rate: the total stays.
        try post(serve, samples: [Self.steps("s1", 100), Self.steps("s2", 50), Self.heartRate("h2", 70, ago: 60)])
        #expect(ServeProcess.eventually { Self.value(broker, "heart_rate") as? Int == 70 })
        #expect(Self.value(broker, "steps_today") as? Int == 150)
        // A deletion corrects the total; a late, older heart rate leaves the newer one.
        try post(serve, samples: [Self.heartRate("h0", 55, ago: 3600)], deleted: [#"{"uuid":"s1","type":"steps"}"#])
        #expect(ServeProcess.eventually { Self.value(broker, "steps_today") as? Int == 50 })
        #expect(Self.value(broker, "heart_rate") as? Int == 70)

        // Home Assistant restarts (its configs gone) and says online: healthgate announces again.
        try DatabaseProcess.run("/usr/bin/mosquitto_pub", ["-h", "127.0.0.1", "-p", "\(broker.port)", "-t", configTopic, "-r", "-n"])
        #expect(Self.retained(broker, configTopic) == "")
        try DatabaseProcess.run(
            "/usr/bin/mosquitto_pub",
            [
                "-h", "127.0.0.1", "-p", "\(broker.port)", "-t", "homeassistant/status",
                "-m", "online"
            ])
        #expect(ServeProcess.eventually { !Self.retained(broker, configTopic).isEmpty })

        // SIGKILL: the broker says offline for healthgate (its last will).
        serve.stop(signal: SIGKILL)
        #expect(ServeProcess.eventually { Self.retained(broker, "healthgate/status") == "offline" })
        // Back, and the state it committed is the state it has: a resend still counts once.
        serve = try ServeProcess(config: Self.config(broker.port), dataDir: serve.dataDir)
        try post(serve, samples: [Self.steps("s2", 50), Self.steps("s3", 7)])
        #expect(ServeProcess.eventually { Self.value(broker, "steps_today") as? Int == 57 })
        #expect(ServeProcess.eventually { Self.retained(broker, "healthgate/status") == "online" })
        // A clean stop says offline too.
        serve.stop()
        #expect(Self.retained(broker, "healthgate/status") == "offline")
    }

    @Test func aBrokerRestartMidStreamLosesNothing() throws {
        var broker: DatabaseProcess? = try DatabaseProcess.mosquitto()
        let port = broker!.port, dir = broker!.dir
        let serve = try ServeProcess(config: Self.config(port))
        try post(serve, samples: [Self.steps("a", 10)])
        #expect(ServeProcess.eventually { Self.value(broker!, "steps_today") as? Int == 10 })
        broker = nil // the broker dies; the phone keeps sending, serve acknowledges (journaled)
        try post(serve, samples: [Self.steps("b", 20)])
        try post(serve, samples: [Self.steps("c", 30)])
        usleep(500_000)
        broker = try DatabaseProcess.mosquitto(port: port, dir: dir) // back, empty (no persistence)
        #expect(ServeProcess.eventually(20) { Self.value(broker!, "steps_today") as? Int == 60 })
        #expect(ServeProcess.eventually { Self.retained(broker!, "healthgate/status") == "online" })
        serve.stop()
    }
}

/// The mqtt sink's states through `serve` on a moved clock: local midnight in the phone's time
/// zone, a 30-day first delivery that ends in one state per entity, last night's sleep and the
/// last workout with its heart rate.
@Suite(.serialized) struct MQTTSinkCalendarTests {
    static let device = MQTTSinkTests.device
    static var slug: String { MQTTSinkTests.slug }

    /// A serve of the test binary whose clock reads what `clockFile` says (see `ShiftedClock`).
    static func serve(_ broker: DatabaseProcess, clockFile: String, dataDir: String? = nil, timeZone: String? = nil) throws -> ServeProcess
    {
        var config = MQTTSinkTests.config(broker.port)
        if let timeZone { config += "\n    time_zone: \(timeZone)\n" }
        return try ServeProcess(
            config: config, dataDir: dataDir, environment: ["HEALTHGATE_TEST_CLOCK_SHIFT": clockFile],
            binary: ServeProcess.testServeBinary)
    }

    static func at(_ rfc3339: String) -> Int64 { Timestamp.parseRFC3339(rfc3339)!.0.seconds }
    static func z(_ t: Int64) -> String { Timestamp(seconds: t).rfc3339() }

    static func steps(_ uuid: String, _ value: Int, at t: Int64) -> String {
        #"{"uuid":"\#(uuid)","type":"steps","value":\#(value),"unit":"count","start":"\#(z(t))","end":"\#(z(t + 59))"}"#
    }

    static func heartRate(_ uuid: String, _ bpm: Int, at t: Int64) -> String {
        #"{"uuid":"\#(uuid)","type":"heart_rate","value":\#(bpm),"unit":"count/min","start":"\#(z(t))","end":"\#(z(t))"}"#
    }

    static func mass(_ uuid: String, _ kg: Double, at t: Int64) -> String {
        #"{"uuid":"\#(uuid)","type":"body_mass","value":\#(kg),"unit":"kg","start":"\#(z(t))","end":"\#(z(t))"}"#
    }

    static func sleep(_ uuid: String, _ stage: String, from t: Int64, minutes: Int64) -> String {
        #"{"uuid":"\#(uuid)","type":"sleep_analysis","value":"\#(stage)","start":"\#(z(t))","end":"\#(z(t + minutes * 60))","source":{"app":"com.apple.Health","device":"Apple Watch"}}"#
    }

    static func workout(_ uuid: String, _ activity: String, from t: Int64, minutes: Int64) -> String {
        #"{"uuid":"\#(uuid)","type":"workout","activity":"\#(activity)","start":"\#(z(t))","end":"\#(z(t + minutes * 60))","duration_s":\#(minutes * 60),"energy_kcal":280,"distance_m":4200,"metadata":{},"events":[],"activities":[],"statistics":[],"source":{"app":"com.apple.Health","device":"Apple Watch"}}"#
    }

    func post(
        _ serve: ServeProcess, _ samples: [String], deleted: [String] = [], index: Int = 0, count: Int = 1,
        delivery: String = UUID().uuidString.lowercased()
    ) throws {
        var body = Vectors.syncBody(samples: samples, deleted: deleted, delivery: delivery)
        body = body.replacingOccurrences(of: #""index":0,"count":1"#, with: #""index":\#(index),"count":\#(count)"#)
        if index < count - 1 { body = body.replacingOccurrences(of: #""more":false"#, with: #""more":true"#) }
        let r = try serve.client().request(
            "POST", "/hook", headers: LiveServeTests.signedHeaders(body, delivery: delivery),
            body: Array(body.utf8))
        #expect(r.status == 200, "\(String(decoding: r.body, as: UTF8.self))")
    }

    static func state(_ broker: DatabaseProcess, _ object: String) -> [String: Any] {
        let text = MQTTSinkTests.retained(broker, "healthgate/\(slug)/\(object)")
        return (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:]
    }

    /// Syncky sends UTC times; the sink's `time_zone` says where the phone is (Tokyo, UTC+9):
    /// its steps today go back to 0 at midnight there, by the serve's own clock, with nothing
    /// sent; a late sample from yesterday leaves the new day alone; a restart keeps it.
    @Test func todaysTotalsResetAtThePhonesMidnight() throws {
        let broker = try DatabaseProcess.mosquitto()
        let clockFile = ServeProcess.makeTempDir("clock") + "/shift"
        // 23:58 in Tokyo on 15 January 2027.
        let evening = Self.at("2027-01-15T14:58:00Z")
        try ShiftedClock.set(file: clockFile, to: Timestamp(seconds: evening))
        var serve = try Self.serve(broker, clockFile: clockFile, timeZone: "Asia/Tokyo")
        try post(
            serve,
            [
                Self.steps("e1", 4000, at: evening - 3600), Self.steps("e2", 321, at: evening - 60),
                Self.steps("old", 9999, at: evening - 86_400)
            ]) // the day before: history
        #expect(ServeProcess.eventually { Self.state(broker, "steps_today")["value"] as? Int == 4321 })
        #expect(Self.state(broker, "steps_today")["last_reset"] as? String == "2027-01-15T00:00:00+09:00")

        // Midnight passes in Tokyo: the total goes to 0 by itself, with the new day's last_reset.
        let morning = Self.at("2027-01-15T15:00:30Z")
        try ShiftedClock.set(file: clockFile, to: Timestamp(seconds: morning))
        #expect(ServeProcess.eventually(10) { Self.state(broker, "steps_today")["value"] as? Int == 0 })
        #expect(Self.state(broker, "steps_today")["last_reset"] as? String == "2027-01-16T00:00:00+09:00")
        // A sample from just after midnight counts; a late one from 23:59 yesterday does not.
        try post(serve, [Self.steps("m1", 12, at: morning - 20), Self.steps("late", 500, at: morning - 90)])
        #expect(ServeProcess.eventually { Self.state(broker, "steps_today")["value"] as? Int == 12 })

        // A restart: the day's contributions are in the committed state; a resend counts once.
        serve.stop()
        serve = try Self.serve(broker, clockFile: clockFile, dataDir: serve.dataDir, timeZone: "Asia/Tokyo")
        try post(serve, [Self.steps("m1", 12, at: morning - 20), Self.steps("m2", 8, at: morning)])
        #expect(ServeProcess.eventually { Self.state(broker, "steps_today")["value"] as? Int == 20 })
        serve.stop()
    }

    /// A phone's first delivery: 30 days of history in three requests. Home Assistant sees one
    /// state per entity and request at most — not thirty days of changes — and the states are
    /// today's total, the newest value, last night's sleep and the last workout with the heart
    /// rate measured during it.
    @Test func aThirtyDayBackfillEndsInOneStatePerEntity() throws {
        let broker = try DatabaseProcess.mosquitto()
        let clockFile = ServeProcess.makeTempDir("clock") + "/shift"
        let now = Self.at("2027-03-10T12:00:00Z")
        try ShiftedClock.set(file: clockFile, to: Timestamp(seconds: now))
        let serve = try Self.serve(broker, clockFile: clockFile)
        let states = try MQTTRecorder(port: broker.port, topic: "healthgate/\(Self.slug)/+")
        defer { states.stop() }

        var samples: [String] = []
        var today = 0
        let midnight = Self.at("2027-03-10T00:00:00Z")
        for day in 0..<30 {
            let base = midnight - Int64(day) * 86_400
            for hour in 0..<24 {
                let t = base + Int64(hour) * 3600 + 600
                guard t < now else { continue }
                samples.append(Self.steps("st-\(day)-\(hour)", 100 + hour, at: t))
                if day == 0 { today += 100 + hour }
                samples.append(Self.heartRate("hr-\(day)-\(hour)", 60 + (day + hour) % 30, at: t + 60))
            }
            samples.append(Self.mass("kg-\(day)", 80 - Double(day) / 10, at: base + 7 * 3600))
            // The night before this day: in bed 22:30, asleep 22:45–06:15 with a deep part.
            let bed = base - 5400
            samples.append(Self.sleep("bed-\(day)", "in_bed", from: bed, minutes: 480))
            samples.append(Self.sleep("core-\(day)", "asleep_core", from: bed + 900, minutes: 300))
            samples.append(Self.sleep("deep-\(day)", "asleep_deep", from: bed + 900 + 18_000, minutes: 150))
            if day % 2 == 0 {
                samples.append(Self.workout("wo-\(day)", day == 0 ? "cycling" : "running", from: base + 8 * 3600 + 900, minutes: 45))
            }
        }
        // The heart rate during today's ride (08:15–09:00, after the hourly 08:11), sent with the rest.
        for (i, bpm) in [130, 150, 170].enumerated() {
            samples.append(Self.heartRate("ride-\(i)", bpm, at: midnight + 8 * 3600 + 900 + 600 * Int64(i + 1)))
        }
        let delivery = UUID().uuidString.lowercased()
        let chunk = (samples.count + 2) / 3
        for i in 0..<3 {
            try post(serve, Array(samples[(i * chunk)..<min(samples.count, (i + 1) * chunk)]), index: i, count: 3, delivery: delivery)
        }
        #expect(ServeProcess.eventually(20) { Self.state(broker, "steps_today")["value"] as? Int == today })
        #expect(ServeProcess.eventually { Self.state(broker, "last_workout")["value"] as? String == "cycling" })
        usleep(300_000)

        var perEntity: [String: Int] = [:]
        for m in states.received { perEntity[String(m.topic.split(separator: "/").last!), default: 0] += 1 }
        for object in ["steps_today", "heart_rate", "weight", "sleep_last_night", "last_workout"] {
            let n = perEntity[object] ?? 0
            #expect(n >= 1 && n <= 3, "\(object): \(n) states for a 30-day backfill")
        }
        // The newest heart rate is today's last hourly one (11:11Z: 60 + (0 + 11) % 30).
        let hr = Self.state(broker, "heart_rate")
        #expect(hr["value"] as? Int == 71)
        #expect(hr["measured_at"] as? String == "2027-03-10T11:11:00+00:00")
        #expect(Self.state(broker, "weight")["value"] as? Double == 80)
        let sleep = Self.state(broker, "sleep_last_night")
        #expect(sleep["value"] as? Double == 7.5)
        #expect(sleep["asleep_deep_min"] as? Int == 150)
        #expect(sleep["bedtime"] as? String == "2027-03-09T22:30:00+00:00")
        let ride = Self.state(broker, "last_workout")
        #expect(ride["duration_min"] as? Int == 45)
        #expect(ride["energy_kcal"] as? Int == 280)
        #expect(ride["distance_km"] as? Double == 4.2)
        #expect(ride["heart_rate_avg"] as? Int == 150)
        #expect(ride["heart_rate_max"] as? Int == 170)
        #expect(ride["started_at"] as? String == "2027-03-10T08:15:00+00:00")

        // Deleting today's ride brings back the last one before it.
        try post(serve, [], deleted: [#"{"uuid":"wo-0","type":"workout"}"#])
        #expect(ServeProcess.eventually { Self.state(broker, "last_workout")["value"] as? String == "running" })
        serve.stop()
    }
}

/// What `kind: mqtt` accepts and refuses in the config, with what to fix.
@Suite struct MQTTSinkConfigTests {
    func build(_ yaml: String) throws(ConfigProblems) -> BuiltSink {
        let node = try parseYAML(yaml, file: "sink", environment: [:])
        return try MQTTSink.build(name: "home", node: node, path: "sinks.home", context: SinkBuildContext(dataDir: "/tmp"))
    }

    /// The sink of `yaml`, opened (no connection yet), its book holding one steps sample of each device.
    func opened(_ yaml: String, devices: [String]) throws -> MQTTSink {
        let sink = try #require(
            try build(yaml).open(
                SinkContext(
                    name: "home", dataDir: "/tmp", stateDir: "/tmp", clock: SystemClock(),
                    logger: Logger(component: "t", sink: MemoryLogSink()))) as? MQTTSink)
        _ = sink.book.apply(
            devices.enumerated().map {
                HAStateBookTests.sample("s\($0.offset)", "steps", 1, at: HAStateBookTests.noon, device: $0.element)
            },
            now: Timestamp(seconds: HAStateBookTests.noon))
        return sink
    }

    func problems(_ yaml: String) -> String {
        do {
            _ = try build(yaml)
            return ""
        } catch {
            return error.description
        }
    }

    @Test func unitsAreShownAsConfigured() throws {
        let built = try build("{kind: mqtt, url: mqtt://broker.lan, units: {body_mass: lb, body_temperature: °F}}")
        #expect(
            built.summary
                == "mqtt mqtt://broker.lan:1883 as healthgate-home, qos 1, base healthgate, discovery under homeassistant, \(HACatalog.all.count) entity kind(s)"
        )
        let sink = try #require(
            try built.open(
                SinkContext(
                    name: "home", dataDir: "/tmp", stateDir: "/tmp", clock: SystemClock(),
                    logger: Logger(component: "t", sink: MemoryLogSink()))) as? MQTTSink)
        let weight = try #require(sink.settings.entities.first { $0.type == "body_mass" })
        #expect(weight.unit == "lb" && weight.deviceClass == "weight")
        #expect(abs(weight.display(80) - 176.37) < 0.01)
        let temperature = try #require(sink.settings.entities.first { $0.type == "body_temperature" })
        #expect(abs(temperature.display(37) - 98.6) < 0.01)
    }

    @Test func aPhoneIsNamedByItsDeviceIdElseByItsReceiver() throws {
        let sink = try opened(
            "{kind: mqtt, url: mqtt://broker.lan, names: {phone: \"Kitchen iPad\", d_1: \"Anna's iPhone\"}}", devices: ["d_1", "d_2"])
        #expect(sink.deviceName("d_1") == "Anna's iPhone")
        #expect(sink.deviceName("d_2") == "Kitchen iPad") // no name of its own: its receiver's
        let config = try #require(
            try JSONSerialization.jsonObject(with: Data(sink.discoveryConfig("d_2", HACatalog.entity(forType: "steps")!)))
                as? [String: Any])
        #expect((config["device"] as? [String: Any])?["name"] as? String == "Kitchen iPad")
    }

    /// Issue 52: `people:` groups each phone's HA device under its person's (by device id or
    /// receiver), and the person's device is made by its `Last sync` sensor.
    @Test func phonesAreGroupedByPerson() throws {
        let sink = try opened(
            "{kind: mqtt, url: mqtt://broker.lan, people: {Anna: [d_1], \"Ben B.\": [phone]}}", devices: ["d_1", "d_2", "d_3"])
        func via(_ device: String) throws -> String? {
            let config = try JSONSerialization.jsonObject(with: Data(sink.discoveryConfig(device, HACatalog.entity(forType: "steps")!)))
            return ((config as? [String: Any])?["device"] as? [String: Any])?["via_device"] as? String
        }
        #expect(try via("d_1") == "healthgate_person_anna")
        #expect(try via("d_2") == "healthgate_person_ben_b") // its receiver is Ben's
        let messages = sink.personMessages(["d_1", "d_2", "d_1"])
        #expect(
            messages.map(\.topic) == [
                "homeassistant/sensor/healthgate_person_anna/last_sync/config", "healthgate/person_anna/last_sync",
                "homeassistant/sensor/healthgate_person_ben_b/last_sync/config", "healthgate/person_ben_b/last_sync"
            ])
        let person = try JSONSerialization.jsonObject(with: Data(messages[0].payload)) as? [String: Any]
        #expect(((person?["device"] as? [String: Any])?["identifiers"] as? [String]) == ["healthgate_person_anna"])
        #expect(person?["device_class"] as? String == "timestamp")
    }

    @Test func mistakesAreSaidWithWhatToFix() {
        #expect(problems("{kind: mqtt, url: http://broker}").contains("mqtt:// or mqtts://"))
        #expect(problems("{kind: mqtt, url: mqtt://broker, qos: 3}").contains("qos is 0, 1 or 2"))
        #expect(problems("{kind: mqtt, url: mqtt://broker, base_topic: \"health/#\"}").contains("no wildcards"))
        #expect(problems("{kind: mqtt, url: mqtt://broker, time_zone: Mars/Olympus}").contains("tz database"))
        #expect(problems("{kind: mqtt, url: mqtt://broker, units: {body_mass: bpm}}").contains("cannot be shown in \"bpm\""))
        #expect(problems("{kind: mqtt, url: mqtt://broker, units: {hat_size: cm}}").contains("not one of the sink's entities"))
        #expect(problems("{kind: mqtt, url: mqtt://u:p@broker}").contains("`username` and `password`"))
        #expect(problems("{kind: mqtt, url: mqtt://broker, ca_file: /x}").contains("need an mqtts:// url"))
        #expect(problems("{kind: mqtt, url: mqtts://broker:8884, ca_file: /x}") == "")
        #expect(problems("{kind: mqtt, url: mqtt://broker, exclude: [\"*\"]}").contains("publish nothing"))
        #expect(problems("{kind: mqtt, url: mqtt://broker, qoss: 1}").contains("qoss"))
        #expect(problems("{kind: mqtt, url: mqtt://broker, people: {A: [p1], B: [p1]}}").contains("a phone belongs to one person"))
        #expect(problems("{kind: mqtt, url: mqtt://broker, sleep_day_starts: \"6pm\"}").contains("a time of day such as"))
        #expect(problems("{kind: mqtt, url: mqtt://broker, sleep_day_starts: \"20:30\"}") == "")
    }
}

/// The sink on its own against a real mosquitto.
@Suite(.serialized) struct MQTTSinkDirectTests {
    func open(_ yaml: String, state: [UInt8]? = nil) throws -> MQTTSink {
        let node = try parseYAML(yaml, file: "sink", environment: [:])
        let built = try MQTTSink.build(name: "home", node: node, path: "sinks.home", context: SinkBuildContext(dataDir: "/tmp"))
        let sink = try #require(
            try built.open(
                SinkContext(
                    name: "home", dataDir: "/tmp", stateDir: "/tmp", clock: SystemClock(),
                    logger: Logger(component: "t", sink: MemoryLogSink()))) as? MQTTSink)
        if let state { try sink.restoreState(state) }
        return sink
    }

    /// A broker that asks for a client certificate (mosquitto `require_certificate`): the sink
    /// with `ca_file`, `cert_file` and `key_file` connects and delivers; without its certificate
    /// it is refused, and says the destination is unreachable.
    @Test func aClientCertificateOpensABrokerThatAsksForOne() throws {
        let dir = ServeProcess.makeTempDir("mqtts-client")
        for name in ["server", "client"] {
            let (rc, _) = try DatabaseProcess.run(
                "/usr/bin/openssl",
                [
                    "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", "\(dir)/\(name).key", "-out", "\(dir)/\(name).pem", "-days", "2",
                    "-subj", name == "server" ? "/CN=127.0.0.1" : "/CN=healthgate", "-addext",
                    name == "server" ? "subjectAltName=IP:127.0.0.1" : "extendedKeyUsage=clientAuth"
                ])
            #expect(rc == 0)
        }
        // The broker trusts the client's (self-signed) certificate; mosquitto reads as its own user.
        let client = try String(contentsOfFile: dir + "/client.pem", encoding: .utf8)
        try client.write(toFile: dir + "/clients.pem", atomically: true, encoding: .utf8)
        chmod(dir, 0o755)
        for f in ["server.key", "server.pem", "clients.pem"] { chmod(dir + "/" + f, 0o644) }
        // (And a plain listener, for the test to read what arrived.)
        let plain = ScriptedEndpoint.freePort()
        let broker = try DatabaseProcess.mosquitto(
            extra: """
                certfile \(dir)/server.pem
                keyfile \(dir)/server.key
                cafile \(dir)/clients.pem
                require_certificate true
                listener \(plain) 127.0.0.1
                """)
        let url = "kind: mqtt\nurl: mqtts://127.0.0.1:\(broker.port)\ntimeout: 3s\nca_file: \(dir)/server.pem"
        let sink = try open(url + "\ncert_file: \(dir)/client.pem\nkey_file: \(dir)/client.key")
        #expect(sink.probe() == .reachable)
        let r = CanonicalRecord(
            kind: "quantity", device: "phone-1", receiver: "r", uuid: "c1", type: "heart_rate",
            start: Timestamp(seconds: 1_796_126_400), end: Timestamp(seconds: 1_796_126_400),
            value: .number(58), unit: "count/min")
        #expect(sink.write(SinkBatch(records: [r])) == .accepted)
        sink.close()
        let reader = try MQTTRecorder(port: plain, topic: "healthgate/phone-1/heart_rate")
        #expect(ServeProcess.eventually(5) { reader.payloads.first?.contains(#""value":58"#) == true })
        reader.stop()
        let without = try open(url)
        guard case .unreachable = without.probe() else {
            Issue.record("connected without the client certificate the broker asks for")
            return
        }
    }

    /// A sensor the config no longer has (excluded since) is removed from Home Assistant: its
    /// retained config is emptied when the sink connects.
    /// A topic level from any name: ASCII byte by byte, anything else by Unicode's lower case,
    /// the same slug either way; what had to change keeps a hash of the original.
    @Test func slugsAreTopicLevelsWhateverTheName() {
        let names = [
            "d_zsOZ123abc", "steps", "heart_rate", "Alice's iPhone", "HKQuantityTypeIdentifierHeartRate", "a/b+#",
            "", " ", "ÄÖÜ", "İstanbul", "emoji 😀", "x\u{0}y", String(repeating: "long-name", count: 12), "MiXeD-123"
        ]
        for n in names {
            let slug = MQTTSink.slug(n)
            #expect(slug == MQTTSink.unicodeSlug(n), "\(n)")
            #expect(
                !slug.isEmpty
                    && slug.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5F || $0 == 0x2D },
                "\(n) → \(slug)")
            #expect(slug.utf8.count <= 64)
        }
        #expect(MQTTSink.slug("steps") == "steps")
        #expect(MQTTSink.slug("Steps") != MQTTSink.slug("steps") && MQTTSink.slug("Steps").hasPrefix("steps_"))
        #expect(MQTTSink.slug("a b") != MQTTSink.slug("a_b"))
    }

    @Test func anExcludedSensorIsRemoved() throws {
        let broker = try DatabaseProcess.mosquitto()
        let url = "mqtt://127.0.0.1:\(broker.port)"
        let now = Int64(Date().timeIntervalSince1970)
        let first = try open("{kind: mqtt, url: \"\(url)\"}")
        let records = [
            HAStateBookTests.sample("s", "steps", 10, at: now - 60, device: "d_1"),
            HAStateBookTests.sample("h", "heart_rate", 60, at: now - 60, device: "d_1")
        ]
        #expect(first.write(SinkBatch(records: records)) == .accepted)
        let slug = MQTTSink.deviceSlug("d_1")
        let heartConfig = "homeassistant/sensor/healthgate_\(slug)/heart_rate/config"
        #expect(!MQTTSinkTests.retained(broker, heartConfig).isEmpty)
        let state = try #require(first.saveState())
        first.close()
        let second = try open("{kind: mqtt, url: \"\(url)\", exclude: [heart_rate]}", state: state)
        #expect(second.probe() == .reachable) // connects
        #expect(MQTTSinkTests.retained(broker, heartConfig).isEmpty)
        #expect(!MQTTSinkTests.retained(broker, "homeassistant/sensor/healthgate_\(slug)/steps_today/config").isEmpty)
        #expect(!second.announced.contains(MQTTSink.announceKey("d_1", "heart_rate")))
        #expect(second.announced.contains(MQTTSink.announceKey("d_1", "steps")))
        second.close()
    }

    /// A device id could be chosen to be another's slug (`steps_` and the 32-bit hash of
    /// `Steps`) and write its topics and Home Assistant entity; and `x_resting` with heart_rate
    /// shared `x`'s resting_heart_rate unique_id. Device slugs are now one-to-one.
    @Test func noDeviceIdCanTakeAnothersTopicsOrEntities() throws {
        let ids = [
            "Steps", "steps", "steps_" + FNV1a.hex("Steps").prefix(8), "x", "x_resting", "x-resting", "a/b", "a_b", "a b",
            "d_zsOZnTQUz_juWFVljuOOBQ", "", "_", String(repeating: "y", count: 70), String(repeating: "y", count: 71), "İ", "i"
        ]
        var slugs = ids.map(MQTTSink.deviceSlug)
        #expect(Set(slugs).count == ids.count, "\(slugs)")
        slugs.append(MQTTSink.deviceSlug(slugs[0])) // an id chosen to be another's slug is not that slug
        #expect(Set(slugs).count == ids.count + 1)
        for s in slugs {
            #expect(
                !s.isEmpty && s.utf8.count <= 64
                    && s.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5F || $0 == 0x2D }, "\(s)")
        }
        #expect(MQTTSink.deviceSlug("phone-1") == "phone-1")
        // unique_id = healthgate_<device slug>_<object id> splits one way only.
        let resting = try #require(HACatalog.entity(forType: "resting_heart_rate"))
        let heart = try #require(HACatalog.entity(forType: "heart_rate"))
        let sink = try open("{kind: mqtt, url: \"mqtt://127.0.0.1:1\"}")
        func uniqueID(_ d: String, _ e: HAEntity) -> String? {
            (try? JSONSerialization.jsonObject(with: Data(sink.discoveryConfig(d, e))) as? [String: Any])?["unique_id"] as? String
        }
        #expect(uniqueID("x_resting", heart) != uniqueID("x", resting))
        #expect(uniqueID("x-resting", heart) != uniqueID("x", resting))
    }

    /// What was announced under the old slug is taken down when the sink connects, and announced
    /// again under the new one; Home Assistant keeps the entity (its object id comes from the name).
    @Test func sensorsAnnouncedUnderTheOldSlugMove() throws {
        let broker = try DatabaseProcess.mosquitto()
        let url = "mqtt://127.0.0.1:\(broker.port)"
        let now = Int64(Date().timeIntervalSince1970)
        let first = try open("{kind: mqtt, url: \"\(url)\"}")
        #expect(first.write(SinkBatch(records: [HAStateBookTests.sample("s", "steps", 10, at: now - 60, device: "d_1")])) == .accepted)
        let state = try #require(first.saveState())
        first.close()
        // As a gateway of before left it: retained config and state under the old slug, and the
        // sensor remembered in the old way.
        let old = MQTTSink.legacySlug("d_1")
        #expect(old != MQTTSink.deviceSlug("d_1"))
        let oldConfig = "homeassistant/sensor/healthgate_\(old)/steps_today/config"
        let publisher = try MQTTClient(options: MQTTClient.Options(host: "127.0.0.1", port: Int(broker.port), clientID: "old-gateway"))
        try publisher.connect()
        _ = try publisher.waitForAcks(
            [
                try publisher.publish(topic: oldConfig, payload: Array("{}".utf8), qos: 1, retain: true),
                try publisher.publish(topic: "healthgate/\(old)/steps_today", payload: Array("{}".utf8), qos: 1, retain: true)
            ], qos: 1)
        publisher.disconnect()
        let second = try open("{kind: mqtt, url: \"\(url)\"}", state: state)
        second.announced = ["d_1\u{1F}steps"]
        #expect(second.write(SinkBatch(records: [HAStateBookTests.sample("s2", "steps", 5, at: now - 30, device: "d_1")])) == .accepted)
        #expect(MQTTSinkTests.retained(broker, oldConfig).isEmpty)
        #expect(MQTTSinkTests.retained(broker, "healthgate/\(old)/steps_today").isEmpty)
        let newConfig = "homeassistant/sensor/healthgate_\(MQTTSink.deviceSlug("d_1"))/steps_today/config"
        #expect(!MQTTSinkTests.retained(broker, newConfig).isEmpty)
        #expect(second.announced == [MQTTSink.announceKey("d_1", "steps")])
        second.close()
    }
}
