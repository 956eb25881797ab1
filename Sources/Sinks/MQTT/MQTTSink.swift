import CanonicalJSON
import FastJSON
import Glibc
import HealthgateCore
import HealthgateCrypto
import Posix
import SinkKit
import YAMLConfig

/// Home Assistant over MQTT (see `MQTTSinkConfig`). Per batch: the entity states the records
/// change (`HAStateBook`: one state per entity, however many records), each announced to Home
/// Assistant first (retained discovery config), each state retained; with `publish_records`,
/// every record too. The batch counts as delivered once the broker acknowledged every publish it
/// caused. Topics:
///
/// - `<base>/status`: `online` (retained) while connected; the last will `offline` otherwise.
/// - `<base>/<device>/<entity>`: the entity's state as JSON — `value` and its attributes
///   (`measured_at`, `source_app`, `last_reset` …), retained.
/// - `<prefix>/sensor/healthgate_<device>/<entity>/config`: the discovery config, retained, sent
///   again when Home Assistant says `online` on `<prefix>/status`.
/// - `<base>/<device>/records/<type>`: each canonical record (with `publish_records`).
public final class MQTTSink: Sink {
    struct Settings: Sendable {
        var name: String
        var client: MQTTClient.Options
        var qos: Int
        var base: String
        var prefix: String
        var discovery: Bool
        var publishRecords: Bool
        var names: [String: String]
        var entities: [HAEntity]
        var timeZone: String?
        /// Seconds after local midnight when a sleep day begins.
        var sleepDayStart: Int = 18 * 3600
        /// Whose phone each is (by device id or receiver name): its HA device is grouped under them.
        var people: [String: String] = [:]
    }

    let settings: Settings
    let client: MQTTClient
    let book: HAStateBook
    let logger: Logger
    let clock: any Clock
    /// Entities whose discovery config the broker has (`device \u{1F} type`).
    var announced = Set<String>()
    /// Entities whose newest state is not yet acknowledged, in order.
    var dirty: [(device: String, type: String)] = []
    var dirtyKeys = Set<String>()
    /// Home Assistant came (back) online: announce everything again.
    var rediscover = false
    var lastConnectError: String?
    /// Events of an event entity announced in the same batch: sent from `idle` once it is due.
    var laterEvents: [(due: Double, message: Message)] = []
    static let newEventEntityDelay = 3.0
    var lastAttempt = -Double.infinity

    init(settings: Settings, logger: Logger, clock: any Clock, timeZones: any TimeZoneLookup) throws(SinkOpenError) {
        self.settings = settings
        self.logger = logger
        self.clock = clock
        book = HAStateBook(
            entities: settings.entities, timeZone: settings.timeZone, timeZones: timeZones, sleepDayStart: settings.sleepDayStart)
        do {
            client = try MQTTClient(options: settings.client)
        } catch {
            throw SinkOpenError("\(error)")
        }
        let statusTopic = settings.prefix + "/status"
        client.onMessage = { [unowned self] topic, payload in
            if topic == statusTopic && payload == Array("online".utf8) { rediscover = true }
        }
    }

    var statusTopic: String { settings.base + "/status" }

    // MARK: connection

