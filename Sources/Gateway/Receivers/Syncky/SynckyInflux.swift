import FastJSON
import HealthgateCore
import HealthgateCrypto
import CanonicalJSON

/// Syncky's InfluxDB line protocol body (guide section 4): measurement = type, tags `unit`,
/// `source`, `device` (and `activity` for workouts), fields `value` / `value_name` / workout
/// fields, the sample's start as the timestamp (nanoseconds). Lines carry no uuid: each gets a
/// key derived from what identifies it in InfluxDB (measurement, tags, timestamp), so a point
/// sent again gets the same key.
enum SynckyInflux {
    /// v2's ns/us/ms/s, and v1's n/u/ms/s/m/h (InfluxDB 1.x takes minutes and hours too).
    static let nanosPer: [String: Int64] = [
        "ns": 1, "n": 1, "us": 1_000, "u": 1_000, "ms": 1_000_000, "s": 1_000_000_000,
        "m": 60_000_000_000, "h": 3_600_000_000_000
    ]

    /// How the answer is shaped: Syncky's (204, bad lines only quarantined) or InfluxDB's own
    /// (204 when every line is stored, else 400 `partial write` naming the refused lines).
    enum Answers { case syncky, influxV1, influxV2 }

    static func read(
        _ body: [UInt8], precision: String?, receiver: String, device: String, now: Timestamp,
        answers: Answers = .syncky
    ) -> Reception {
        guard let scale = nanosPer[precision ?? "ns"] else {
            return .unreadable(status: 400, reason: "precision \"\(QuarantinedRecord.name(precision ?? ""))\" is not ns, us, ms, s, m or h")
        }
        var batch = ReceivedBatch()
        // A canonical record is about four times its line.
        batch.reserve(bytes: body.count * 4)
        var failures: [QuarantinedRecord] = []
        var refused: [(text: String, reason: String)] = []
        LineProtocol.forEachLine(body) { line in
            switch line {
            case .failure(let f):
                failures.append(QuarantinedRecord(reason: f.description, raw: RawJSON.string(f.text)))
                refused.append((f.text, f.message))
            case .success(let p):
                switch record(p, scale: scale, receiver: receiver, device: device, now: now) {
                case .success(let r):
                    // A line InfluxDB keeps is kept, even one without a field of ours: its type as
                    // it came, its fields under `extra`, counted as a type we could not map.
                    batch.append(r, unmapped: r.value == nil && r.kind != RecordKind.workout)
                case .failure(let q):
                    batch.quarantined.append(q)
                    refused.append((p.text, String(q.reason.drop { $0 != ":" }.dropFirst(2))))
                }
            }
        }
        batch.quarantined.insert(contentsOf: failures, at: 0)
        return .accept(batch, reply: answer(refused, answers))
    }

    /// InfluxDB's answer to a write: 204, or 400 naming each refused line (the good lines are stored).
    static func answer(_ refused: [(text: String, reason: String)], _ answers: Answers) -> HTTPResponse {
        guard answers != .syncky, !refused.isEmpty else { return HTTPResponse(status: 204) }
        var lines = refused.prefix(10).map { "unable to parse '\($0.text.prefix(200))': \($0.reason)" }
        if refused.count > 10 { lines.append("and \(refused.count - 10) more") }
        let message = "partial write: " + lines.joined(separator: "\n") + " dropped=0"
        var w = JSONWriter(capacity: 256)
        w.beginObject()
        if answers == .influxV2 {
            w.key("code"); w.string("invalid")
            w.key("message"); w.string(message)
        } else {
            w.key("error"); w.string(message)
        }
        w.endObject()
        return HTTPResponse(status: 400, headers: [HTTPHeader("Content-Type", "application/json")], body: w.bytes)
    }

