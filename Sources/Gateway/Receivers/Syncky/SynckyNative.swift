import CanonicalJSON
import FastJSON
import HealthgateCore

/// Syncky's native JSON body (guide section 4) into canonical records.
enum SynckyNative {
    // Fields that map onto the canonical record itself are read by name; everything else of a
    // sample is kept under `fields` (named kinds) or `extra` (quantities and categories).

    static func read(_ body: [UInt8], parser: JSONParser, receiver: String, device fallbackDevice: String?) -> Reception {
        return parser.withBody(body) { doc in
            let root = doc.root
            guard root.kind == .object else {
                return .unreadable(status: 400, reason: "the body must be a JSON object (a Syncky sync message)")
            }
            guard root["type"]?.string == "sync" else {
                return .unreadable(status: 400, reason: "\"type\" must be \"sync\" in a native Syncky body")
            }
            guard let v = root["v"]?.int64, v == 1 else {
                return .unreadable(status: 400, reason: "\"v\" must be 1: this is not a version of the native format healthgate reads")
            }
            let device = root["device"]?.string ?? fallbackDevice ?? receiver
            if root["delivery"]?["test"]?.bool == true {
                // Check connection: verified above, stores nothing.
                return .answer(HTTPResponse(status: 200))
            }
            var batch = ReceivedBatch()
            if let samples = root["samples"], !samples.isNull {
                guard samples.kind == .array else {
                    return .unreadable(status: 400, reason: "\"samples\" must be an array")
                }
                batch.reserve(records: samples.count)
                var reuse = SampleCache()
                for s in samples.elements {
                    if let q = sample(s, receiver: receiver, device: device, reuse: &reuse, into: &batch) {
                        batch.quarantined.append(q)
                    }
                }
            }
            if let deleted = root["deleted"], !deleted.isNull {
                guard deleted.kind == .array else {
                    return .unreadable(status: 400, reason: "\"deleted\" must be an array")
                }
                for d in deleted.elements {
                    switch deletion(d, receiver: receiver, device: device) {
                    case .success(let r): batch.append(r)
                    case .failure(let q): batch.quarantined.append(q)
                    }
                }
            }
            return .accept(batch, reply: HTTPResponse(status: 200))
        }
    }

    /// One sample's outcome: a record, or the reason it is set aside.
    enum Mapped {
        case success(CanonicalRecord)
        case failure(QuarantinedRecord)
    }

    enum TimeField {
        /// The instant and the offset the text gave.
        case success((Timestamp, Int?)?)
        case failure(String)
    }

    static func setAside(_ reason: String, _ s: JSONRef) -> QuarantinedRecord {
        QuarantinedRecord(reason: reason, raw: raw(s))
    }

    static func bad(_ reason: String, _ s: JSONRef) -> Mapped {
        .failure(QuarantinedRecord(reason: reason, raw: raw(s)))
    }

    /// A subtree as compact JSON text.
    static func raw(_ v: JSONRef) -> RawJSON { CanonicalCodec.raw(v) }

    static func time(_ v: JSONRef?, recent: inout Timestamp.RecentDay) -> TimeField {
        guard let v, !v.isNull else { return .success(nil) }
        guard
            let parsed = v.withStringBytes({ b in
                Timestamp.parseRFC3339(b, recent: &recent)
            })
        else {
            return .failure(v.kind == .string ? "is not an RFC 3339 time" : "must be an RFC 3339 time string")
        }
        guard let p = parsed else { return .failure("is not an RFC 3339 time") }
        return .success(p)
    }

    /// The sample members read by name, in the order `sample` switches on them.
    static let sampleKeys = JSONKeyTable([
        "uuid", "type", "value", "unit", "start", "end", "source", "metadata", "part", "parts",
        "activity", "duration_s", "energy_kcal", "distance_m"
    ])

    /// What one body's samples share: repeated strings and the kind of the last types seen.
    struct SampleCache {
        /// Slots: 0 the source's app, 1 its device, 2 the type, 3 the unit.
        var strings = JSONStringReuse(slots: 4)
        private var kinds = RecentAnswers<String, (named: Bool, kind: HealthTypeKind?)>()
        /// The date of the last time read.
        var day = Timestamp.RecentDay()
        /// Whether `type` names a kind of record (`RecordKind.namedKinds`: workouts, ECGs, …) and
        /// the registry's kind of it, from the last eight types seen before asking again.
        mutating func kind(of type: String) -> (named: Bool, kind: HealthTypeKind?) {
            kinds.value(type) { (RecordKind.namedKinds.contains(type), HealthTypes.kind(of: type)) }
        }
    }