    /// Connects when not connected: `online` on the status topic, HA's status subscribed.
    /// Returns why it cannot.
    func ensureConnected() -> String? {
        if client.isConnected { return nil }
        do {
            try client.connect()
            var mids = [try client.publish(topic: statusTopic, payload: Array("online".utf8), qos: max(1, settings.qos), retain: true)]
            if settings.discovery { try client.subscribe(settings.prefix + "/status", qos: 1) }
            // Sensors announced before that this config no longer has (excluded since, or
            // discovery turned off): an empty retained config removes them from Home Assistant.
            let kept = Set(settings.discovery ? settings.entities.map(\.type) : [])
            var removed: [String] = []
            var moved: [String] = []
            for key in announced.sorted() {
                let parts = key.split(separator: "\u{1F}").map(String.init)
                guard parts.count >= 2, let e = HACatalog.entity(forType: parts[1]) else { continue }
                if parts.count == 2 {
                    // Announced under the device slug of before (which two ids could share): its
                    // retained config and state go, and it is announced again under its own.
                    let old = MQTTSink.legacySlug(parts[0])
                    if old != MQTTSink.deviceSlug(parts[0]) || !kept.contains(parts[1]) {
                        mids.append(
                            try client.publish(
                                topic: "\(settings.prefix)/sensor/healthgate_\(old)/\(e.objectID)/config",
                                payload: [], qos: max(1, settings.qos), retain: true))
                        mids.append(
                            try client.publish(
                                topic: "\(settings.base)/\(old)/\(e.objectID)", payload: [],
                                qos: max(1, settings.qos), retain: true))
                        if kept.contains(parts[1]) { moved.append(key); markDirty(parts[0], parts[1]) } else { removed.append(key) }
                    } else {
                        moved.append(key)
                        announced.insert(MQTTSink.announceKey(parts[0], parts[1]))
                    }
                    continue
                }
                guard !kept.contains(parts[1]) else { continue }
                mids.append(try client.publish(topic: discoveryTopic(parts[0], e), payload: [], qos: max(1, settings.qos), retain: true))
                removed.append(key)
            }
            _ = try client.waitForAcks(mids, qos: max(1, settings.qos))
            announced.subtract(moved)
            if !removed.isEmpty {
                announced.subtract(removed)
                logger.info("removed \(removed.count) sensor(s) from Home Assistant that the config no longer has")
            }
            if lastConnectError != nil { logger.info("connected to \(settings.client.host):\(settings.client.port) again") }
            lastConnectError = nil
            return nil
        } catch {
            let why = "\(error)"
            if lastConnectError != why { logger.warning(why) }
            lastConnectError = why
            client.disconnect()
            return why
        }
    }

    // MARK: writing

    struct Message {
        var topic: String
        var payload: [UInt8]
        var retain: Bool
        /// The record it carries (records topic), or nil for states and configs.
        var record: Int?
        /// The entity it announces (config), for `announced`.
        var announces: String?
    }

    public func write(_ batch: SinkBatch) -> SinkWriteResult {
        if let why = ensureConnected() { return .keep(reason: why, retryAfterSeconds: nil) }
        var messages: [Message] = []
        if settings.publishRecords {
            for (i, r) in batch.records.enumerated() {
                var line: [UInt8] = []
                batch.appendLine(i, to: &line)
                if line.last == 0x0A { line.removeLast() }
                messages.append(
                    Message(
                        topic: "\(settings.base)/\(MQTTSink.deviceSlug(r.device))/records/\(MQTTSink.slug(r.type))",
                        payload: line, retain: false, record: i))
            }
        }
        for u in book.apply(batch.records.map(\.canonical), now: clock.now()) { markDirty(u.device, u.entity.type) }
        messages += stateMessages()
        if !settings.people.isEmpty { messages += personMessages(batch.records.map(\.device)) }
        // A new workout fires its event entity once (not retained: an event is not a state). An
        // event entity announced just now is given a few seconds to subscribe first.
        for e in book.takeWorkoutEvents(now: clock.now()) {
            let key = MQTTSink.announceKey(e.device, e.entity.type)
            let event = Message(topic: stateTopic(e.device, e.entity), payload: eventPayload(e), retain: false, record: nil)
            if settings.discovery && !announced.contains(key) {
                messages.append(
                    Message(
                        topic: discoveryTopic(e.device, e.entity), payload: discoveryConfig(e.device, e.entity), retain: true, record: nil,
                        announces: key))
                laterEvents.append((monotonicSeconds() + MQTTSink.newEventEntityDelay, event))
            } else {
                messages.append(event)
            }
        }
        return send(messages, records: batch.count)
    }

    func markDirty(_ device: String, _ type: String) {
        if dirtyKeys.insert(device + "\u{1F}" + type).inserted { dirty.append((device, type)) }
    }

