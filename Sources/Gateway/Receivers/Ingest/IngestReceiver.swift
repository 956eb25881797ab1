import CanonicalJSON
import FastJSON
import HealthgateCore
import HealthgateCrypto
import Posix
import YAMLConfig

/// The chunked ingest API (`POST /v1/ingest`, `../shared/spec/ingest-api.md`): a Bearer device
/// token; samples, workouts (with routes), sleep segments, activity summaries and deletions;
/// 202 with `batch_id`, the counts taken and `max_items`; more items than `max_items` (route
/// points included) is 413 with a problem document, so the client halves its chunk.
public struct IngestReceiver: Receiver {
    public let name: String
    public let paths: [String]
    public let maxBodyBytes: Int
    let auth: Authenticator
    let maxItems: Int
    let parsers: ParserPool

    public func authorize(_ headersOnly: HTTPRequest) -> HTTPResponse? { auth.check(headersOnly) }

    public func receive(_ request: HTTPRequest, context: ReceiveContext) -> Reception {
        if let refusal = auth.check(request) { return .answer(refusal) }
        return parsers.withParser { parser in parser.withBody(request.body) { doc in
            let root = doc.root
            guard root.kind == .object else { return .unreadable(status: 400, reason: "the body must be a JSON object") }
            guard let deviceID = root["device_id"]?.string, !deviceID.isEmpty else {
                return .unreadable(status: 400, reason: "\"device_id\" is required")
            }
            for key in ["samples", "workouts", "sleep_segments", "activity_summaries", "deletions"] {
                if let v = root[key], !v.isNull, v.kind != .array {
                    return .unreadable(status: 400, reason: "\"\(key)\" must be an array")
                }
            }
            // Route points count towards the chunk, as the spec says.
            var items = 0
            for key in ["samples", "workouts", "sleep_segments", "activity_summaries", "deletions"] {
                items += root[key]?.count ?? 0
            }
            for w in root["workouts"].map({ Array($0.elements) }) ?? [] { items += w["route"]?.count ?? 0 }
            if items > maxItems {
                return .answer(problem(413, "Chunk too large",
                                       "The chunk has \(items) items (samples, workouts, sleep segments, activity summaries, "
                                       + "route points and deletions); the limit is \(maxItems). Halve it and send again."))
            }
            var mapper = IngestMapper(receiver: name, device: deviceID, timeZone: root["time_zone"]?.string)
            var batch = ReceivedBatch()
            batch.reserve(records: items)
            var received = [0, 0, 0, 0, 0]
            for (i, key) in ["samples", "workouts", "sleep_segments", "activity_summaries", "deletions"].enumerated() {
                for item in root[key].map({ Array($0.elements) }) ?? [] {
                    switch mapper.map(key, item) {
                    case .success(let r): batch.append(r); received[i] += 1
                    case .failure(let q): batch.quarantined.append(q)
                    }
                }
            }
            let batchID = Crypto.derivedKey(["ingest", name, deviceID, "\(context.now.unixNanoseconds)", "\(request.body.count)",
                                             Crypto.lowercaseHex(Array(Crypto.sha256(request.body).prefix(8)))])
            var w = JSONWriter(capacity: 256)
            w.beginObject()
            w.key("batch_id"); w.string(batchID)
            w.key("received")
            w.beginObject()
            for (i, key) in ["samples", "workouts", "sleep_segments", "activity_summaries", "deletions"].enumerated() {
                w.key(key); w.int(received[i])
            }
            w.endObject()
            w.key("max_items"); w.int(maxItems)
            w.endObject()
            return .accept(batch, reply: HTTPResponse(status: 202, headers: [HTTPHeader("Content-Type", "application/json")],
                                                     body: w.bytes))
        } }
    }

    public static let defaultMaxItems = 50_000

    static let build: ReceiverRegistry.Builder = { name, c, node, path, context throws(ConfigProblems) in
        let auth = try c.auth.map { a throws(ConfigProblems) in try Authenticator(config: a, node: node, path: path + ".auth") }
            ?? Authenticator(kind: .none)
        return IngestReceiver(name: name, paths: [c.path ?? "/v1/ingest"], maxBodyBytes: Int(c.max_body?.bytes ?? Int64(ReceiverConfig.defaultMaxJSONBody)),
                              auth: auth, maxItems: c.max_items ?? defaultMaxItems, parsers: context.parsers)
    }
}

