import CanonicalJSON
import FastJSON
import Fleet
import Glibc
import HealthgateCrypto
import HealthgateCore
import Posix
import Synchronization
import YAMLConfig

/// The HealthSync app's backend contract (`POST /api/apple-health/sync`,
/// `../shared/spec/healthsync-app.md`): Bearer token, `X-Device-Id` as the device, metrics and
/// workouts with ids `healthkit:<uuid>`, deletions `[{"id","kind"}]` scoped to that device, an
/// `export_id` per batch (a batch sent again is recognised and not stored twice), schema
/// versions 1 and 2. The contract names its fields only in part; the accepted schema is below
/// and in docs/configuration.md, and whatever else arrives is kept under `extra`.
///
/// Accepted: `{"schema_version"|"version": 1|2, "export_id": "…",
///   "metrics": [{"id", "type"|"metric"|"data_type"|"name", "value"|"qty", "unit"|"units",
///                "start"|"start_date"|"startDate"|"date"|"timestamp", "end"|"end_date"|"endDate",
///                "source"|"source_name", "metadata"}],
///   "workouts": [{"id", "activity_type"|"activity"|"workout_type"|"type", "start…", "end…",
///                 "duration"|"duration_seconds", "active_energy_kcal", "total_energy_kcal",
///                 "distance_meters", "metadata"}],
///   "deletions": [{"id", "kind": "metric"|"workout"}]}`
public struct HealthSyncReceiver: Receiver {
    public let name: String
    public let paths: [String]
    public let maxBodyBytes: Int
    let auth: Authenticator
    let fallbackDevice: String?
    let parsers: ParserPool
    let exports: ExportLog
    let logger: Logger

    public func authorize(_ headersOnly: HTTPRequest) -> HTTPResponse? { auth.check(headersOnly) }

    public func receive(_ request: HTTPRequest, context: ReceiveContext) -> Reception {
        if let refusal = auth.check(request) { return .answer(refusal) }
        guard let device = request.header("x-device-id").flatMap({ $0.isEmpty ? nil : $0 }) ?? fallbackDevice else {
            return .unreadable(status: 400, reason: "the X-Device-Id header is missing (HealthSync sends its stable device id there)")
        }
        return parsers.withParser { parser in
            parser.withBody(request.body) { doc in
                let root = doc.root
                guard root.kind == .object else { return .unreadable(status: 400, reason: "the body must be a JSON object") }
                let version = (root["schema_version"] ?? root["version"])?.int64 ?? 1
                guard version == 1 || version == 2 else {
                    return .unreadable(status: 400, reason: "schema version \(version) is not one this gateway reads (1 or 2)")
                }
                for key in ["metrics", "workouts", "deletions"] {
                    if let v = root[key], !v.isNull, v.kind != .array {
                        return .unreadable(status: 400, reason: "\"\(key)\" must be an array")
                    }
                }
                let exportID = root["export_id"]?.string
                var counts = (metrics: 0, workouts: 0, deletions: 0)
                if let exportID, exports.contains(device: device, exportID: exportID) {
                    logger.info("\(name): export \(exportID) from device \(device) was already stored; not stored again")
                    var seen = ReceivedBatch()
                    seen.claim(device: device)
                    seen.requestID = exportID
                    seen.duplicates = ["metrics", "workouts", "deletions"].reduce(0) { $0 + (root[$1]?.count ?? 0) }
                    return .accept(seen, reply: reply(exportID: exportID, counts: counts, duplicate: true))
                }
                let mapper = HealthSyncMapper(receiver: name, device: device, exportID: exportID)
                var batch = ReceivedBatch()
                batch.requestID = exportID
                func take(_ key: String, _ count: inout Int, _ map: (JSONRef) -> HealthSyncMapper.Mapped) {
                    for item in root[key].map({ Array($0.elements) }) ?? [] {
                        switch map(item) {
                        case .success(let r): batch.append(r); count += 1
                        case .failure(let q): batch.quarantined.append(q)
                        }
                    }
                }
                take("metrics", &counts.metrics, mapper.metric)
                take("workouts", &counts.workouts, mapper.workout)
                take("deletions", &counts.deletions, mapper.deletion)
                // Only a batch that stored records marks its id as seen: an empty one sent first
                // must not make the real batch with that id look like a resend.
                if let exportID, batch.count > 0 {
                    let exports = self.exports
                    batch.afterCommit.append { exports.remember(device: device, exportID: exportID) }
                }
                return .accept(batch, reply: reply(exportID: exportID, counts: counts, duplicate: false))
            }
        }
    }