    /// The discovery config (when not yet announced) and the state of every dirty entity.
    func stateMessages() -> [Message] {
        var out: [Message] = []
        let now = clock.now()
        for u in dirty.compactMap({ book.update(device: $0.device, type: $0.type, now: now) }) {
            let key = MQTTSink.announceKey(u.device, u.entity.type)
            // A sensor with nothing to show yet (a workout without heart rate) is not made.
            if settings.discovery && u.state == "None" && !announced.contains(key) { continue }
            if settings.discovery && !announced.contains(key) {
                out.append(
                    Message(
                        topic: discoveryTopic(u.device, u.entity), payload: discoveryConfig(u.device, u.entity),
                        retain: true, record: nil, announces: key))
            }
            out.append(Message(topic: stateTopic(u.device, u.entity), payload: statePayload(u), retain: true, record: nil))
        }
        return out
    }

    /// The discovery config of every entity announced, for a Home Assistant that came online.
    func rediscoveryMessages() -> [Message] {
        announced.sorted().compactMap { key in
            let parts = key.split(separator: "\u{1F}").map(String.init)
            guard parts.count == 3, let e = settings.entities.first(where: { $0.type == parts[1] }) else { return nil }
            return Message(
                topic: discoveryTopic(parts[0], e), payload: discoveryConfig(parts[0], e), retain: true, record: nil, announces: key)
        }
    }

    /// Publishes and waits for every acknowledgement; what the broker refuses for good of a
    /// record goes to the dead letters, a refusal of the connection or of authorization keeps.
    func send(_ messages: [Message], records: Int) -> SinkWriteResult {
        var mids: [Int32: Int] = [:]
        var outcomes = [DeliveryOutcome](repeating: .accepted, count: records)
        var rejected = false
        for (i, m) in messages.enumerated() {
            do {
                mids[try client.publish(topic: m.topic, payload: m.payload, qos: settings.qos, retain: m.retain)] = i
            } catch {
                if let r = m.record, error.isOversize {
                    outcomes[r] = .rejected(reason: "\(error)")
                    rejected = true
                    continue
                }
                client.disconnect()
                return .keep(reason: "\(error)", retryAfterSeconds: nil)
            }
        }
        let acks: [Int32: Int32]
        do {
            if settings.qos == 0 {
                try client.flush()
                acks = [:]
            } else {
                acks = try client.waitForAcks(Array(mids.keys), qos: settings.qos)
            }
        } catch {
            client.disconnect() // what the broker has is unknown: connect again, send again
            return .keep(reason: "\(error)", retryAfterSeconds: nil)
        }
        for (mid, reason) in acks where reason >= 0x80 {
            let m = messages[mids[mid]!]
            let why = "the broker refused the publish to \(m.topic) (MQTT reason code \(reason))"
            if reason == 0x87 || reason == 0x97 { // not authorized, quota exceeded: a config problem, or later
                logger.error(why + "; check the broker's ACL for healthgate's user. The records wait in the queue")
                return .keep(reason: why, retryAfterSeconds: nil)
            }
            if let r = m.record {
                outcomes[r] = .rejected(reason: why)
                rejected = true
            } else {
                logger.error(why)
            }
        }
        for m in messages { if let a = m.announces { announced.insert(a) } }
        dirty.removeAll()
        dirtyKeys.removeAll()
        return rejected ? .perRecord(outcomes) : .accepted
    }

    // MARK: idle, probe, close

    public func idle() {
        // Stay connected between batches: Home Assistant's birth message and local midnight
        // come when no batch does. (At most one attempt every 5 s while the broker is away.)
        if !client.isConnected {
            guard monotonicSeconds() - lastAttempt >= 5 else { return }
            lastAttempt = monotonicSeconds()
            if ensureConnected() != nil { return }
        }
        client.service(milliseconds: 10)
        for u in book.tick(now: clock.now()) { markDirty(u.device, u.entity.type) }
        var messages: [Message] = []
        if rediscover {
            // Configs only: the states are retained, so Home Assistant gets them as it subscribes,
            // and a state sent again would tell it the sample is newer than it is.
            rediscover = false
            logger.info("Home Assistant is online: announcing every sensor again")
            messages = rediscoveryMessages()
            if !dirty.isEmpty { messages += stateMessages() }
        } else if !dirty.isEmpty {
            messages = stateMessages()
        }
        let t = monotonicSeconds()
        messages += laterEvents.filter { $0.due <= t }.map(\.message)
        laterEvents.removeAll { $0.due <= t }
        if !messages.isEmpty { _ = send(messages, records: 0) }
    }

