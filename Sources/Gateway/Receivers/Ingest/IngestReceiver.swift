import CanonicalJSON
import FastJSON
import HealthgateCore
import HealthgateCrypto
import Posix
import Synchronization
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
        return parsers.withParser { parser in
            parser.withBody(request.body) { doc in
                let root = doc.root
                guard root.kind == .object else { return .unreadable(status: 400, reason: "the body must be a JSON object") }
                guard let deviceID = root["device_id"]?.string, !deviceID.isEmpty else {
                    return .unreadable(status: 400, reason: "\"device_id\" is required")
                }
                // Route points count towards the chunk, as the spec says.
                var items = 0
                for key in IngestReceiver.sections {
                    if let v = root[key], !v.isNull, v.kind != .array {
                        return .unreadable(status: 400, reason: "\"\(key)\" must be an array")
                    }
                    items += root[key]?.count ?? 0
                }
                for w in root["workouts"].map({ Array($0.elements) }) ?? [] { items += w["route"]?.count ?? 0 }
                if items > maxItems {
                    return .answer(
                        problem(
                            413, "Chunk too large",
                            "The chunk has \(items) items (samples, workouts, sleep segments, activity summaries, "
                                + "route points and deletions); the limit is \(maxItems). Halve it and send again."))
                }
                var mapper = IngestMapper(receiver: name, device: deviceID, timeZone: root["time_zone"]?.string)
                var batch = ReceivedBatch()
                batch.reserve(records: items)
                var received = [0, 0, 0, 0, 0]
                for (i, key) in IngestReceiver.sections.enumerated() {
                    for item in root[key].map({ Array($0.elements) }) ?? [] {
                        if mapper.take(key, item, into: &batch) { received[i] += 1 }
                    }
                }
                // Unique without hashing the body (a hash of every body is CPU every request pays):
                // the time and a count of this process's chunks tell two chunks apart. The request log
                // keeps it, so the id a client logs finds the server's line (the spec's promise).
                let batchID = Crypto.derivedKey([
                    "ingest", name, deviceID, "\(context.now.unixNanoseconds)", "\(request.body.count)",
                    "\(IngestReceiver.chunks.add(1, ordering: .relaxed).newValue)"
                ])
                batch.requestID = batchID
                var w = JSONWriter(capacity: 256)
                w.beginObject()
                w.key("batch_id"); w.string(batchID)
                w.key("received")
                w.beginObject()
                for (i, key) in IngestReceiver.sections.enumerated() {
                    w.key(key); w.int(received[i])
                }
                w.endObject()
                w.key("max_items"); w.int(maxItems)
                w.endObject()
                return .accept(
                    batch,
                    reply: HTTPResponse(
                        status: 202, headers: [HTTPHeader("Content-Type", "application/json")],
                        body: w.bytes))
            }
        }
    }

    public static let defaultMaxItems = 50_000

    /// Chunks taken by this process, for their batch ids.
    static let chunks = Atomic<UInt64>(0)
    /// A chunk's arrays, in the order its answer counts them.
    static let sections = ["samples", "workouts", "sleep_segments", "activity_summaries", "deletions"]

    static let build: ReceiverRegistry.Builder = { name, c, node, path, context throws(ConfigProblems) in
        let auth =
            try c.auth.map { a throws(ConfigProblems) in try Authenticator(config: a, node: node, path: path + ".auth") }
            ?? Authenticator(kind: .none)
        return IngestReceiver(
            name: name, paths: [c.path ?? "/v1/ingest"], maxBodyBytes: Int(c.max_body?.bytes ?? Int64(ReceiverConfig.defaultMaxJSONBody)),
            auth: auth, maxItems: c.max_items ?? defaultMaxItems, parsers: context.parsers)
    }
}

/// One item of an ingest chunk into a canonical record.
struct IngestMapper {
    let receiver: String
    let device: String
    let timeZone: String?
    /// `time_zone`'s zone, read once per chunk (nil when absent or not in the tz database).
    private let zone: TimeZones.Zone?
    /// A chunk's samples repeat a few types, units and sources: their strings are made once
    /// (slots: data_type, unit, source_device, source_bundle).
    private var strings = JSONStringReuse(slots: 4)
    /// The last few `data_type`s looked up and what the registry said of them (its name for the
    /// type and whether it is a category: all a sample with a number needs).
    private var types = RecentAnswers<String, Known?>()