    /// A sample read and checked: what its record is made from.
    /// (Not copied: each of its refs is a retain.)
    struct Checked: ~Copyable {
        var uuid: JSONRef
        var type: String
        /// The record's kind: the type for named kinds, else quantity or category.
        var kind: String
        var named: Bool
        var start: Timestamp?, utcOffset: Int?, end: Timestamp?
        var value: JSONRef?
        var unit: String?
        var source, metadata: JSONRef?
        var part, parts: Int?
        var activity, duration, energy, distance: JSONRef?
        /// Members that have no place of their own (`fields` of named kinds, else `extra`).
        var others: [(key: JSONKey, value: JSONRef)]
    }

    /// Adds the sample's record to `batch`, or returns why it is set aside.
    static func sample(
        _ s: JSONRef, receiver: String, device: String, reuse: inout SampleCache,
        into batch: inout ReceivedBatch
    ) -> QuarantinedRecord? {
        var why = ""
        guard let c = check(s, reuse: &reuse, refusal: &why) else { return setAside(why, s) }
        return record(c, s, receiver: receiver, device: device, reuse: &reuse, into: &batch)
    }

    /// A sample's members, each where it belongs, checked; or nil and why the sample is set aside.
    static func check(_ s: JSONRef, reuse: inout SampleCache, refusal: inout String) -> Checked? {
        func fail(_ why: String) -> Checked? {
            refusal = why
            return nil
        }
        guard s.kind == .object else { return fail("a sample must be a JSON object") }
        // One pass over the members: the known ones by name, the rest kept for `fields`/`extra`.
        var uuidRef, typeRef, valueRef, unitRef, startRef, endRef, sourceRef, metadataRef: JSONRef?
        var partRef, partsRef, activityRef, durationRef, energyRef, distanceRef: JSONRef?
        var others: [(key: JSONKey, value: JSONRef)] = []
        for (k, v) in s.members {
            switch sampleKeys.index(of: k) {
            case 0: uuidRef = v
            case 1: typeRef = v
            case 2: valueRef = v
            case 3: unitRef = v
            case 4: startRef = v
            case 5: endRef = v
            case 6: sourceRef = v
            case 7: metadataRef = v
            case 8: partRef = v
            case 9: partsRef = v
            case 10: activityRef = v
            case 11: durationRef = v
            case 12: energyRef = v
            case 13: distanceRef = v
            default: others.append((k, v))
            }
        }
        guard let uuidRef, uuidRef.withStringBytes({ !$0.isEmpty }) == true else {
            return fail("the sample has no uuid")
        }
        // The type and unit shared with the samples before (a body holds few of each): no string
        // made per sample, and the registry's answers for them found by a pointer's comparison.
        guard let typeRef, let type = reuse.strings.string(typeRef, slot: 2), !type.isEmpty else {
            return fail("the sample has no type")
        }
        let (named, known) = reuse.kind(of: type)
        let kind: String
        if named {
            kind = type
        } else if valueRef?.kind == .string {
            kind = RecordKind.category
        } else if let vk = valueRef?.kind, vk == .int || vk == .uint || vk == .double {
            kind = RecordKind.quantity
        } else {
            return fail("the sample has no value (a number, or a category's name)")
        }
        // A known type says what its value is: a number for a quantity, a name for a category.
        // (A body holds a few types: their answers are kept for the next samples.)
        if let known {
            if known == .quantity && kind == RecordKind.category {
                return fail("\(type) takes a number in \(HealthTypes.named(type)?.unit ?? "its unit"), not a name")
            }
            if known == .category && kind == RecordKind.quantity {
                return fail("\(type) takes the name of one of its values, not a number")
            }
        }
        var c = Checked(
            uuid: uuidRef, type: type, kind: kind, named: named, value: valueRef, source: sourceRef,
            activity: activityRef, duration: durationRef, energy: energyRef, distance: distanceRef,
            others: others)
        switch time(startRef, recent: &reuse.day) {
        case .failure(let why): return fail("\"start\" \(why)")
        case .success(let t): c.start = t?.0; c.utcOffset = t?.1
        }
        switch time(endRef, recent: &reuse.day) {
        case .failure(let why): return fail("\"end\" \(why)")
        case .success(let t): c.end = t?.0
        }
        let timed = kind == RecordKind.quantity || kind == RecordKind.category || kind == RecordKind.workout
        if timed && c.start == nil { return fail("the sample has no \"start\" time") }
        if let a = c.start, let b = c.end, b < a { return fail("\"end\" is before \"start\"") }
        if let u = unitRef, !u.isNull {
            guard let unit = reuse.strings.string(u, slot: 3) else { return fail("\"unit\" must be a string") }
            c.unit = unit
        }
        if let m = metadataRef, !m.isNull { c.metadata = m }
        if let p = partRef, !p.isNull {
            guard let n = p.int64, n >= 0 else { return fail("\"part\" must be a whole number from 0") }
            c.part = Int(n)
        }
        if let p = partsRef, !p.isNull {
            guard let n = p.int64, n >= 1 else { return fail("\"parts\" must be a whole number from 1") }
            c.parts = Int(n)
        }
        if RecordKind.isPartedKind(kind) && (c.part == nil || c.parts == nil) {
            return fail("a \(kind) needs \"part\" and \"parts\"")
        }
        return c
    }