    public func probe() -> Reachability {
        if let why = ensureConnected() { return .unreachable(why) }
        return .reachable
    }

    public func close() {
        guard client.isConnected else { return }
        // A clean goodbye sends no last will: say offline ourselves.
        if let mid = try? client.publish(topic: statusTopic, payload: Array("offline".utf8), qos: 1, retain: true) {
            _ = try? client.waitForAcks([mid], qos: 1)
        }
        client.disconnect()
    }

    // MARK: state, committed with the cursor

    /// The sensors announced (`StateWriter` fields: their count, then each), then the book.
    public func saveState(of devices: DeviceScope = .all) -> [UInt8]? {
        var w = StateWriter()
        let mine = announced.filter { devices.contains(MQTTSink.announcedDevice($0)) }
        w.put(mine.count)
        for a in mine.sorted() { w.put(a) }
        return w.bytes + book.saveState(of: devices)
    }

    public func restoreState(_ bytes: [UInt8], of devices: DeviceScope = .all) throws(SinkOpenError) {
        do throws(TransformStateError) {
            var keys = Set<String>()
            var rest: [UInt8] = []
            if !bytes.isEmpty {
                var r = StateReader(bytes)
                for _ in 0..<max(0, try r.int()) { keys.insert(try r.take()) }
                rest = Array(bytes[r.at...])
            }
            try book.restoreState(rest, of: devices)
            announced = announced.filter { !devices.contains(MQTTSink.announcedDevice($0)) }.union(keys)
        } catch {
            throw SinkOpenError("\(error)")
        }
    }

    /// The device of an `announced` key.
    static func announcedDevice(_ key: String) -> String {
        String(key.prefix { $0 != "\u{1F}" })
    }

    // MARK: topics and payloads

    func stateTopic(_ device: String, _ e: HAEntity) -> String { "\(settings.base)/\(MQTTSink.deviceSlug(device))/\(e.objectID)" }

    func discoveryTopic(_ device: String, _ e: HAEntity) -> String {
        "\(settings.prefix)/\(e.component)/healthgate_\(MQTTSink.deviceSlug(device))/\(e.objectID)/config"
    }

    /// How an announced sensor is remembered: device, type and the device slug's version (a key
    /// of two parts was announced under `legacySlug`).
    static func announceKey(_ device: String, _ type: String) -> String { device + "\u{1F}" + type + "\u{1F}2" }

    func statePayload(_ u: HAUpdate) -> [UInt8] {
        var w = JSONWriter(capacity: 256)
        w.beginObject()
        w.key("value")
        if u.state == "None" {
            w.null()
        } else if u.entity.reading == .lastWorkout {
            w.string(u.state)
        } else {
            w.raw(Array(u.state.utf8)) // a number HAStateBook formatted
        }
        for (k, v) in u.attributes {
            w.key(k)
            w.raw(v.bytes)
        }
        w.endObject()
        return w.bytes
    }

    /// Whose phone it is (`people:`), by device id or the receiver its records come in by.
    func person(of device: String) -> String? {
        settings.people[device] ?? book.receiver(of: device).flatMap { settings.people[$0] }
    }

    /// The HA device of a person, which their phones' devices are grouped under (`via_device`).
    static func personID(_ person: String) -> String { "healthgate_person_" + (entitySlug(person) ?? "_") }