    init(receiver: String, device: String, timeZone: String?) {
        self.receiver = receiver
        self.device = device
        self.timeZone = timeZone
        zone = timeZone.flatMap { TimeZones.zone($0) }
    }

    /// The fields each item kind maps; the rest are kept (`keepRest`).
    static let sampleFieldNames = [
        "source_uuid", "data_type", "ts", "end_ts", "value", "unit", "source_device", "source_bundle",
        "workout_source_uuid"
    ]
    static let sampleFields = Set(sampleFieldNames)
    static let sampleKeys = JSONKeyTable(sampleFieldNames)
    static let workoutFields: Set<String> = [
        "source_uuid", "started_at", "ended_at", "activity_type", "total_energy_kcal",
        "total_distance_m"
    ]

    enum Mapped {
        case success(CanonicalRecord)
        case failure(QuarantinedRecord)
    }

    /// A subtree as compact JSON text.
    static func raw(_ v: JSONRef) -> RawJSON { CanonicalCodec.raw(v) }

    func bad(_ reason: String, _ v: JSONRef) -> Mapped { .failure(setAside(reason, v)) }

    func setAside(_ reason: String, _ v: JSONRef) -> QuarantinedRecord { QuarantinedRecord(reason: reason, raw: IngestMapper.raw(v)) }

    /// nil when the value is not an RFC 3339 time; `.some(nil)` when it is absent or null.
    func time(_ v: JSONRef?) -> Timestamp?? {
        guard let v, !v.isNull else { return .some(nil) }
        guard let parsed = v.withStringBytes({ Timestamp.parseRFC3339($0) }), let (t, _) = parsed else { return nil }
        return .some(t)
    }

    /// `time_zone` kept as the record's UTC offset at its start (DST included).
    func offset(at t: Timestamp?) -> Int? {
        guard let t, let zone else { return nil }
        return zone.offset(at: t.seconds)
    }

    func keepRest(_ v: JSONRef, used: Set<String>, into r: inout CanonicalRecord, asKindFields: Bool) {
        for (k, value) in v.members where !used.contains(k.string) {
            if asKindFields {
                r.addKindField(k.string, IngestMapper.raw(value))
            } else {
                r.extra.append(RecordField(k.string, IngestMapper.raw(value)))
            }
        }
        addZone(to: &r)
    }

    /// `time_zone`, the zone the phone named, as the record's own.
    func addZone(to r: inout CanonicalRecord) {
        r.timeZone = timeZone
    }

    struct Known {
        let name: String
        let isCategory: Bool
    }

    /// What the registry says of the type named `given` (HealthKit's identifier or its short
    /// forms), from the last eight names looked up before asking the registry.
    mutating func knownType(_ given: String) -> Known? {
        types.value(given) { HealthTypes.hk(given).map { Known(name: $0.name, isCategory: $0.kind == .category) } }
    }

    /// Adds the item's record to `batch` and returns true, or sets it aside in `batch` with the reason.
    mutating func take(_ key: String, _ v: JSONRef, into batch: inout ReceivedBatch) -> Bool {
        if key == "samples" && v.kind == .object {
            guard let q = sample(v, into: &batch) else { return true }
            batch.quarantined.append(q)
            return false
        }
        switch map(key, v) {
        case .success(let r): batch.append(r); return true
        case .failure(let q): batch.quarantined.append(q); return false
        }
    }

    mutating func map(_ key: String, _ v: JSONRef) -> Mapped {
        if key == "deletions" {
            guard let uuid = v.string, !uuid.isEmpty else { return bad("a deletion is a source_uuid string", v) }
            // The chunk does not say what was deleted: the delete applies to every kind under the key.
            return .success(CanonicalRecord(op: .delete, kind: "any", device: device, receiver: receiver, uuid: uuid, type: "any"))
        }
        guard v.kind == .object else { return bad("an item of \(key) must be an object", v) }
        switch key {
        case "workouts": return workout(v)
        case "sleep_segments": return sleep(v)
        default: return summary(v)
        }
    }