    func reply(exportID: String?, counts: (metrics: Int, workouts: Int, deletions: Int), duplicate: Bool) -> HTTPResponse {
        var w = JSONWriter(capacity: 160)
        w.beginObject()
        w.key("status"); w.string("ok")
        if let exportID { w.key("export_id"); w.string(exportID) }
        w.key("duplicate"); w.bool(duplicate)
        w.key("accepted")
        w.beginObject()
        w.key("metrics"); w.int(counts.metrics)
        w.key("workouts"); w.int(counts.workouts)
        w.key("deletions"); w.int(counts.deletions)
        w.endObject()
        w.endObject()
        return HTTPResponse(status: 200, headers: [HTTPHeader("Content-Type", "application/json")], body: w.bytes)
    }

    static let build: ReceiverRegistry.Builder = { name, c, node, path, context throws(ConfigProblems) in
        let auth =
            try c.auth.map { a throws(ConfigProblems) in try Authenticator(config: a, node: node, path: path + ".auth") }
            ?? Authenticator(kind: .none)
        return HealthSyncReceiver(
            name: name, paths: [c.path ?? "/api/apple-health/sync"],
            maxBodyBytes: Int(c.max_body?.bytes ?? Int64(ReceiverConfig.defaultMaxJSONBody)), auth: auth, fallbackDevice: c.device,
            parsers: context.parsers,
            exports: ExportLog(
                path: FileIO.join(context.dataDir, "healthsync/\(name).exports"), receiver: name, fleetState: context.fleetState),
            logger: context.logger.child("receiver \(name)"))
    }
}

/// The export ids stored per device (the newest 10,000), kept in a file so a batch sent again
/// after a restart is still recognised. Written after the batch is durable, never before. In a
/// fleet they are also noted in its PostgreSQL, so that a batch sent again to another ingest
/// machine is recognised there too (when that database cannot be reached, a batch may be stored
/// again: harmless, sinks store by key).
final class ExportLog: Sendable {
    private struct State {
        var loaded = false
        var seen: Set<String> = []
        var order: [String] = []
    }

    let path: String
    let receiver: String
    let shared: FleetDatabase?
    private let state = Locked(State())
    private let notedSinceTrim = Atomic<Int>(0)
    static let keep = 10_000
    static let table = FleetDatabase.table("exports")

    init(path: String, receiver: String = "", fleetState: String? = nil) {
        self.path = path
        self.receiver = receiver
        shared = fleetState.map {
            FleetDatabase(
                url: $0, purpose: "fleet export ids",
                schema: [
                    """
                    CREATE TABLE IF NOT EXISTS \(ExportLog.table) (
                        receiver text NOT NULL, key text NOT NULL, at timestamptz NOT NULL DEFAULT now(),
                        PRIMARY KEY (receiver, key))
                    """
                ])
        }
    }

    /// A digest of device and id: one line of the file whatever bytes the sender put in them.
    private func key(_ device: String, _ id: String) -> String { Crypto.derivedKey(["export", device, id]) }

    private func load(_ s: inout State) {
        guard !s.loaded else { return }
        s.loaded = true
        guard let bytes = try? FileIO.readAll(path) else { return }
        for line in bytes.split(separator: 0x0A) {
            let k = String(decoding: line, as: UTF8.self)
            if s.seen.insert(k).inserted { s.order.append(k) }
        }
    }