    /// A person's device is made by its one sensor, `Last sync`: when one of their phones' records
    /// last reached Home Assistant (a timestamp), and which phone it was.
    func personMessages(_ devices: [String]) -> [Message] {
        var out: [Message] = []
        var done = Set<String>()
        for device in devices {
            guard let person = person(of: device), done.insert(person).inserted else { continue }
            let id = MQTTSink.personID(person)
            let topic = "\(settings.base)/\(id.dropFirst("healthgate_".count))/last_sync"
            let key = "\(id)\u{1F}last_sync\u{1F}person"
            if settings.discovery && !announced.contains(key) {
                var w = JSONWriter(capacity: 512)
                w.beginObject()
                w.key("name"); w.string("Last sync")
                w.key("unique_id"); w.string("\(id)_last_sync")
                w.key("object_id"); w.string("\(MQTTSink.entitySlug(person) ?? "person")_last_sync")
                w.key("state_topic"); w.string(topic)
                w.key("value_template"); w.string("{{ value_json.value }}")
                w.key("json_attributes_topic"); w.string(topic)
                w.key("device_class"); w.string("timestamp")
                w.key("availability"); w.beginArray(); w.beginObject(); w.key("topic"); w.string(statusTopic); w.endObject(); w.endArray()
                w.key("device")
                w.beginObject()
                w.key("identifiers"); w.beginArray(); w.string(id); w.endArray()
                w.key("name"); w.string(person)
                w.key("manufacturer"); w.string("Apple Health via healthgate")
                w.key("model"); w.string("Person")
                w.endObject()
                w.key("qos"); w.int(settings.qos)
                w.endObject()
                out.append(
                    Message(
                        topic: "\(settings.prefix)/sensor/\(id)/last_sync/config", payload: w.bytes, retain: true, record: nil,
                        announces: key))
            }
            var w = JSONWriter(capacity: 128)
            w.beginObject()
            w.key("value"); w.string(clock.now().rfc3339())
            w.key("phone"); w.string(deviceName(device))
            w.endObject()
            out.append(Message(topic: topic, payload: w.bytes, retain: true, record: nil))
        }
        return out
    }

    /// A workout event: its type and the workout's figures (HA keeps them as the event's attributes).
    func eventPayload(_ u: HAUpdate) -> [UInt8] {
        var w = JSONWriter(capacity: 512)
        w.beginObject()
        w.key("event_type"); w.string("workout")
        for (k, v) in u.attributes {
            w.key(k)
            w.raw(v.bytes)
        }
        w.endObject()
        return w.bytes
    }

    /// `names:` by device id, else by the receiver its records come in by, else the device id.
    func deviceName(_ device: String) -> String {
        settings.names[device] ?? book.receiver(of: device).flatMap { settings.names[$0] } ?? device
    }

    func discoveryConfig(_ device: String, _ e: HAEntity) -> [UInt8] {
        let slug = MQTTSink.deviceSlug(device)
        var w = JSONWriter(capacity: 768)
        w.beginObject()
        w.key("name"); w.string(e.name)
        w.key("unique_id"); w.string("healthgate_\(slug)_\(e.objectID)")
        // The entity id people see and type (sensor.annas_iphone_steps_today): from the phone's
        // name; HA keeps it once made, a rename later changes only what is shown.
        w.key("object_id"); w.string("\(MQTTSink.entitySlug(deviceName(device)) ?? slug)_\(e.objectID)")
        w.key("state_topic"); w.string(stateTopic(device, e))
        if e.reading == .workoutEvent {
            w.key("event_types"); w.beginArray(); w.string("workout"); w.endArray()
        } else {
            w.key("value_template"); w.string("{{ value_json.value }}")
            w.key("json_attributes_topic"); w.string(stateTopic(device, e))
        }
        if e.reading == .todayTotal {
            w.key("last_reset_value_template"); w.string("{{ value_json.last_reset }}")
        }
        w.key("availability")
        w.beginArray()
        w.beginObject()
        w.key("topic"); w.string(statusTopic)
        w.endObject()
        w.endArray()
        if let u = e.unit { w.key("unit_of_measurement"); w.string(u) }
        if let c = e.deviceClass { w.key("device_class"); w.string(c) }
        if let c = e.stateClass { w.key("state_class"); w.string(c) }
        if let p = e.precision { w.key("suggested_display_precision"); w.int(p) }
        if e.recordType == "workout" { w.key("icon"); w.string("mdi:run") }
        if e.type == "sleep_analysis" { w.key("icon"); w.string("mdi:sleep") }
        w.key("device")
        w.beginObject()
        w.key("identifiers")
        w.beginArray(); w.string("healthgate_\(slug)"); w.endArray()
        w.key("name"); w.string(deviceName(device))
        w.key("manufacturer"); w.string("Apple Health via healthgate")
        w.key("model"); w.string("iPhone")
        if let person = person(of: device) { w.key("via_device"); w.string(MQTTSink.personID(person)) }
        w.endObject()
        w.key("origin")
        w.beginObject()
        w.key("name"); w.string("healthgate")
        w.key("sw"); w.string(Healthgate.version)
        w.endObject()
        w.key("qos"); w.int(settings.qos)
        w.endObject()
        return w.bytes
    }

