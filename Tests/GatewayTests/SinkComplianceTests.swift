import CanonicalJSON
import Foundation
import Glibc
@testable import Gateway
import HealthgateCore
@testable import HealthgateTesting
@testable import HTTPDelivery
@testable import Pipeline
import Posix
import SinkKit
import Sinks
@testable import SinkHomeAssistant
@testable import SinkPostgres
import Testing
import YAMLConfig

/// One destination under test: how to configure a sink of the kind, how to read back what
/// the destination holds (as the store by key that the sink promises), and the faults it can
/// be made to show. A new sink kind adds a harness here; `everyKindHasAHarness` fails until it does.
protocol SinkHarness: AnyObject {
    var kind: String { get }
    /// The sink's settings, YAML.
    var yaml: String { get }
    /// The data dir the sink runs with.
    var dataDir: String { get }
    /// What the destination holds, one sorted line per stored record: `key value`.
    func stored() throws -> [String]
    /// A failure that must be kept and tried again: the Retry-After the destination says (nil
    /// when it cannot say one) and how to end it (nil: it ends by itself after one answer).
    func transientFault() throws -> (retryAfter: Double?, heal: (() -> Void)?)
    /// Makes the destination refuse, for good, the records of device "poison".
    func refusePoison() throws
    /// The destination's TCP port, for the clean-close check (nil: files).
    var port: UInt16? { get }
    /// The record the destination refuses after `refusePoison` (default: it as it is).
    func poison(_ r: CanonicalRecord) -> CanonicalRecord
    /// Connections of the test's own to the destination's port (default none).
    var ownConnections: Int { get }
    /// What `stored` must say after the sink wrote these records, in order (default: a store by key).
    func expected(_ written: [CanonicalRecord]) -> [String]
}

extension SinkHarness {
    func poison(_ r: CanonicalRecord) -> CanonicalRecord { r }
    var ownConnections: Int { 0 }

    /// What `stored` must say after the sink wrote `written` in order: a plain store by key
    /// (`device|uuid|part value`, a delete removing every part of its key).
    func expected(_ written: [CanonicalRecord]) -> [String] {
        Store.fold(
            written.map { r in
                var o: [String: Any] = ["device": r.device, "uuid": r.uuid, "op": r.op == .delete ? "delete" : "upsert"]
                if let p = r.part { o["part"] = p }
                if case .number(let v) = r.value { o["value"] = NSNumber(value: Int(v)) }
                return o
            })
    }
}

enum Harnesses {
    static func make(_ kind: String) throws -> any SinkHarness {
        switch kind {
        case "file": try FileHarness()
        case "homeassistant": try HomeAssistantHarness()
        case "http": try HTTPHarness()
        case "influxdb": try InfluxHarness()
        case "mqtt": try MQTTHarness()
        case "postgres": try PostgresHarness()
        default: throw ServeError(description: "no compliance harness for sink kind \(kind)")
        }
    }

    static let kinds = ["file", "homeassistant", "http", "influxdb", "mqtt", "postgres"]
}

/// The file sink: an append-only archive, read as a store by replaying it line by line.
final class FileHarness: SinkHarness {
    let kind = "file"
    let dataDir = ServeProcess.makeTempDir("comply-file")
    var yaml: String { #"{kind: file, path: "out/{device}/records.ndjson"}"# }
    var port: UInt16? { nil }
    private var mounted: String?

    init() throws {}

    deinit { if let m = mounted { _ = DiskFullTests.sh("umount -l \(m)") } }

    func stored() throws -> [String] {
        var lines: [[String: Any]] = []
        let out = dataDir + "/out"
        for device in (try? FileManager.default.contentsOfDirectory(atPath: out))?.sorted() ?? [] {
            guard let text = try? String(contentsOfFile: "\(out)/\(device)/records.ndjson", encoding: .utf8) else { continue }
            for line in text.split(separator: "\n") {
                lines.append(try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]))
            }
        }
        return Store.fold(lines)
    }

    func transientFault() throws -> (retryAfter: Double?, heal: (() -> Void)?) {
        // A full disk (a small tmpfs): ENOSPC, which passes once there is room again.
        try #require(getuid() == 0, "the file sink's transient fault mounts a tmpfs (root, as CI runs)")
        let out = dataDir + "/out"
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        #expect(DiskFullTests.sh("mount -t tmpfs -o size=64k tmpfs \(out)") == 0)
        mounted = out
        #expect(DiskFullTests.sh("head -c 65536 /dev/zero > \(out)/filler 2>/dev/null; true") == 0)
        return (nil, { try? FileManager.default.removeItem(atPath: out + "/filler") })
    }

    func refusePoison() throws {
        // A file where the device's directory must go: ENOTDIR, for good.
        try FileManager.default.createDirectory(atPath: dataDir + "/out", withIntermediateDirectories: true)
        try Data("x".utf8).write(to: URL(fileURLWithPath: dataDir + "/out/poison"))
    }
}