    /// The checked sample as a record, added to `batch`; or why it is set aside.
    static func record(
        _ c: borrowing Checked, _ s: JSONRef, receiver: String, device: String, reuse: inout SampleCache,
        into batch: inout ReceivedBatch
    ) -> QuarantinedRecord? {
        let kind = c.kind, type = c.type, named = c.named
        var r = CanonicalRecord(kind: kind, device: device, receiver: receiver, uuid: c.uuid.string ?? "", type: type)
        r.start = c.start
        r.utcOffset = c.utcOffset
        r.end = c.end
        if let v = c.value, !v.isNull {
            if let str = v.string {
                r.value = .string(str)
                if kind == RecordKind.category { r.code = RecordKind.categoryCode(type: type, name: str) }
            } else if let d = v.double {
                r.value = .number(d)
            } else if named {
                // A value that is neither a number nor a string (an object, say) is kept as it came.
                r.extra.append(RecordField("value", raw(v)))
            }
        }
        r.unit = c.unit
        if let src = c.source, !src.isNull {
            if src.kind == .object {
                var app: String?, dev: String?
                var more = false
                for (k, v) in src.members {
                    switch k {
                    case "app": app = reuse.strings.string(v, slot: 0)
                    case "device": dev = reuse.strings.string(v, slot: 1)
                    default: more = true
                    }
                }
                r.source = RecordSource(app: app, device: dev)
                if more { r.extra.append(RecordField("source", raw(src))) }
            } else {
                r.extra.append(RecordField("source", raw(src)))
            }
        }
        if let m = c.metadata { r.metadata = raw(m) }
        r.part = c.part
        r.parts = c.parts
        // Workout fields belong to workouts; on any other kind they are kept as they came.
        if kind == RecordKind.workout {
            r.activity = c.activity?.string
            guard let duration = optionalNumber(c.duration) else { return setAside("\"duration_s\" must be a number", s) }
            guard let energy = optionalNumber(c.energy) else { return setAside("\"energy_kcal\" must be a number", s) }
            guard let distance = optionalNumber(c.distance) else { return setAside("\"distance_m\" must be a number", s) }
            r.durationS = duration
            r.energyKcal = energy
            r.distanceM = distance
        } else if c.activity != nil || c.duration != nil || c.energy != nil || c.distance != nil {
            for (key, ref) in [
                ("activity", c.activity), ("duration_s", c.duration), ("energy_kcal", c.energy),
                ("distance_m", c.distance)
            ] {
                guard let v = ref else { continue }
                r.extra.append(RecordField(key, raw(v)))
            }
        }
        for (k, v) in c.others {
            if named { r.addKindField(k.string, raw(v)) } else { r.extra.append(RecordField(k.string, raw(v))) }
        }
        if kind == RecordKind.characteristic, case .string(let value)? = r.value,
            let field = r.fields.first(where: { $0.name == "name" }),
            let c = HealthTypes.characteristic(named: String(decoding: field.value.bytes.dropFirst().dropLast(), as: UTF8.self))
        {
            r.code = c.code(forValue: value)
        }
        batch.append(&r)
        return nil
    }

    /// `.some(nil)` when absent or null, `.some(d)` for a number, nil when it is something else.
    static func optionalNumber(_ ref: JSONRef?) -> Double?? {
        guard let v = ref, !v.isNull else { return .some(nil) }
        guard let d = v.double else { return nil }
        return .some(d)
    }

    static func deletion(_ d: JSONRef, receiver: String, device: String) -> Mapped {
        guard d.kind == .object else { return bad("a deletion must be a JSON object", d) }
        guard let uuid = d["uuid"]?.string, !uuid.isEmpty else { return bad("the deletion has no uuid", d) }
        guard let type = d["type"]?.string, !type.isEmpty else { return bad("the deletion has no type", d) }
        var r = CanonicalRecord(
            op: .delete, kind: RecordKind.kind(ofType: type), device: device,
            receiver: receiver, uuid: uuid, type: type)
        for (k, v) in d.members where !(k == "uuid" || k == "type") {
            r.extra.append(RecordField(k.string, raw(v)))
        }
        return .success(r)
    }
}