    /// A name as Home Assistant makes entity ids of it: `[a-z0-9_]`, runs of anything else one
    /// `_`, none at the ends (`Anna's iPhone` → `anna_s_iphone`); nil when nothing is left.
    static func entitySlug(_ name: String) -> String? {
        var out = ""
        for c in name.lowercased().unicodeScalars {
            if (c >= "a" && c <= "z") || (c >= "0" && c <= "9") {
                out.unicodeScalars.append(c)
            } else if !out.isEmpty && !out.hasSuffix("_") {
                out += "_"
            }
        }
        while out.hasSuffix("_") { out.removeLast() }
        return out.isEmpty ? nil : String(out.prefix(48))
    }

    /// A device id as one topic level and HA's node id, that no other id can have: an id of
    /// `[a-z0-9-]` alone (at most 64 bytes) as it is; any other as `[a-z0-9_-]` (at most 40 bytes
    /// of it), `_` and 16 hex digits of its SHA-256 — the one form never has `_`, the other always
    /// ends in `_` and its hash, so neither can be chosen to be another's, and `healthgate_<slug>_<object id>`
    /// splits one way only.
    static func deviceSlug(_ s: String) -> String {
        let plain =
            s.utf8.count <= 64 && !s.isEmpty
            && s.utf8.allSatisfy {
                ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z")) || ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9"))
                    || $0 == UInt8(ascii: "-")
            }
        if plain { return s }
        var lossy: [UInt8] = []
        for b in s.utf8 where lossy.count < 40 {
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"): lossy.append(b)
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): lossy.append(b | 0x20)
            default: lossy.append(UInt8(ascii: "_"))
            }
        }
        return String(decoding: lossy, as: UTF8.self) + "_" + Crypto.lowercaseHex(Array(Crypto.sha256(Array(s.utf8)).prefix(8)))
    }

    /// The device slug of before (`slug`), for taking down what was announced under it.
    static func legacySlug(_ s: String) -> String { slug(s) }

    /// A type as one topic level: `[a-z0-9_-]`, lower case; one that had to change keeps a hash
    /// of the original, so two stay two (within one device's topics).
    static func slug(_ s: String) -> String {
        // ASCII, as device ids and type names are, byte by byte (every record's topic goes
        // through here: by Unicode scalar properties it was an eighth of the server's CPU).
        var bytes: [UInt8] = []
        bytes.reserveCapacity(s.utf8.count)
        var changed = false
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "-"):
                bytes.append(b)
            case UInt8(ascii: "A")...UInt8(ascii: "Z"):
                bytes.append(b | 0x20)
                changed = true
            case 0x80...:
                return unicodeSlug(s)
            default:
                bytes.append(UInt8(ascii: "_"))
                changed = true
            }
        }
        return finished(String(decoding: bytes, as: UTF8.self), of: s, changed: changed)
    }

    /// `slug` of a name beyond ASCII, by each scalar's lower case.
    static func unicodeSlug(_ s: String) -> String {
        var out = ""
        var changed = false
        for c in s.unicodeScalars {
            let lower = c.properties.lowercaseMapping
            if let u = lower.unicodeScalars.first, lower.unicodeScalars.count == 1,
                (u >= "a" && u <= "z") || (u >= "0" && u <= "9") || u == "_" || u == "-"
            {
                out.unicodeScalars.append(u)
                if u != c { changed = true }
            } else {
                out += "_"
                changed = true
            }
        }
        return finished(out, of: s, changed: changed)
    }

    /// One that had to change, or is long, keeps a hash of the original.
    private static func finished(_ out: String, of s: String, changed: Bool) -> String {
        if out.isEmpty { return "_" }
        if changed || out.utf8.count > 64 { return String(out.prefix(48)) + "_" + FNV1a.hex(s).prefix(8) }
        return out
    }
}
