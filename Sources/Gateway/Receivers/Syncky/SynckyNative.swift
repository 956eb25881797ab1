import FastJSON
import HealthgateCore

/// Syncky's native JSON body (guide section 4) into canonical records.
enum SynckyNative {
    /// Fields that map onto the canonical record itself; everything else of a sample is kept
    /// under `fields` (named kinds) or `extra` (quantities and categories).
    static let common: Set<String> = [
        "uuid", "type", "value", "unit", "start", "end", "source", "metadata", "part", "parts",
    ]
    static let workoutFields: Set<String> = ["activity", "duration_s", "energy_kcal", "distance_m"]

    static func read(_ body: [UInt8], parser: JSONParser, receiver: String, device fallbackDevice: String?) -> Reception {
        let doc: JSONDocument
        do {
            doc = try body.withUnsafeBytes { (b: UnsafeRawBufferPointer) throws(JSONError) in try parser.parse(b) }
        } catch {
            return .unreadable(status: 400, reason: "the body is not valid JSON: \(error)")
        }
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
            batch.records.reserveCapacity(samples.count)
            for s in samples.elements {
                switch sample(s, receiver: receiver, device: device) {
                case .success(let r): batch.records.append(r)
                case .failure(let q): batch.quarantined.append(q)
                }
            }
        }
        if let deleted = root["deleted"], !deleted.isNull {
            guard deleted.kind == .array else {
                return .unreadable(status: 400, reason: "\"deleted\" must be an array")
            }
            for d in deleted.elements {
                switch deletion(d, receiver: receiver, device: device) {
                case .success(let r): batch.records.append(r)
                case .failure(let q): batch.quarantined.append(q)
                }
            }
        }
        return .accept(batch, reply: HTTPResponse(status: 200))
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

    static func bad(_ reason: String, _ s: JSONRef) -> Mapped {
        .failure(QuarantinedRecord(reason: reason, raw: raw(s)))
    }

    static func raw(_ v: JSONRef) -> RawJSON {
        var w = JSONWriter(capacity: 128)
        v.write(to: &w)
        return RawJSON(bytes: w.bytes)
    }

    static func time(_ v: JSONRef?) -> TimeField {
        guard let v, !v.isNull else { return .success(nil) }
        guard let parsed = v.withStringBytes({ Timestamp.parseRFC3339($0) }) else {
            return .failure(v.kind == .string ? "is not an RFC 3339 time" : "must be an RFC 3339 time string")
        }
        guard let p = parsed else { return .failure("is not an RFC 3339 time") }
        return .success(p)
    }

    static func sample(_ s: JSONRef, receiver: String, device: String) -> Mapped {
        guard s.kind == .object else { return bad("a sample must be a JSON object", s) }
        guard let uuid = s["uuid"]?.string, !uuid.isEmpty else { return bad("the sample has no uuid", s) }
        guard let type = s["type"]?.string, !type.isEmpty else { return bad("the sample has no type", s) }
        let valueRef = s["value"]
        let kind: String
        if RecordKind.namedKinds.contains(type) {
            kind = type
        } else if valueRef?.kind == .string {
            kind = RecordKind.category
        } else if let vk = valueRef?.kind, vk == .int || vk == .uint || vk == .double {
            kind = RecordKind.quantity
        } else {
            return bad("the sample has no value (a number, or a category's name)", s)
        }
        var r = CanonicalRecord(kind: kind, device: device, receiver: receiver, uuid: uuid, type: type)
        switch time(s["start"]) {
        case .failure(let why): return bad("\"start\" \(why)", s)
        case .success(let t): r.start = t?.0; r.utcOffset = t?.1
        }
        switch time(s["end"]) {
        case .failure(let why): return bad("\"end\" \(why)", s)
        case .success(let t): r.end = t?.0
        }
        let timed = kind == RecordKind.quantity || kind == RecordKind.category || kind == RecordKind.workout
        if timed && r.start == nil { return bad("the sample has no \"start\" time", s) }
        if let a = r.start, let b = r.end, b < a { return bad("\"end\" is before \"start\"", s) }
        if let v = valueRef, !v.isNull {
            if let str = v.string {
                r.value = .string(str)
                if kind == RecordKind.category { r.code = RecordKind.categoryCode(type: type, name: str) }
            } else if let d = v.double {
                r.value = .number(d)
            } else if RecordKind.namedKinds.contains(type) {
                r.fields.append(RecordField("value", raw(v)))
            }
        }
        if let u = s["unit"], !u.isNull {
            guard let unit = u.string else { return bad("\"unit\" must be a string", s) }
            r.unit = unit
        }
        if let src = s["source"], src.kind == .object {
            r.source = RecordSource(app: src["app"]?.string, device: src["device"]?.string)
            if src.members.contains(where: { !($0.key == "app" || $0.key == "device") }) {
                r.extra.append(RecordField("source", raw(src)))
            }
        } else if let src = s["source"], !src.isNull {
            r.extra.append(RecordField("source", raw(src)))
        }
        if let m = s["metadata"], !m.isNull { r.metadata = raw(m) }
        if let p = s["part"], !p.isNull {
            guard let n = p.int64, n >= 0 else { return bad("\"part\" must be a whole number from 0", s) }
            r.part = Int(n)
        }
        if let p = s["parts"], !p.isNull {
            guard let n = p.int64, n >= 1 else { return bad("\"parts\" must be a whole number from 1", s) }
            r.parts = Int(n)
        }
        if RecordKind.partedKinds.contains(kind) && (r.part == nil || r.parts == nil) {
            return bad("a \(kind) needs \"part\" and \"parts\"", s)
        }
        if kind == RecordKind.workout {
            r.activity = s["activity"]?.string
            for (key, field) in [("duration_s", \CanonicalRecord.durationS), ("energy_kcal", \.energyKcal),
                                 ("distance_m", \.distanceM)] {
                guard let v = s[key], !v.isNull else { continue }
                guard let d = v.double else { return bad("\"\(key)\" must be a number", s) }
                r[keyPath: field] = d
            }
        }
        let named = RecordKind.namedKinds.contains(kind)
        for (k, v) in s.members {
            let key = k.string
            if common.contains(key) || (kind == RecordKind.workout && workoutFields.contains(key)) { continue }
            if named { r.fields.append(RecordField(key, raw(v))) } else { r.extra.append(RecordField(key, raw(v))) }
        }
        return .success(r)
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