/// One item of an ingest chunk into a canonical record.
struct IngestMapper {
    let receiver: String
    let device: String
    let timeZone: String?
    /// The last `data_type` looked up and what the registry said of it (a chunk's samples come
    /// in runs of one type).
    private var lastType: (name: String, type: HealthType?)?

    init(receiver: String, device: String, timeZone: String?) {
        self.receiver = receiver
        self.device = device
        self.timeZone = timeZone
    }

    /// The fields each item kind maps; the rest are kept (`keepRest`).
    static let sampleFieldNames = ["source_uuid", "data_type", "ts", "end_ts", "value", "unit", "source_device", "source_bundle",
                                   "workout_source_uuid"]
    static let sampleFields = Set(sampleFieldNames)
    static let sampleKeys = JSONKeyTable(sampleFieldNames)
    static let workoutFields: Set<String> = ["source_uuid", "started_at", "ended_at", "activity_type", "total_energy_kcal",
                                             "total_distance_m"]

    enum Mapped {
        case success(CanonicalRecord)
        case failure(QuarantinedRecord)
    }

    /// A subtree as compact JSON text.
    static func raw(_ v: JSONRef) -> RawJSON { CanonicalCodec.raw(v) }

    func bad(_ reason: String, _ v: JSONRef) -> Mapped { .failure(QuarantinedRecord(reason: reason, raw: IngestMapper.raw(v))) }

    func time(_ v: JSONRef?) -> Timestamp?? {
        guard let v, !v.isNull else { return .some(nil) }
        guard let s = v.string, let (t, _) = Timestamp.parseRFC3339(s) else { return nil }
        return .some(t)
    }

    /// `time_zone` kept as the record's UTC offset at its start (DST included).
    func offset(at t: Timestamp?) -> Int? {
        guard let t, let tz = timeZone else { return nil }
        return TimeZones.offset(tz, at: t.seconds)
    }

    func keepRest(_ v: JSONRef, used: Set<String>, into r: inout CanonicalRecord, asKindFields: Bool) {
        for (k, value) in v.members where !used.contains(k.string) {
            if asKindFields { r.addKindField(k.string, IngestMapper.raw(value)) } else { r.extra.append(RecordField(k.string, IngestMapper.raw(value))) }
        }
        if let tz = timeZone { r.extra.append(RecordField("time_zone", .string(tz))) }
    }

    mutating func map(_ key: String, _ v: JSONRef) -> Mapped {
        if key == "deletions" {
            guard let uuid = v.string, !uuid.isEmpty else { return bad("a deletion is a source_uuid string", v) }
            // The chunk does not say what was deleted: the delete applies to every kind under the key.
            return .success(CanonicalRecord(op: .delete, kind: "any", device: device, receiver: receiver, uuid: uuid, type: "any"))
        }
        guard v.kind == .object else { return bad("an item of \(key) must be an object", v) }
        switch key {
        case "samples": return sample(v)
        case "workouts": return workout(v)
        case "sleep_segments": return sleep(v)
        default: return summary(v)
        }
    }

    mutating func sample(_ v: JSONRef) -> Mapped {
        // The item's members read once (a lookup by name per field scanned them all each time).
        var field = [JSONRef?](repeating: nil, count: IngestMapper.sampleFieldNames.count)
        var more = false
        for (k, value) in v.members {
            if let i = IngestMapper.sampleKeys.index(of: k) { field[i] = value } else { more = true }
        }
        guard let uuid = field[0]?.string, !uuid.isEmpty else { return bad("the sample has no source_uuid", v) }
        guard let dataType = field[1]?.string, !dataType.isEmpty else { return bad("the sample has no data_type", v) }
        guard let ts = time(field[2]) else { return bad("\"ts\" is not an RFC 3339 time", v) }
        guard let start = ts else { return bad("the sample has no ts", v) }
        let known: HealthType?
        if let last = lastType, last.name == dataType {
            known = last.type
        } else {
            known = HealthTypes.hk(dataType)
            lastType = (dataType, known)
        }
        let type = known?.name ?? dataType
        var r = CanonicalRecord(kind: known?.kind == .category ? RecordKind.category : RecordKind.quantity, device: device,
                                receiver: receiver, uuid: uuid, type: type, start: start, utcOffset: offset(at: start))
        guard let end = time(field[3]) else { return bad("\"end_ts\" is not an RFC 3339 time", v) }
        r.end = end
        if let value = field[4] {
            if let d = value.double {
                // Into the type's canonical unit as it is journaled (ReceivedBatch.append).
                r.value = .number(d)
                r.unit = field[5]?.string
            } else if let s = value.string {
                r.kind = RecordKind.category
                let code = known?.code(forValue: s)
                r.value = .string(code.flatMap { known?.valueName(forCode: $0) } ?? s)
                r.code = code
                r.unit = field[5]?.string   // kept as sent: nothing a sender gave is dropped
            } else {
                return bad("\"value\" must be a number or a name", v)
            }
        } else {
            return bad("the sample has no value", v)
        }
        if field[6] != nil || field[7] != nil {
            r.source = RecordSource(app: field[7]?.string, device: field[6]?.string)
        }
        // The link to its workout, resolved by whoever stores both (the workout may come later).
        if let w = field[8]?.string { r.extra.append(RecordField("workout_uuid", .string(w))) }
        if more {
            keepRest(v, used: IngestMapper.sampleFields, into: &r, asKindFields: false)
        } else if let tz = timeZone {
            r.extra.append(RecordField("time_zone", .string(tz)))
        }
        return .success(r)
    }