/// The http sink: a webhook that stores what it is sent by key.
final class HTTPHarness: SinkHarness, @unchecked Sendable {
    let kind = "http"
    let dataDir = ServeProcess.makeTempDir("comply-http")
    private let lock = NSLock()
    private var objects: [[String: Any]] = []
    private let faults = FaultSwitch()
    private(set) var endpoint: ScriptedEndpoint!

    init() throws {
        endpoint = try ScriptedEndpoint { [unowned self] r in answer(r) }
    }

    var yaml: String { #"{kind: http, url: "\#(endpoint.url)"}"# }
    var port: UInt16? { endpoint.port }

    private func answer(_ r: HTTPRequest) -> HTTPResponse {
        let batch = (try? JSONSerialization.jsonObject(with: Data(r.body)) as? [[String: Any]]) ?? []
        if let f = faults.fault(body: r.body, isPoison: { _ in batch.contains { $0["device"] as? String == "poison" } }) { return f }
        lock.lock()
        objects += batch
        lock.unlock()
        return HTTPResponse(status: 200)
    }

    func stored() throws -> [String] {
        lock.lock()
        defer { lock.unlock() }
        return Store.fold(objects)
    }

    func transientFault() throws -> (retryAfter: Double?, heal: (() -> Void)?) {
        faults.failNext()
        return (120, nil)
    }

    func refusePoison() throws { faults.refusePoison() }
}

/// The influxdb sink against a real influxd 1.x, through a proxy that can inject the faults
/// influxd will not produce on demand (a 503 with Retry-After, a refusal).
final class InfluxHarness: SinkHarness, @unchecked Sendable {
    let kind = "influxdb"
    let dataDir = ServeProcess.makeTempDir("comply-influx")
    let db: DatabaseProcess
    private let faults = FaultSwitch()
    private(set) var proxy: ScriptedEndpoint!

    init() throws {
        db = try DatabaseProcess.influxDB()
        let target = db.port
        proxy = try ScriptedEndpoint { [unowned self] r in
            if let f = faults.fault(body: r.body, isPoison: { String(decoding: $0, as: UTF8.self).contains("poison") }) {
                return f.status == 422 ? HTTPResponse(status: 400, body: f.body) : f
            }
            let url = "http://127.0.0.1:\(target)\(r.path)\(r.query.isEmpty ? "" : "?" + r.query)"
            let headers = r.headers.filter { ["authorization", "content-type", "content-encoding"].contains($0.name.lowercased()) }
            guard let answer = try? CurlClient().send(r.method, url: url, headers: headers.map { ($0.name, $0.value) }, body: r.body)
            else { return HTTPResponse(status: 502) }
            return HTTPResponse(status: answer.status, body: answer.body)
        }
    }