    static func record(
        _ p: LineProtocol.Point, scale: Int64, receiver: String, device: String,
        now: Timestamp
    ) -> SynckyNative.Mapped {
        func bad(_ reason: String) -> SynckyNative.Mapped {
            .failure(QuarantinedRecord(reason: "line \(p.line): \(reason)", raw: RawJSON.string(p.text)))
        }
        // No timestamp: InfluxDB stamps the point with its own clock; so do we.
        let (mult, overflow) = p.timestamp.map { $0.multipliedReportingOverflow(by: scale) } ?? (now.unixNanoseconds, false)
        guard !overflow else { return bad("the timestamp is out of range for its precision") }
        let start = Timestamp(
            seconds: floorDiv(mult, 1_000_000_000), nanoseconds: Int32(mult - floorDiv(mult, 1_000_000_000) * 1_000_000_000))
        let sortedTags = p.tags.sorted { $0.key < $1.key }
        // A point is its series and time; InfluxDB keeps the fields of lines that share them as one
        // point. A line with fields of its own (not Syncky's value, value_name or workout figures)
        // is keyed by its field names too, so that `cpu value=1` and `cpu load=10` at one time
        // are two records and neither replaces the other.
        let own = p.fields.contains { !SynckyInflux.synckyFields.contains($0.key) } ? ["fields"] + p.fields.map(\.key).sorted() : []
        let key = Crypto.derivedKey(["influx", p.measurement] + sortedTags.flatMap { [$0.key, $0.value] } + ["\(mult)"] + own)
        // The measurement is a type: healthgate's name, HealthKit's identifier
        // (`HKQuantityTypeIdentifierHeartRate`, as export.xml scripts write it) or Health Auto
        // Export's, through the one registry; one it does not know stays as it came.
        let known = HealthTypes.named(p.measurement) ?? HealthTypes.hk(p.measurement) ?? HealthTypes.hae(p.measurement)
        let type = known?.name ?? p.measurement
        var r = CanonicalRecord(
            kind: RecordKind.kind(ofType: type), device: device, receiver: receiver,
            uuid: key, type: type, start: start)
        let app = p.tag("source"), sourceDevice = p.tag("device")
        if app != nil || sourceDevice != nil { r.source = RecordSource(app: app, device: sourceDevice) }
        var used: Set<String> = ["source", "device"]
        var usedFields: Set<String> = []
        if p.measurement == "workout" {
            r.kind = RecordKind.workout
            r.activity = p.tag("activity")
            used.insert("activity")
            for (name, path) in [("duration_s", \CanonicalRecord.durationS), ("energy_kcal", \.energyKcal), ("distance_m", \.distanceM)] {
                // A field that is not a number stays under `extra`, as it came.
                guard let d = p.field(name)?.number else { continue }
                r[keyPath: path] = d
                usedFields.insert(name)
            }
            if let d = r.durationS {
                r.end = Timestamp(seconds: start.seconds + Int64(d), nanoseconds: start.nanoseconds)
            }
        } else if case .string(let s)? = p.field("value_name") {
            r.kind = RecordKind.category
            r.value = .string(s)
            if let code = p.field("value")?.number { r.code = Int(code) }
            usedFields.formUnion(["value", "value_name"])
        } else if let t = known, t.kind == .category, let v = p.field("value"),
            let code = { () -> Int? in
                if case .string(let s) = v { return t.code(forValue: s) }
                return v.number.flatMap { $0 == $0.rounded() && abs($0) < 1e9 ? Int($0) : nil }
            }(), let name = t.valueName(forCode: code)
        {
            // A category's value by HealthKit's name (`HKCategoryValueSleepAnalysisAsleepCore`) or code.
            r.kind = RecordKind.category
            r.value = .string(name)
            r.code = code
            usedFields.insert("value")
        } else if let (name, d) = p.field("value")?.number.map({ ("value", $0) })
            ?? (known?.kind == .quantity ? p.field("qty")?.number.map { ("qty", $0) } : nil)
        {
            // A known quantity's number in `value`, or in `qty` as Health Auto Export names it.
            r.kind = RecordKind.quantity
            r.value = .number(d)
            r.unit = p.tag("unit") ?? p.tag("units") // into the type's canonical unit as it is journaled (ReceivedBatch.append)
            used.formUnion(["unit", "units"])
            usedFields.insert(name)
        } else {
            // No number in `value` (`qty=5`, `state="awake"`, `value="x"`): every field goes under
            // `extra`; the unit tag keeps its place.
            r.unit = p.tag("unit")
            used.insert("unit")
        }
        for t in p.tags where !used.contains(t.key) {
            r.extra.append(RecordField("tag:\(t.key)", RawJSON.string(t.value)))
        }
        for f in p.fields where !usedFields.contains(f.key) {
            let json: RawJSON
            switch f.value {
            case .string(let s): json = RawJSON.string(s)
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

    /// The fields Syncky's own lines carry: a line of only these is keyed by series and time.
    static let synckyFields: Set<String> = ["value", "value_name", "duration_s", "energy_kcal", "distance_m"]

    static func floorDiv(_ a: Int64, _ b: Int64) -> Int64 {
        let q = a / b
        return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q
    }
}