    func contains(device: String, exportID: String) -> Bool {
        let k = key(device, exportID)
        if state.withLock({ s in
            load(&s)
            return s.seen.contains(k)
        }) {
            return true
        }
        let found = try? shared?.with { c in
            try c.execute("SELECT 1 FROM \(ExportLog.table) WHERE receiver = $1 AND key = $2", [receiver, k]).rows.isEmpty == false
        }
        return found == true
    }

    func remember(device: String, exportID: String) {
        if let shared {
            let k = key(device, exportID)
            let trim = notedSinceTrim.wrappingAdd(1, ordering: .relaxed).newValue % 1000 == 0
            _ = try? shared.with { c in
                try c.execute(
                    "INSERT INTO \(ExportLog.table) (receiver, key) VALUES ($1, $2) ON CONFLICT DO NOTHING", [receiver, k])
                if trim {
                    try c.execute(
                        """
                        DELETE FROM \(ExportLog.table) WHERE receiver = $1 AND at < (
                            SELECT at FROM \(ExportLog.table) WHERE receiver = $1 ORDER BY at DESC OFFSET \(ExportLog.keep) LIMIT 1)
                        """, [receiver])
                }
            }
        }
        state.withLock { s in
            load(&s)
            let k = key(device, exportID)
            guard s.seen.insert(k).inserted else { return }
            s.order.append(k)
            if s.order.count > ExportLog.keep * 2 {
                s.order.removeFirst(s.order.count - ExportLog.keep)
                s.seen = Set(s.order)
                try? FileIO.writeAtomically(path, Array((s.order.joined(separator: "\n") + "\n").utf8), mode: 0o600)
                return
            }
            _ = try? FileIO.makeDirectories(FileIO.dirname(path), mode: 0o700)
            let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
            guard fd >= 0 else { return }
            _ = try? FileIO.writeAll(fd, Array((k + "\n").utf8), path: path)
            close(fd)
        }
    }
}

/// HealthSync items into canonical records.
struct HealthSyncMapper {
    let receiver: String
    let device: String
    let exportID: String?

    enum Mapped {
        case success(CanonicalRecord)
        case failure(QuarantinedRecord)
    }

    func raw(_ v: JSONRef) -> RawJSON { CanonicalCodec.raw(v) }

    func bad(_ reason: String, _ v: JSONRef) -> Mapped { .failure(QuarantinedRecord(reason: reason, raw: raw(v))) }

    /// `healthkit:<uuid>` → the HealthKit uuid (the same key as other senders of that sample).
    static func uuid(_ id: String) -> String {
        id.hasPrefix("healthkit:") ? String(id.dropFirst("healthkit:".count)) : id
    }

    func first(_ v: JSONRef, _ keys: [String]) -> (key: String, value: JSONRef)? {
        for k in keys { if let x = v[k], !x.isNull { return (k, x) } }
        return nil
    }

    func time(_ v: JSONRef, _ keys: [String]) -> (Timestamp, Int?, String)?? {
        guard let (k, x) = first(v, keys) else { return .some(nil) }
        guard let s = x.string, let t = HAEBody.date(s) else { return nil }
        return .some((t.0, t.1, k))
    }

    func keepRest(_ v: JSONRef, used: Set<String>, into r: inout CanonicalRecord) {
        for (k, value) in v.members where !used.contains(k.string) {
            if k.string == "metadata" { r.metadata = raw(value); continue }
            r.extra.append(RecordField(k.string, raw(value)))
        }
        if let exportID { r.extra.append(RecordField("export_id", .string(exportID))) }
    }

    static let startKeys = ["start", "start_date", "startDate", "date", "timestamp"]
    static let endKeys = ["end", "end_date", "endDate"]