    var yaml: String { #"{kind: influxdb, api: v1, url: "http://127.0.0.1:\#(proxy.port)", database: health, gzip: false}"# }
    var port: UInt16? { proxy.port }

    func stored() throws -> [String] {
        let json = try db.influxQuery("SELECT * FROM /.*/")
        var out: [String] = []
        for s in ((json["results"] as? [[String: Any]])?.first?["series"] as? [[String: Any]]) ?? [] {
            let columns = s["columns"] as? [String] ?? []
            for values in s["values"] as? [[Any]] ?? [] {
                let row = Dictionary(uniqueKeysWithValues: zip(columns, values))
                out.append("\(s["name"] ?? "") \(row["phone"] ?? "") \(row["time"] ?? "") \(row["value"] ?? "")")
            }
        }
        return out.sorted()
    }

    func transientFault() throws -> (retryAfter: Double?, heal: (() -> Void)?) {
        faults.failNext()
        return (120, nil)
    }

    func refusePoison() throws { faults.refusePoison() }

    /// InfluxDB keeps a point by series and time (a record written again over another's point
    /// overwrites it); a delete removes every point its key was written as (the point index).
    func expected(_ written: [CanonicalRecord]) -> [String] {
        var points: [String: String] = [:]
        var noted: [String: Set<String>] = [:]
        for r in written {
            let key = "\(r.device)|\(r.uuid)"
            if r.op == .delete {
                for p in noted[key] ?? [] { points[p] = nil }
                noted[key] = nil
                continue
            }
            let point = "\(r.type) \(r.device) \(Timestamp(seconds: r.start?.seconds ?? 0).rfc3339())"
            if case .number(let v) = r.value { points[point] = "\(Int(v))" }
            noted[key, default: []].insert(point)
        }
        return points.map { "\($0.key) \($0.value)" }.sorted()
    }
}

/// The mqtt sink against a real mosquitto, with `publish_records` on: the records topic read as a
/// log by key (as a consumer that stores them would), through an in-process subscriber.
/// Faults: the broker paused with SIGSTOP (nothing is acknowledged: kept), and a broker whose
/// maximum packet size a poison record exceeds (never sendable: rejected).
final class MQTTHarness: SinkHarness {
    let kind = "mqtt"
    let dataDir = ServeProcess.makeTempDir("comply-mqtt")
    var broker: DatabaseProcess
    let recorder: MQTTRecorder

    init() throws {
        // The recorder is a subscriber like any: the broker queues what it has not yet taken
        // without a limit (mosquitto drops past 1,000 by default; a 6,000-record batch under a
        // sanitizer outran it).
        broker = try DatabaseProcess.mosquitto(extra: "max_packet_size 8192\nmax_queued_messages 0")
        recorder = try MQTTRecorder(port: broker.port, topic: "healthgate/+/records/#")
    }

    deinit {
        kill(broker.process.processIdentifier, SIGCONT)
        recorder.stop()
    }

    var yaml: String {
        #"{kind: mqtt, url: "mqtt://127.0.0.1:\#(broker.port)", publish_records: true, timeout: 1s, client_id: comply}"#
    }
    var port: UInt16? { broker.port }
    var ownConnections: Int { 1 }

    func stored() throws -> [String] {
        // Acknowledged by the broker is not yet received by the subscriber: read once it is quiet.
        var seen: [String] = []
        while true {
            usleep(150_000)
            let now = recorder.payloads
            if now == seen { break }
            seen = now
        }
        let objects = seen.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        return Store.fold(objects.filter { $0["uuid"] != nil })
    }

    func transientFault() throws -> (retryAfter: Double?, heal: (() -> Void)?) {
        let pid = broker.process.processIdentifier
        kill(pid, SIGSTOP)
        return (nil, { kill(pid, SIGCONT) })
    }

    func refusePoison() throws {}

    func poison(_ r: CanonicalRecord) -> CanonicalRecord {
        var big = r
        big.extra = [RecordField("note", .string(String(repeating: "x", count: 10_000)))]
        return big
    }
}

/// The homeassistant sink against a real Home Assistant (2024.3.3 and its recorder): what it
/// holds is hourly statistics, so a line is a device's hour and its running sum of steps, and
/// what it must hold is those of the records a store by key keeps. Faults: Home Assistant
/// frozen (SIGSTOP: the sink's answer times out, kept), and a steps sample whose value is no
/// number (refused: rejected).
final class HomeAssistantHarness: SinkHarness {
    let kind = "homeassistant"
    let dataDir = ServeProcess.makeTempDir("comply-ha")
    let ha: DatabaseProcess
    let token: String

    /// One Home Assistant for every test of the suite (each takes some 20 s to start, seven
    /// tests, three runs in `make test`), stopped when the test process ends; each harness
    /// clears the statistics it reads before it begins.
    nonisolated(unsafe) private static var shared: (broker: DatabaseProcess, ha: DatabaseProcess, token: String)?
    nonisolated(unsafe) private static var pids: [pid_t] = []
    private static let lock = NSLock()

