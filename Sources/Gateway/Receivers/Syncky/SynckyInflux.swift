import FastJSON
import HealthgateCore
import HealthgateCrypto

/// Syncky's InfluxDB line protocol body (guide section 4): measurement = type, tags `unit`,
/// `source`, `device` (and `activity` for workouts), fields `value` / `value_name` / workout
/// fields, the sample's start as the timestamp (nanoseconds). Lines carry no uuid: each gets a
/// key derived from what identifies it in InfluxDB (measurement, tags, timestamp), so a point
/// sent again gets the same key.
enum SynckyInflux {
    /// v2's ns/us/ms/s, and v1's n/u/ms/s/m/h (InfluxDB 1.x takes minutes and hours too).
    static let nanosPer: [String: Int64] = ["ns": 1, "n": 1, "us": 1_000, "u": 1_000, "ms": 1_000_000, "s": 1_000_000_000,
                                            "m": 60_000_000_000, "h": 3_600_000_000_000]

    static func read(_ body: [UInt8], precision: String?, receiver: String, device: String) -> Reception {
        guard let scale = nanosPer[precision ?? "ns"] else {
            return .unreadable(status: 400, reason: "precision \"\(QuarantinedRecord.name(precision ?? ""))\" is not ns, us, ms, s, m or h")
        }
        var batch = ReceivedBatch()
        // A canonical record is about four times its line.
        batch.reserve(bytes: body.count * 4)
        var failures: [QuarantinedRecord] = []
        LineProtocol.forEachLine(body) { line in
            switch line {
            case .failure(let f):
                failures.append(QuarantinedRecord(reason: f.description, raw: rawLine(f.text)))
            case .success(let p):
                switch record(p, scale: scale, receiver: receiver, device: device) {
                case .success(let r): batch.append(r)
                case .failure(let q): batch.quarantined.append(q)
                }
            }
        }
        batch.quarantined.insert(contentsOf: failures, at: 0)
        return .accept(batch, reply: HTTPResponse(status: 204))
    }

    static func rawLine(_ text: String) -> RawJSON {
        var w = JSONWriter(capacity: text.utf8.count + 16)
        w.string(text)
        return RawJSON(encoded: w.bytes)
    }

    static func record(_ p: LineProtocol.Point, scale: Int64, receiver: String, device: String) -> SynckyNative.Mapped {
        func bad(_ reason: String) -> SynckyNative.Mapped {
            .failure(QuarantinedRecord(reason: "line \(p.line): \(reason)", raw: rawLine(p.text)))
        }
        guard let ts = p.timestamp else { return bad("the line has no timestamp (the sample's start)") }
        let (mult, overflow) = ts.multipliedReportingOverflow(by: scale)
        guard !overflow else { return bad("timestamp \(ts) is out of range") }
        let start = Timestamp(seconds: floorDiv(mult, 1_000_000_000), nanoseconds: Int32(mult - floorDiv(mult, 1_000_000_000) * 1_000_000_000))
        let sortedTags = p.tags.sorted { $0.key < $1.key }
        let key = Crypto.derivedKey(["influx", p.measurement] + sortedTags.flatMap { [$0.key, $0.value] } + ["\(mult)"])
        var r = CanonicalRecord(kind: RecordKind.kind(ofType: p.measurement), device: device, receiver: receiver,
                                uuid: key, type: p.measurement, start: start)
        let app = p.tag("source"), sourceDevice = p.tag("device")
        if app != nil || sourceDevice != nil { r.source = RecordSource(app: app, device: sourceDevice) }
        var used: Set<String> = ["source", "device"]
        var usedFields: Set<String> = []
        if p.measurement == "workout" {
            r.kind = RecordKind.workout
            r.activity = p.tag("activity")
            used.insert("activity")
            for (name, path) in [("duration_s", \CanonicalRecord.durationS), ("energy_kcal", \.energyKcal), ("distance_m", \.distanceM)] {
                guard let v = p.field(name) else { continue }
                guard let d = v.number else { return bad("\(name) must be a number") }
                r[keyPath: path] = d
                usedFields.insert(name)
            }
            if let d = r.durationS {
                r.end = Timestamp(seconds: start.seconds + Int64(d), nanoseconds: start.nanoseconds)
            }
        } else if let name = p.field("value_name") {
            guard case .string(let s) = name else { return bad("value_name must be a string") }
            r.kind = RecordKind.category
            r.value = .string(s)
            if let code = p.field("value")?.number { r.code = Int(code) }
            usedFields.formUnion(["value", "value_name"])
        } else {
            guard let v = p.field("value") else { return bad("the line has no value field") }
            guard let d = v.number else { return bad("value must be a number") }
            r.kind = RecordKind.quantity
            r.value = .number(d)
            r.unit = p.tag("unit")
            // Into the type's canonical unit, as every receiver does (160 lb → 72.57 kg).
            if let unit = r.unit, let known = HealthTypes.named(p.measurement), known.kind == .quantity,
               let target = known.unit, unit != target, let c = Units.convert(d, from: unit, to: target) {
                r.value = .number(c)
                r.unit = target
            }
            used.insert("unit")
            usedFields.insert("value")
        }
        for t in p.tags where !used.contains(t.key) {
            r.extra.append(RecordField("tag:\(t.key)", rawLine(t.value)))
        }
        for f in p.fields where !usedFields.contains(f.key) {
            let json: RawJSON
            switch f.value {
            case .string(let s): json = rawLine(s)
            case .bool(let b): json = .bool(b)
            case .int(let i): json = .integer(i)
            case .uint(let u): json = .unsigned(u)
            case .float(let d):
                var w = JSONWriter(capacity: 24)
                w.double(d)
                json = RawJSON(encoded: w.bytes)
            }
            r.extra.append(RecordField(f.key, json))
        }
        return .success(r)
    }

    static func floorDiv(_ a: Int64, _ b: Int64) -> Int64 {
        let q = a / b
        return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q
    }
}
