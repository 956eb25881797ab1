import CanonicalJSON
import FastJSON
import HealthgateCore

/// Syncky's native JSON body (guide section 4) into canonical records.
enum SynckyNative {
    // Fields that map onto the canonical record itself are read by name; everything else of a
    // sample is kept under `fields` (named kinds) or `extra` (quantities and categories).

    static func read(_ body: [UInt8], parser: JSONParser, receiver: String, device fallbackDevice: String?,
                     keep: Int = 0) -> Reception {
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
            var batch = ReceivedBatch(keepingUpTo: keep)
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

    static func time(_ v: JSONRef?) -> TimeField {
        guard let v, !v.isNull else { return .success(nil) }
        guard let parsed = v.withStringBytes({ Timestamp.parseRFC3339($0) }) else {
            return .failure(v.kind == .string ? "is not an RFC 3339 time" : "must be an RFC 3339 time string")
        }
        guard let p = parsed else { return .failure("is not an RFC 3339 time") }
        return .success(p)
    }

    /// The sample members read by name, in the order `sample` switches on them.
    static let sampleKeys = JSONKeyTable([
        "uuid", "type", "value", "unit", "start", "end", "source", "metadata", "part", "parts",
        "activity", "duration_s", "energy_kcal", "distance_m",
    ])

    /// Adds the sample's record to `batch`, or returns why it is set aside.
    /// What one body's samples share: repeated strings, and the kind of the last type seen.
    struct SampleCache {
        /// Slots: 0 the source's app, 1 its device, 2 the type, 3 the unit.
        var strings = JSONStringReuse(slots: 4)
        private var kinds = RecentAnswers<String, (named: Bool, kind: HealthTypeKind?)>()

        /// Whether `type` names a kind of record (`RecordKind.namedKinds`: workouts, ECGs, …) and
        /// the registry's kind of it, from the last eight types seen before asking again.
        mutating func kind(of type: String) -> (named: Bool, kind: HealthTypeKind?) {
            kinds.value(type) { (RecordKind.namedKinds.contains(type), HealthTypes.kind(of: type)) }
        }
    }

    static func sample(_ s: JSONRef, receiver: String, device: String, reuse: inout SampleCache,
                       into batch: inout ReceivedBatch) -> QuarantinedRecord? {
        guard s.kind == .object else { return setAside("a sample must be a JSON object", s) }
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
        guard let uuid = uuidRef?.string, !uuid.isEmpty else { return setAside("the sample has no uuid", s) }
        // The type and unit shared with the samples before (a body holds few of each): no string
        // made per sample, and the registry's answers for them found by a pointer's comparison.
        guard let typeRef, let type = reuse.strings.string(typeRef, slot: 2), !type.isEmpty else {
            return setAside("the sample has no type", s)
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
            return setAside("the sample has no value (a number, or a category's name)", s)
        }
        // A known type says what its value is: a number for a quantity, a name for a category.
        // (A body holds a few types: their answers are kept for the next samples.)
        if let known {
            if known == .quantity && kind == RecordKind.category {
                return setAside("\(type) takes a number in \(HealthTypes.named(type)?.unit ?? "its unit"), not a name", s)
            }
            if known == .category && kind == RecordKind.quantity {
                return setAside("\(type) takes the name of one of its values, not a number", s)
            }
        }
        var r = CanonicalRecord(kind: kind, device: device, receiver: receiver, uuid: uuid, type: type)
        switch time(startRef) {
        case .failure(let why): return setAside("\"start\" \(why)", s)
        case .success(let t): r.start = t?.0; r.utcOffset = t?.1
        }
        switch time(endRef) {
        case .failure(let why): return setAside("\"end\" \(why)", s)
        case .success(let t): r.end = t?.0
        }
        let timed = kind == RecordKind.quantity || kind == RecordKind.category || kind == RecordKind.workout
        if timed && r.start == nil { return setAside("the sample has no \"start\" time", s) }
        if let a = r.start, let b = r.end, b < a { return setAside("\"end\" is before \"start\"", s) }
        if let v = valueRef, !v.isNull {
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
        if let u = unitRef, !u.isNull {
            guard let unit = reuse.strings.string(u, slot: 3) else { return setAside("\"unit\" must be a string", s) }
            r.unit = unit
        }
        if let src = sourceRef, !src.isNull {
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
        if let m = metadataRef, !m.isNull { r.metadata = raw(m) }
        if let p = partRef, !p.isNull {
            guard let n = p.int64, n >= 0 else { return setAside("\"part\" must be a whole number from 0", s) }
            r.part = Int(n)
        }
        if let p = partsRef, !p.isNull {
            guard let n = p.int64, n >= 1 else { return setAside("\"parts\" must be a whole number from 1", s) }
            r.parts = Int(n)
        }
        if RecordKind.isPartedKind(kind) && (r.part == nil || r.parts == nil) {
            return setAside("a \(kind) needs \"part\" and \"parts\"", s)
        }
        // Workout fields belong to workouts; on any other kind they are kept as they came.
        if kind == RecordKind.workout {
            r.activity = activityRef?.string
            guard let duration = optionalNumber(durationRef) else { return setAside("\"duration_s\" must be a number", s) }
            guard let energy = optionalNumber(energyRef) else { return setAside("\"energy_kcal\" must be a number", s) }
            guard let distance = optionalNumber(distanceRef) else { return setAside("\"distance_m\" must be a number", s) }
            r.durationS = duration
            r.energyKcal = energy
            r.distanceM = distance
        } else if activityRef != nil || durationRef != nil || energyRef != nil || distanceRef != nil {
            for (key, ref) in [("activity", activityRef), ("duration_s", durationRef), ("energy_kcal", energyRef),
                               ("distance_m", distanceRef)] {
                guard let v = ref else { continue }
                r.extra.append(RecordField(key, raw(v)))
            }
        }
        for (k, v) in others {
            if named { r.addKindField(k.string, raw(v)) } else { r.extra.append(RecordField(k.string, raw(v))) }
        }
        if kind == RecordKind.characteristic, case .string(let value)? = r.value,
           let field = r.fields.first(where: { $0.name == "name" }),
           let c = HealthTypes.characteristic(named: String(decoding: field.value.bytes.dropFirst().dropLast(), as: UTF8.self)) {
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
        var r = CanonicalRecord(op: .delete, kind: RecordKind.kind(ofType: type), device: device,
                                receiver: receiver, uuid: uuid, type: type)
        for (k, v) in d.members where !(k == "uuid" || k == "type") {
            r.extra.append(RecordField(k.string, raw(v)))
        }
        return .success(r)
    }
}