    init() throws {
        Self.lock.lock()
        defer { Self.lock.unlock() }
        if Self.shared == nil {
            let broker = try DatabaseProcess.mosquitto()
            let (ha, token) = try DatabaseProcess.homeAssistant(brokerPort: broker.port, recorder: true)
            Self.shared = (broker, ha, token)
            Self.pids = [ha.process.processIdentifier, broker.process.processIdentifier]
            atexit { for pid in HomeAssistantHarness.pids { kill(pid, SIGKILL) } }
        }
        ha = Self.shared!.ha
        token = Self.shared!.token
        let c = try HAConnection(url: ha.url, token: token)
        _ = try c.call("recorder/clear_statistics") { w in
            w.key("statistic_ids"); w.beginArray()
            for d in Self.devices { w.string(HAStatisticIDs.id(device: d, type: "steps")) }
            w.endArray()
        }
    }

    deinit { kill(ha.process.processIdentifier, SIGCONT) }

    // The records are of 2026-10-14: a window that takes them for years.
    var yaml: String { #"{kind: homeassistant, url: "\#(ha.url)", token: "\#(token)", history: 3650d, timeout: 2s}"# }
    var port: UInt16? { ha.port }

    static let devices = ["phone-1", "phone-2", "poison"]

    func stored() throws -> [String] {
        // Imported is queued in HA's recorder: read once two reads a moment apart agree.
        var seen: [String] = []
        for _ in 0..<40 {
            usleep(400_000)
            let now = try read()
            if now == seen { return now }
            seen = now
        }
        return seen
    }

    private func read() throws -> [String] {
        let c = try HAConnection(url: ha.url, token: token)
        let ids = Self.devices.map { HAStatisticIDs.id(device: $0, type: "steps") }
        let bytes = try c.call("recorder/statistics_during_period") { w in
            w.key("start_time"); w.string("2026-10-13T00:00:00Z")
            w.key("statistic_ids"); w.beginArray(); for id in ids { w.string(id) }; w.endArray()
            w.key("period"); w.string("hour")
            w.key("types"); w.beginArray(); w.string("sum"); w.endArray()
        }
        let json = try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] ?? [:]
        var out: [String] = []
        for (device, id) in zip(Self.devices, ids) {
            for row in json[id] as? [[String: Any]] ?? [] {
                out.append("\(device) \(Int64((row["start"] as? Double ?? 0) / 1000)) \(Int64((row["sum"] as? Double ?? -1).rounded()))")
            }
        }
        return out.sorted()
    }

    /// A store by key (device, uuid, part), summed by the hour: each hour ever written, with the
    /// running sum of its device's samples up to its end (a deletion leaves its hour, unchanged).
    func expected(_ written: [CanonicalRecord]) -> [String] {
        var byKey: [String: (hour: Int64, value: Double)] = [:]
        var hours: [String: Set<Int64>] = [:]
        for r in written {
            let prefix = "\(r.device)|\(r.uuid)|"
            if r.op == .delete {
                for k in byKey.keys where k.hasPrefix(prefix) { byKey[k] = nil }
                continue
            }
            guard case .number(let v) = r.value, let t = r.start else { continue }
            let hour = HourlyBook.hour(t.seconds)
            byKey[prefix + "\(r.part ?? -1)"] = (hour, v)
            hours[r.device, default: []].insert(hour)
        }
        var out: [String] = []
        for (device, set) in hours {
            for hour in set {
                let sum = byKey.filter { $0.key.hasPrefix(device + "|") && $0.value.hour <= hour }.reduce(0) { $0 + $1.value.value }
                out.append("\(device) \(hour) \(Int64(sum.rounded()))")
            }
        }
        return out.sorted()
    }

    func transientFault() throws -> (retryAfter: Double?, heal: (() -> Void)?) {
        let pid = ha.process.processIdentifier
        kill(pid, SIGSTOP)
        return (nil, { kill(pid, SIGCONT) })
    }

    func refusePoison() throws {}

    func poison(_ r: CanonicalRecord) -> CanonicalRecord {
        var bad = r
        bad.value = .string("many")
        return bad
    }
}

/// The postgres sink against a real PostgreSQL: the records table read back by key. Faults: the
/// table locked by another session (the sink's statement times out: kept, until the lock goes),
/// and a record with a NUL byte, which PostgreSQL cannot store in text (refused: rejected).
final class PostgresHarness: SinkHarness {
    let kind = "postgres"
    let dataDir = ServeProcess.makeTempDir("comply-postgres")
    let db: DatabaseProcess
    private var holder: PGConnection?