    /// Adds the sample's record to `batch`, or returns why it is set aside (no record is copied
    /// on the way: a chunk's samples are most of what healthgate is sent).
    mutating func sample(_ v: JSONRef, into batch: inout ReceivedBatch) -> QuarantinedRecord? {
        // The item's members read once (a lookup by name per field scanned them all each time).
        var field = InlineArray<9, JSONRef?>(repeating: nil) // sampleFieldNames, in order: no array a sample
        var more = false
        for (k, value) in v.members {
            if let i = IngestMapper.sampleKeys.index(of: k) { field[i] = value } else { more = true }
        }
        guard let uuid = field[0]?.string, !uuid.isEmpty else { return setAside("the sample has no source_uuid", v) }
        guard let dataType = field[1].flatMap({ strings.string($0, slot: 0) }), !dataType.isEmpty else {
            return setAside("the sample has no data_type", v)
        }
        guard let ts = time(field[2]) else { return setAside("\"ts\" is not an RFC 3339 time", v) }
        guard let start = ts else { return setAside("the sample has no ts", v) }
        let known = knownType(dataType)
        let type = known?.name ?? dataType
        var r = CanonicalRecord(
            kind: known?.isCategory == true ? RecordKind.category : RecordKind.quantity, device: device,
            receiver: receiver, uuid: uuid, type: type)
        r.start = start
        r.utcOffset = offset(at: start)
        guard let end = time(field[3]) else { return setAside("\"end_ts\" is not an RFC 3339 time", v) }
        if let end, end < start { return setAside("\"end_ts\" is before \"ts\"", v) }
        r.end = end
        if let value = field[4] {
            if let d = value.double {
                // Into the type's canonical unit as it is journaled (ReceivedBatch.append).
                r.value = .number(d)
                r.unit = field[5].flatMap { strings.string($0, slot: 1) }
            } else if let s = value.string {
                r.kind = RecordKind.category
                let category = known == nil ? nil : HealthTypes.hk(dataType)
                let code = category?.code(forValue: s)
                r.value = .string(code.flatMap { category?.valueName(forCode: $0) } ?? s)
                r.code = code
                r.unit = field[5].flatMap { strings.string($0, slot: 1) } // kept as sent: nothing a sender gave is dropped
            } else {
                return setAside("\"value\" must be a number or a name", v)
            }
        } else {
            return setAside("the sample has no value", v)
        }
        if field[6] != nil || field[7] != nil {
            r.source = RecordSource(
                app: field[7].flatMap { strings.string($0, slot: 3) },
                device: field[6].flatMap { strings.string($0, slot: 2) })
        }
        // The link to its workout, resolved by whoever stores both (the workout may come later).
        if let w = field[8]?.string { r.extra.append(RecordField("workout_uuid", .string(w))) }
        if more {
            keepRest(v, used: IngestMapper.sampleFields, into: &r, asKindFields: false)
        } else {
            addZone(to: &r)
        }
        batch.append(&r)
        return nil
    }

    func workout(_ v: JSONRef) -> Mapped {
        guard let uuid = v["source_uuid"]?.string, !uuid.isEmpty else { return bad("the workout has no source_uuid", v) }
        guard let s = time(v["started_at"]), let start = s else { return bad("the workout needs started_at", v) }
        guard let end = time(v["ended_at"]) else { return bad("\"ended_at\" is not an RFC 3339 time", v) }
        if let e = end, e < start { return bad("the workout ends before it starts", v) }
        let given = v["activity_type"]?.string ?? "other"
        var r = CanonicalRecord(
            kind: RecordKind.workout, device: device, receiver: receiver, uuid: uuid, type: "workout",
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
        "asleepCore": "asleep_core", "asleepDeep": "asleep_deep", "asleepREM": "asleep_rem"
    ]

    func sleep(_ v: JSONRef) -> Mapped {
        guard let uuid = v["source_uuid"]?.string, !uuid.isEmpty else { return bad("the sleep segment has no source_uuid", v) }
        guard let s = time(v["started_at"]), let start = s, let e = time(v["ended_at"]), let end = e else {
            return bad("a sleep segment needs started_at and ended_at", v)
        }
        guard end >= start else { return bad("the sleep segment ends before it starts", v) }
        let stage = v["stage"]?.string ?? "asleepUnspecified"
        let value = IngestMapper.stages[stage] ?? stage
        var r = CanonicalRecord(
            kind: RecordKind.category, device: device, receiver: receiver, uuid: uuid, type: "sleep_analysis",
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
        var r = CanonicalRecord(
            kind: "activity_summary", device: device, receiver: receiver, uuid: "activity_summary:\(day)",
            type: "activity_summary", start: start)
        keepRest(v, used: [], into: &r, asKindFields: true)
        return .success(r)
    }
}