    func workout(_ v: JSONRef) -> Mapped {
        guard let uuid = v["source_uuid"]?.string, !uuid.isEmpty else { return bad("the workout has no source_uuid", v) }
        guard let s = time(v["started_at"]), let start = s else { return bad("the workout needs started_at", v) }
        guard let end = time(v["ended_at"]) else { return bad("\"ended_at\" is not an RFC 3339 time", v) }
        if let e = end, e < start { return bad("the workout ends before it starts", v) }
        let given = v["activity_type"]?.string ?? "other"
        var r = CanonicalRecord(kind: RecordKind.workout, device: device, receiver: receiver, uuid: uuid, type: "workout",
                                start: start, end: end, utcOffset: offset(at: start),
                                activity: HealthTypes.workout(named: given)?.name ?? given)
        if let e = end { r.durationS = Double(e.seconds - start.seconds) + Double(e.nanoseconds - start.nanoseconds) / 1e9 }
        r.energyKcal = v["total_energy_kcal"]?.double
        r.distanceM = v["total_distance_m"]?.double
        keepRest(v, used: IngestMapper.workoutFields, into: &r, asKindFields: true)
        return .success(r)
    }

    static let stages: [String: String] = [
        "inBed": "in_bed", "asleepUnspecified": "asleep_unspecified", "asleep": "asleep_unspecified", "awake": "awake",
        "asleepCore": "asleep_core", "asleepDeep": "asleep_deep", "asleepREM": "asleep_rem",
    ]

    func sleep(_ v: JSONRef) -> Mapped {
        guard let uuid = v["source_uuid"]?.string, !uuid.isEmpty else { return bad("the sleep segment has no source_uuid", v) }
        guard let s = time(v["started_at"]), let start = s, let e = time(v["ended_at"]), let end = e else {
            return bad("a sleep segment needs started_at and ended_at", v)
        }
        guard end >= start else { return bad("the sleep segment ends before it starts", v) }
        let stage = v["stage"]?.string ?? "asleepUnspecified"
        let value = IngestMapper.stages[stage] ?? stage
        var r = CanonicalRecord(kind: RecordKind.category, device: device, receiver: receiver, uuid: uuid, type: "sleep_analysis",
                                start: start, end: end, utcOffset: offset(at: start), value: .string(value))
        r.code = RecordKind.categoryCode(type: "sleep_analysis", name: value)
        keepRest(v, used: ["source_uuid", "started_at", "ended_at", "stage"], into: &r, asKindFields: false)
        return .success(r)
    }

    /// Activity summaries are keyed by day: a later copy of the day replaces the earlier one.
    func summary(_ v: JSONRef) -> Mapped {
        guard let day = v["day"]?.string, let (start, _) = Timestamp.parseRFC3339(day + "T00:00:00Z") else {
            return bad("an activity summary needs \"day\" as YYYY-MM-DD", v)
        }
        var r = CanonicalRecord(kind: "activity_summary", device: device, receiver: receiver, uuid: "activity_summary:\(day)",
                                type: "activity_summary", start: start)
        keepRest(v, used: [], into: &r, asKindFields: true)
        return .success(r)
    }
}