    init() throws {
        db = try DatabaseProcess.postgres()
    }

    var yaml: String { #"{kind: postgres, dsn: "\#(db.postgresURL)", statement_timeout: 1s, connect_timeout: 2s}"# }
    var port: UInt16? { db.port }

    func stored() throws -> [String] {
        let out = try db.psql(
            """
            SELECT device || '|' || uuid || '|' || CASE WHEN parts IS NULL THEN '-' ELSE part::text END || ' ' || value
            FROM healthgate.records ORDER BY 1
            """)
        return out.split(separator: "\n").map(String.init).sorted()
    }

    func transientFault() throws -> (retryAfter: Double?, heal: (() -> Void)?) {
        // The schema first (a sink opened once makes it), then a lock the sink's insert waits on.
        let node = try parseYAML(yaml, file: "sink", environment: [:])
        let built = try PostgresSink.build(name: "setup", node: node, path: "sinks.setup", context: SinkBuildContext(dataDir: dataDir))
        try built.open(
            SinkContext(
                name: "setup", dataDir: dataDir, stateDir: dataDir, clock: SystemClock(),
                logger: Logger(component: "t", sink: MemoryLogSink()))
        ).close()
        let c = try PGConnection(dsn: db.postgresURL, extra: [])
        try c.execute("BEGIN")
        try c.execute("LOCK TABLE healthgate.records IN ACCESS EXCLUSIVE MODE")
        holder = c
        return (
            nil,
            { [self] in
                _ = try? holder?.execute("ROLLBACK")
                holder?.close()
                holder = nil
            }
        )
    }

    func refusePoison() throws {}

    func poison(_ r: CanonicalRecord) -> CanonicalRecord {
        var bad = r
        bad.source = RecordSource(app: "com.example\u{0}", device: nil)
        return bad
    }
}

/// The faults a test turns on in a destination it fronts: the next answers unavailable (503
/// with Retry-After: 120), and records of device "poison" refused for good.
final class FaultSwitch: @unchecked Sendable {
    private let lock = NSLock()
    private var unavailable = 0
    private var poison = false

    func failNext(_ n: Int = 1) {
        lock.lock()
        unavailable = n
        lock.unlock()
    }

    func refusePoison() {
        lock.lock()
        poison = true
        lock.unlock()
    }