    func metric(_ v: JSONRef) -> Mapped {
        guard v.kind == .object else { return bad("a metric must be an object", v) }
        guard let id = v["id"]?.string, !id.isEmpty else { return bad("the metric has no id", v) }
        guard let (typeKey, typeRef) = first(v, ["type", "metric", "data_type", "name"]), let given = typeRef.string else {
            return bad("the metric has no type", v)
        }
        guard let s = time(v, Self.startKeys), let (start, offset, startKey) = s else { return bad("the metric has no start time", v) }
        guard let e = time(v, Self.endKeys) else { return bad("the metric's end is not a time", v) }
        let known = HealthTypes.hk(given) ?? HealthTypes.named(given)
        var r = CanonicalRecord(
            kind: known?.kind == .category ? RecordKind.category : RecordKind.quantity, device: device,
            receiver: receiver, uuid: HealthSyncMapper.uuid(id), type: known?.name ?? given,
            start: start, end: e?.0, utcOffset: offset)
        if let a = r.end, a < start { return bad("the metric ends before it starts", v) }
        let valueKey = v["value"] != nil ? "value" : "qty"
        let unitKey = v["unit"] != nil ? "unit" : "units"
        if let x = v[valueKey], let d = x.double {
            // Into the type's canonical unit as it is journaled (ReceivedBatch.append).
            r.value = .number(d)
            r.unit = v[unitKey]?.string
        } else if let x = v[valueKey], let name = x.string {
            r.kind = RecordKind.category
            // HealthKit spellings ("asleepCore") to the registry's names ("asleep_core").
            let code = known?.code(forValue: name)
            r.value = .string(code.flatMap { known?.valueName(forCode: $0) } ?? name)
            r.code = code
            r.unit = v[unitKey]?.string // kept as sent: nothing a sender gave is dropped
        } else {
            return bad("the metric has no value", v)
        }
        if let src = first(v, ["source", "source_name"])?.value.string { r.source = RecordSource(app: src, device: nil) }
        keepRest(v, used: ["id", typeKey, startKey, e?.2 ?? "", valueKey, unitKey, "source", "source_name"], into: &r)
        return .success(r)
    }

    func workout(_ v: JSONRef) -> Mapped {
        guard v.kind == .object else { return bad("a workout must be an object", v) }
        guard let id = v["id"]?.string, !id.isEmpty else { return bad("the workout has no id", v) }
        guard let s = time(v, Self.startKeys), let (start, offset, startKey) = s else { return bad("the workout has no start time", v) }
        guard let e = time(v, Self.endKeys) else { return bad("the workout's end is not a time", v) }
        if let end = e?.0, end < start { return bad("the workout ends before it starts", v) }
        let activityField = first(v, ["activity_type", "activity", "workout_type", "type"])
        let given = activityField?.value.string ?? "other"
        // lowerCamelCase HealthKit names; `hk_<raw>` for types the app does not know.
        var activity = HealthTypes.workout(named: given)?.name ?? given
        if given.hasPrefix("hk_"), let raw = Int(given.dropFirst(3)), let w = HealthTypes.workout(rawValue: raw) { activity = w.name }
        var r = CanonicalRecord(
            kind: RecordKind.workout, device: device, receiver: receiver, uuid: HealthSyncMapper.uuid(id),
            type: "workout", start: start, end: e?.0, utcOffset: offset, activity: activity)
        let durationKey = v["duration"] != nil ? "duration" : "duration_seconds"
        r.durationS = v[durationKey]?.double ?? e.flatMap { $0 }.map { Double($0.0.seconds - start.seconds) }
        r.energyKcal = v["active_energy_kcal"]?.double
        r.distanceM = v["distance_meters"]?.double
        keepRest(
            v, used: ["id", startKey, e?.2 ?? "", activityField?.key ?? "", durationKey, "active_energy_kcal", "distance_meters"],
            into: &r)
        return .success(r)
    }

    func deletion(_ v: JSONRef) -> Mapped {
        guard let id = v["id"]?.string, !id.isEmpty else { return bad("a deletion needs an id", v) }
        let kind = v["kind"]?.string ?? "metric"
        guard kind == "metric" || kind == "workout" else {
            return bad("a deletion's kind is metric or workout, not \(QuarantinedRecord.describe(kind))", v)
        }
        // Scoped to the sending device: the record's device is X-Device-Id.
        return .success(
            CanonicalRecord(
                op: .delete, kind: kind == "workout" ? RecordKind.workout : "metric", device: device,
                receiver: receiver, uuid: HealthSyncMapper.uuid(id), type: kind == "workout" ? "workout" : "any"))
    }
}