    /// What to do with a request whose body is `body`: nil to pass it on.
    func fault(body: [UInt8], isPoison: ([UInt8]) -> Bool) -> HTTPResponse? {
        lock.lock()
        defer { lock.unlock() }
        if unavailable > 0 {
            unavailable -= 1
            return HTTPResponse(status: 503, headers: [HTTPHeader("Retry-After", "120")], body: Array("busy".utf8))
        }
        if poison && isPoison(body) { return HTTPResponse(status: 422, body: Array(#"{"error":"poison refused"}"#.utf8)) }
        return nil
    }
}

/// Canonical records folded as a store by key would hold them.
enum Store {
    static func fold(_ objects: [[String: Any]]) -> [String] {
        var byKey: [String: String] = [:]
        for o in objects {
            let device = o["device"] as? String ?? "", uuid = o["uuid"] as? String ?? ""
            if o["op"] as? String == "delete" {
                for k in byKey.keys where k.hasPrefix("\(device)|\(uuid)|") { byKey[k] = nil }
                continue
            }
            byKey["\(device)|\(uuid)|\(o["part"].map { "\($0)" } ?? "-")"] = "\(o["value"] ?? "")"
        }
        return byKey.map { "\($0.key) \($0.value)" }.sorted()
    }
}

@Suite(.serialized) struct SinkComplianceTests {
    let logger = Logger(component: "test", sink: MemoryLogSink())

    static func record(
        _ uuid: String, device: String = "phone-1", part: Int? = nil, second: Int64 = 0,
        value: Double = 412
    ) -> CanonicalRecord {
        CanonicalRecord(
            kind: "quantity", device: device, receiver: "r", uuid: uuid, type: "steps", part: part,
            parts: part == nil ? nil : 2, start: Timestamp(seconds: 1_791_961_260 + second),
            end: Timestamp(seconds: 1_791_961_260 + second), value: .number(value), unit: "count")
    }

    static func deletion(_ uuid: String, device: String = "phone-1") -> CanonicalRecord {
        CanonicalRecord(op: .delete, kind: "quantity", device: device, receiver: "r", uuid: uuid, type: "steps")
    }

    func built(_ h: any SinkHarness) throws -> BuiltSink {
        let node = try parseYAML(h.yaml, file: "sink", environment: [:])
        let build = try #require(SinkRegistry.builder(kind: h.kind))
        return try build("s", node, "sinks.s", SinkBuildContext(dataDir: h.dataDir))
    }

    func open(_ h: any SinkHarness) throws -> any Sink {
        let stateDir = SinkDrainer.stateDirectory(sink: "s", dataDir: h.dataDir)
        try FileIO.makeDirectories(stateDir, mode: 0o700)
        return try built(h).open(
            SinkContext(
                name: "s", dataDir: h.dataDir, stateDir: stateDir, clock: SystemClock(),
                logger: logger))
    }

    func drainer(_ h: any SinkHarness, _ j: Journal, clock: FakeClock) throws -> SinkDrainer {
        var b = try built(h)
        b.common.batch.max_wait = ConfigDuration(nanoseconds: 5_000_000)
        return SinkDrainer(
            name: "s", built: b, routes: [Route(name: "all", from: [Glob("*")], transforms: [], to: ["s"])],
            journal: j, dataDir: h.dataDir, logger: logger, clock: clock)
    }

    func append(_ j: Journal, _ records: [CanonicalRecord]) throws {
        try j.append(payload: CanonicalCodec.encodeLines(records), count: records.count, time: Timestamp(seconds: 0))
    }

    @Test func everyKindHasAHarness() {
        #expect(Set(SinkRegistry.kinds) == Set(Harnesses.kinds))
    }

    @Test(arguments: Harnesses.kinds) func resendingABatchChangesNothing(kind: String) throws {
        let h = try Harnesses.make(kind)
        let sink = try open(h)
        let records = [
            Self.record("a"), Self.record("b", second: 1), Self.record("p", part: 0, second: 2),
            Self.record("p", part: 1, second: 3)
        ]
        let batch = SinkBatch(records: records)
        #expect(sink.write(batch) == .accepted)
        let once = try h.stored()
        #expect(once == h.expected(records), "\(once)")
        #expect(sink.write(batch) == .accepted)
        #expect(try h.stored() == once)
        sink.close()
    }

    @Test(arguments: Harnesses.kinds) func aDeleteRemovesEveryPartUnderItsKey(kind: String) throws {
        let h = try Harnesses.make(kind)
        let sink = try open(h)
        let records = [Self.record("keep"), Self.record("w", part: 0, second: 1), Self.record("w", part: 1, second: 2)]
        #expect(sink.write(SinkBatch(records: records)) == .accepted)
        #expect(try h.stored() == h.expected(records))
        #expect(sink.write(SinkBatch(records: [Self.deletion("w")])) == .accepted)
        let left = try h.stored()
        #expect(left == h.expected(records + [Self.deletion("w")]), "\(left)")
        #expect(h.expected(records + [Self.deletion("w")]) != h.expected(records))
        sink.close()
    }

    /// keep: tried again after the Retry-After the destination said (or the backoff), on the
    /// drainer's clock — a fake one here, so nothing sleeps — and then delivered.
    @Test(arguments: Harnesses.kinds) func aKeptBatchIsTriedAgainAfterItsRetryAfter(kind: String) throws {
        let h = try Harnesses.make(kind)
        let j = try Journal(directory: h.dataDir + "/journal", logger: logger)
        let (retryAfter, heal) = try h.transientFault()
        try append(j, [Self.record("later")])
        let clock = FakeClock()
        let d = try drainer(h, j, clock: clock)
        let started = monotonicSeconds()
        try d.start()
        #expect(ServeProcess.eventually { d.metrics.kept.load(ordering: .relaxed) >= 1 })
        heal?()
        #expect(ServeProcess.eventually(20) { ((try? h.stored()) ?? []) == h.expected([Self.record("later")]) })
        d.stop()
        if let retryAfter {
            #expect(clock.waited >= retryAfter, "waited \(clock.waited) on the drainer's clock")
            #expect(monotonicSeconds() - started < retryAfter / 4, "the test slept instead of advancing the clock")
        }
        #expect(d.metrics.sent.load(ordering: .relaxed) == 1)
        #expect(try d.loadCursor() == Cursor(seq: 2, skip: 0))
    }

    /// reject: to the sink's dead letters with the reason; the rest of the batch is delivered.
    @Test(arguments: Harnesses.kinds) func aRefusedRecordGoesToTheDeadLettersAndTheRestThrough(kind: String) throws {
        let h = try Harnesses.make(kind)
        try h.refusePoison()
        let j = try Journal(directory: h.dataDir + "/journal", logger: logger)
        try append(j, [Self.record("ok1"), h.poison(Self.record("bad", device: "poison", second: 1)), Self.record("ok2", second: 2)])
        let d = try drainer(h, j, clock: FakeClock())
        try d.start()
        #expect(ServeProcess.eventually { d.metrics.rejected.load(ordering: .relaxed) == 1 })
        #expect(ServeProcess.eventually { ((try? h.stored()) ?? []) == h.expected([Self.record("ok1"), Self.record("ok2", second: 2)]) })
        d.stop()
        let dead = try String(contentsOfFile: DeadLetters.path(sink: "s", dataDir: h.dataDir), encoding: .utf8)
        #expect(dead.contains(#""uuid":"bad""#))
        #expect(dead.contains(#""reason":"#))
        #expect(try d.loadCursor() == Cursor(seq: 2, skip: 0))
    }

    /// A sink that reads no field of its records (a file sink with a fixed path, no transform)
    /// dead-letters what it can never write like any other, instead of retrying it forever.
    @Test func aFixedPathFileSinkDeadLettersWhatItCanNeverWrite() throws {
        let dataDir = ServeProcess.makeTempDir("comply-fixed")
        try FileManager.default.createDirectory(atPath: dataDir + "/out", withIntermediateDirectories: true)
        try Data("x".utf8).write(to: URL(fileURLWithPath: dataDir + "/out/blocked")) // ENOTDIR, for good
        let node = try parseYAML(#"{kind: file, path: "out/blocked/records.ndjson"}"#, file: "sink", environment: [:])
        let build = try #require(SinkRegistry.builder(kind: "file"))
        var b = try build("s", node, "sinks.s", SinkBuildContext(dataDir: dataDir))
        b.common.batch.max_wait = ConfigDuration(nanoseconds: 5_000_000)
        let j = try Journal(directory: dataDir + "/journal", logger: logger)
        try append(j, [Self.record("f1"), Self.record("f2", second: 1)])
        let d = SinkDrainer(
            name: "s", built: b, routes: [Route(name: "all", from: [Glob("*")], transforms: [], to: ["s"])],
            journal: j, dataDir: dataDir, logger: logger, clock: FakeClock())
        try d.start()
        #expect(ServeProcess.eventually { d.metrics.rejected.load(ordering: .relaxed) == 2 })
        d.stop()
        let dead = try String(contentsOfFile: DeadLetters.path(sink: "s", dataDir: dataDir), encoding: .utf8)
        #expect(dead.contains(#""uuid":"f1""#) && dead.contains(#""uuid":"f2""#))
        #expect(dead.contains("cannot write"))
        #expect(try d.loadCursor() == Cursor(seq: 2, skip: 0))
    }

    /// close: after stop, the sink holds no file and no connection.
    @Test(arguments: Harnesses.kinds) func closeIsClean(kind: String) throws {
        let h = try Harnesses.make(kind)
        let j = try Journal(directory: h.dataDir + "/journal", logger: logger)
        try append(j, [Self.record("c1"), Self.record("c2", second: 1)])
        let d = try drainer(h, j, clock: FakeClock())
        try d.start()
        #expect(ServeProcess.eventually { d.metrics.sent.load(ordering: .relaxed) == 2 })
        // Open while it runs (so the checks below can fail)…
        if let port = h.port {
            #expect(Self.establishedConnections(toPort: port) >= h.ownConnections + 1)
        } else {
            #expect(!Self.openFiles().filter { $0.hasPrefix(h.dataDir + "/out") }.isEmpty)
        }
        d.stop()
        #expect(Self.openFiles().filter { $0.hasPrefix(h.dataDir + "/out") }.isEmpty)
        if let port = h.port { #expect(Self.establishedConnections(toPort: port) == h.ownConnections) }
    }

    /// restart: a new drainer resumes from the cursor — it writes what came after, not what
    /// the old one delivered.
    @Test(arguments: Harnesses.kinds) func aRestartResumesFromTheCursor(kind: String) throws {
        let h = try Harnesses.make(kind)
        let j = try Journal(directory: h.dataDir + "/journal", logger: logger)
        let first = (0..<5).map { Self.record("first-\($0)", second: Int64($0)) }
        try append(j, first)
        var d = try drainer(h, j, clock: FakeClock())
        try d.start()
        #expect(ServeProcess.eventually { ((try? h.stored()) ?? []) == h.expected(first) })
        d.stop()
        let then = (0..<3).map { Self.record("then-\($0)", second: 10 + Int64($0)) }
        try append(j, then)
        d = try drainer(h, j, clock: FakeClock())
        try d.start()
        #expect(ServeProcess.eventually { ((try? h.stored()) ?? []) == h.expected(first + then) })
        d.stop()
        #expect(d.metrics.sent.load(ordering: .relaxed) == 3)
        #expect(try d.loadCursor() == Cursor(seq: 3, skip: 0))
    }

    /// Issue 45: each sink's encoder (and the InfluxDB sink's point index) in-process, driven
    /// with generated record sets — uuids that count up in their first bytes or their last,
    /// all alike but for their last digits, random; one time for all or one each; parts; the
    /// largest batch (past one InfluxDB request of 5,000 lines); deletes of what was written and
    /// of what never was — against the real destination, checked against a plain model of what
    /// it must hold after each batch.
    @Test(arguments: Harnesses.kinds) func generatedRecordSetsStoreWhatAPlainModelHolds(kind: String) throws {
        let h = try Harnesses.make(kind)
        let sink = try open(h)
        defer { sink.close() }
        var x: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next(_ n: Int) -> Int {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17
            return Int(x % UInt64(n))
        }
        func uuid(_ i: Int, _ shape: Int) -> String {
            switch shape {
            case 0: String(format: "%08X-0000-4000-8000-000000000001", i)
            case 1: String(format: "5E1D0000-0000-4000-8000-%012X", i)
            default: String(format: "%08X-%04X-4000-8000-%012X", (i &* 2_654_435_761) & 0xFFFF_FFFF, i & 0xFFFF, i &* 40_503)
            }
        }
        var written: [CanonicalRecord] = []
        var n = 0
        for round in 0..<6 {
            let shape = round % 3, oneTime = round >= 3
            let size = round == 2 ? 6_000 : 1 + next(300)
            var batch: [CanonicalRecord] = []
            for _ in 0..<size {
                if next(12) == 0, !written.isEmpty {
                    // A delete: of a key written before, or of one never written.
                    let r = next(2) == 0 ? written[next(written.count)] : Self.record(uuid(1_000_000 + next(1_000), shape))
                    batch.append(Self.deletion(r.uuid, device: r.device))
                    continue
                }
                n += 1
                let again = next(6) == 0 && n > 1
                let id = again ? 1 + next(n - 1) : n
                let part: Int? = id % 10 == 0 ? next(2) : nil // a uuid in parts always is
                batch.append(
                    Self.record(
                        uuid(id, shape), device: next(5) == 0 ? "phone-2" : "phone-1", part: part,
                        second: oneTime ? 0 : Int64(id), value: Double(next(100_000))))
            }
            #expect(sink.write(SinkBatch(records: batch)) == .accepted, "round \(round)")
            written += batch
            let want = h.expected(written)
            var got: [String] = []
            let same = ServeProcess.eventually(20) {
                got = (try? h.stored()) ?? []; return got == want
            }
            let apart = zip(got, want).first { $0.0 != $0.1 }.map { "\($0.0) / \($0.1)" } ?? "-"
            #expect(same, "\(kind) round \(round): \(got.count) stored, \(want.count) expected; first apart: \(apart)")
            if !same { return }
        }
    }

    /// Paths this process has open.
    static func openFiles() -> [String] { ProcFS.openFiles() }

    /// This process's established TCP connections whose far end is `port` on loopback.
    static func establishedConnections(toPort port: UInt16) -> Int {
        let inodes = ProcFS.socketInodes()
        return ProcFS.tcpSockets().filter { $0.state == "01" && $0.remotePort == port && inodes.contains($0.inode) }.count
    }
}
