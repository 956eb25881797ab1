import CanonicalJSON
import FastJSON
import HealthgateCore
import HealthgateCrypto

/// Health Auto Export's REST API body, `{"data":{"metrics":[…],"workouts":[…],…}}` — as the
/// app itself sends it and as Syncky's `hae` format copies it — into canonical records:
/// metric names through the type registry, values into each type's canonical unit (HAE's
/// percent ×100 undone), `2026-10-14 09:01:03 +0200` dates to UTC with the offset kept,
/// workouts keyed by their `id` (a later copy with its route replaces the first), and a
/// deterministic key for everything that has no id, so a resend yields the same key.
enum HAEBody {
    static func read(_ body: [UInt8], parser: JSONParser, receiver: String, device: String) -> Reception {
        return parser.withBody(body) { doc in
            // Some exports wrap the object in an array.
            var root = doc.root
            if root.kind == .array, root.count == 1, let only = root[0] { root = only }
            guard root.kind == .object, let data = root["data"], data.kind == .object else {
                return .unreadable(
                    status: 400, reason: "a Health Auto Export body is {\"data\": {\"metrics\": [...], \"workouts\": [...]}}")
            }
            var batch = ReceivedBatch()
            var ctx = Context(receiver: receiver, device: device, offset: firstOffset(data))
            for (k, v) in data.members {
                guard v.kind == .array else {
                    if !v.isNull {
                        batch.quarantined.append(
                            QuarantinedRecord(reason: "data.\(QuarantinedRecord.name(k.string)) is not a list", raw: raw(v)))
                    }
                    continue
                }
                switch k.string {
                case "metrics": for m in v.elements { metric(m, &ctx, &batch) }
                case "workouts": for w in v.elements { workout(w, &ctx, &batch) }
                default: for item in v.elements { other(kind: k.string, item, &ctx, &batch) }
                }
            }
            return .accept(batch, reply: HTTPResponse(status: 200))
        }
    }

    struct Context {
        var receiver: String
        var device: String
        /// The phone's UTC offset (seconds), from the body's first time that has one: a bare
        /// date (`2024-02-06`) is midnight of that day on the phone, not in UTC.
        var offset: Int?

        func date(_ s: String) -> (Timestamp, Int?)? { HAEBody.date(s, bareDateOffset: offset) }
    }

    /// The UTC offset of the first time in the body that gives one (a metric point's `date` or
    /// `startDate`, an item's `start` or `date`); nil when every time is a bare date.
    static func firstOffset(_ data: JSONRef) -> Int? {
        func offset(_ v: JSONRef?) -> Int? {
            guard let s = v?.string, s.count > 10, let (_, o) = date(s) else { return nil }
            return o
        }
        for (k, v) in data.members where v.kind == .array {
            for item in v.elements where item.kind == .object {
                if k.string == "metrics" {
                    guard let points = item["data"], points.kind == .array else { continue }
                    for p in points.elements where p.kind == .object {
                        if let o = offset(p["date"]) ?? offset(p["startDate"]) ?? offset(p["sleepStart"]) { return o }
                    }
                } else if let o = offset(item["start"]) ?? offset(item["date"]) {
                    return o
                }
            }
        }
        return nil
    }

    /// A subtree as compact JSON text.
    static func raw(_ v: JSONRef) -> RawJSON { CanonicalCodec.raw(v) }

    /// `2026-10-14 09:01:03 +0200`, `… +02:00`, with a fraction, RFC 3339, or a bare date:
    /// midnight of that day at `bareDateOffset` (the phone's, from elsewhere in the body), else
    /// at UTC with offset 0 (its local day is the day sent either way). Returns the instant and
    /// the offset in seconds.
    static func date(_ s: String, bareDateOffset: Int? = nil) -> (Timestamp, Int?)? {
        if let r = Timestamp.parseRFC3339(s) { return r }
        let parts = s.split(separator: " ")
        if parts.count == 1, parts[0].count == 10 {
            return Timestamp.parseRFC3339(parts[0] + "T00:00:00" + (bareDateOffset.map(Timestamp.formatOffset) ?? "Z"))
        }
        guard parts.count == 3 else { return nil }
        var zone = String(parts[2])
        if zone.count == 5, zone.first == "+" || zone.first == "-" {
            zone = String(zone.prefix(3)) + ":" + String(zone.suffix(2))
        }
        return Timestamp.parseRFC3339("\(parts[0])T\(parts[1])\(zone)")
    }

    static func source(_ v: JSONRef?) -> RecordSource? {
        guard let s = v?.string, !s.isEmpty else { return nil }
        return RecordSource(app: nil, device: s)
    }

    static func bad(_ reason: String, _ v: JSONRef, _ batch: inout ReceivedBatch) {
        batch.quarantined.append(QuarantinedRecord(reason: reason, raw: raw(v)))
    }

    /// A value in `unit` into the type's canonical unit; HAE writes percents on 0–100.
    static func canonical(_ value: Double, unit: String?, type: HealthType?) -> (Double, String?) {
        guard let type, let target = type.unit else { return (value, unit) }
        guard let unit, !unit.isEmpty else { return (value, target) }
        let from = unit == "%" && target == "%" ? "percent" : unit
        if let v = Units.convert(value, from: from, to: target) { return (v, target) }
        return (value, unit)
    }

    static func metric(_ m: JSONRef, _ ctx: inout Context, _ batch: inout ReceivedBatch) {
        guard m.kind == .object, let name = m["name"]?.string, !name.isEmpty else {
            return bad("a metric needs a name", m, &batch)
        }
        let units = m["units"]?.string
        let known = HealthTypes.hae(name)
        guard let data = m["data"], data.kind == .array else { return bad("metric \(name) has no data list", m, &batch) }
        for point in data.elements {
            guard point.kind == .object else { bad("a \(name) point must be an object", point, &batch); continue }
            switch name {
            case "blood_pressure":
                for (field, typeName) in [("systolic", "blood_pressure_systolic"), ("diastolic", "blood_pressure_diastolic")] {
                    quantity(
                        point, type: HealthTypes.named(typeName), typeName: typeName, valueKey: field, units: units,
                        skip: ["systolic", "diastolic"], ctx: &ctx, batch: &batch)
                }
            case "sleep_analysis" where point["startDate"] != nil:
                sleepSegment(point, ctx: &ctx, batch: &batch)
            case "sleep_analysis":
                // The aggregated forms (with or without stages, before and after HAE 6.6.2):
                // nightly totals, not HealthKit samples; kept whole, timed by the night.
                sleepNight(point, metric: name, units: units, ctx: &ctx, batch: &batch)
            case "heart_rate" where point["qty"] == nil:
                quantity(
                    point, type: known, typeName: "heart_rate", valueKey: "Avg", units: units, skip: ["Avg"],
                    ctx: &ctx, batch: &batch)
            default:
                if let known, known.kind == .category {
                    categoryPoint(point, type: known, ctx: &ctx, batch: &batch)
                } else if point["qty"] != nil {
                    quantity(
                        point, type: known, typeName: known?.name ?? name, valueKey: "qty", units: units, skip: [],
                        ctx: &ctx, batch: &batch)
                } else {
                    // A shape this mapping does not know (aggregated sleep, say): kept whole.
                    summary(point, type: known?.name ?? name, metric: name, ctx: &ctx, batch: &batch)
                }
            }
        }
    }

    static func quantity(
        _ p: JSONRef, type: HealthType?, typeName: String, valueKey: String, units: String?,
        skip: Set<String>, ctx: inout Context, batch: inout ReceivedBatch
    ) {
        guard let dateText = p["date"]?.string, let (start, offset) = ctx.date(dateText) else {
            return bad("a \(typeName) point needs a date like 2026-10-14 09:01:03 +0200", p, &batch)
        }
        guard let number = p[valueKey]?.double else {
            return bad("a \(typeName) point needs a number in \"\(valueKey)\"", p, &batch)
        }
        let (value, unit) = canonical(number, unit: units, type: type)
        var r = CanonicalRecord(
            kind: RecordKind.quantity, device: ctx.device, receiver: ctx.receiver,
            uuid: Crypto.derivedKey(["hae", typeName, "\(start.unixNanoseconds)", p["source"]?.string ?? ""]),
            type: typeName, start: start, utcOffset: offset, value: .number(value), unit: unit)
        r.source = source(p["source"])
        for (k, v) in p.members {
            let key = k.string
            if key == "date" || key == "source" || key == valueKey || skip.contains(key) { continue }
            if let n = v.double, ["Min", "Max", "Avg"].contains(key) {
                let (converted, _) = canonical(n, unit: units, type: type)
                r.extra.append(RecordField(key.lowercased(), .number(converted)))
            } else {
                r.extra.append(RecordField(key, raw(v)))
            }
        }
        batch.append(r)
    }

    static let sleepValues: [String: String] = [
        "awake": "awake", "asleep": "asleep_unspecified", "in bed": "in_bed", "inbed": "in_bed", "core": "asleep_core",
        "deep": "asleep_deep", "rem": "asleep_rem", "unspecified": "asleep_unspecified"
    ]

    static func sleepSegment(_ p: JSONRef, ctx: inout Context, batch: inout ReceivedBatch) {
        guard let s = p["startDate"]?.string, let (start, offset) = ctx.date(s), let e = p["endDate"]?.string, let (end, _) = ctx.date(e)
        else {
            return bad("a sleep segment needs startDate and endDate", p, &batch)
        }
        guard end >= start else { return bad("the sleep segment ends before it starts", p, &batch) }
        let given = p["value"]?.string ?? "unspecified"
        let value = sleepValues[given.lowercased()] ?? given
        var r = CanonicalRecord(
            kind: RecordKind.category, device: ctx.device, receiver: ctx.receiver,
            uuid: Crypto.derivedKey([
                "hae", "sleep_analysis", "\(start.unixNanoseconds)", "\(end.unixNanoseconds)",
                p["source"]?.string ?? ""
            ]),
            type: "sleep_analysis", start: start, end: end, utcOffset: offset, value: .string(value))
        r.code = RecordKind.categoryCode(type: "sleep_analysis", name: value)
        r.source = source(p["source"])
        for (k, v) in p.members where !["startDate", "endDate", "value", "source"].contains(k.string) {
            r.extra.append(RecordField(k.string, raw(v)))
        }
        batch.append(r)
    }

    static func categoryPoint(_ p: JSONRef, type: HealthType, ctx: inout Context, batch: inout ReceivedBatch) {
        guard let dateText = p["date"]?.string ?? p["startDate"]?.string, let (start, offset) = ctx.date(dateText) else {
            return bad("a \(type.name) point needs a date", p, &batch)
        }
        let name = p["value"]?.string ?? type.categoryValues.first?.name ?? "not_applicable"
        let normalized = type.code(forValue: name).flatMap { type.valueName(forCode: $0) } ?? name
        var r = CanonicalRecord(
            kind: RecordKind.category, device: ctx.device, receiver: ctx.receiver,
            uuid: Crypto.derivedKey(["hae", type.name, "\(start.unixNanoseconds)", p["source"]?.string ?? ""]),
            type: type.name, start: start, utcOffset: offset, value: .string(normalized))
        r.code = type.code(forValue: normalized)
        if let e = p["endDate"]?.string, let (end, _) = ctx.date(e) { r.end = end }
        r.source = source(p["source"])
        for (k, v) in p.members where !["date", "startDate", "endDate", "value", "source"].contains(k.string) {
            r.extra.append(RecordField(k.string, raw(v)))
        }
        batch.append(r)
    }

    static func summary(_ p: JSONRef, type: String, metric: String, ctx: inout Context, batch: inout ReceivedBatch) {
        guard let dateText = p["date"]?.string, let (start, offset) = ctx.date(dateText) else {
            return bad("a \(metric) point needs a date", p, &batch)
        }
        var r = CanonicalRecord(
            kind: "summary", device: ctx.device, receiver: ctx.receiver,
            uuid: Crypto.derivedKey(["hae", "summary", metric, "\(start.unixNanoseconds)", p["source"]?.string ?? ""]),
            type: type, start: start, utcOffset: offset)
        r.source = source(p["source"])
        for (k, v) in p.members where !["date", "source"].contains(k.string) { r.addKindField(k.string, raw(v)) }
        batch.append(r)
    }

    /// An aggregated sleep night is timed by its sleep window (`sleepStart`…`sleepEnd`, else
    /// `inBedStart`…`inBedEnd`); a night sent without one ends at its `date` (the morning it is
    /// dated by, a bare date being the phone's midnight) and starts the night's length before
    /// (in bed, else asleep and awake, as sent). Its figures stay as sent, in the metric's unit
    /// (`hr`), which the record carries; its local time strings become UTC times.
    static func sleepNight(_ p: JSONRef, metric: String, units: String?, ctx: inout Context, batch: inout ReceivedBatch) {
        let dates = ctx
        func time(_ key: String) -> (Timestamp, Int?)? { p[key]?.string.flatMap(dates.date) }
        let unit = units.flatMap { $0.isEmpty ? nil : $0 } ?? "hr"
        func seconds(_ key: String) -> Double? {
            guard let v = p[key]?.double, v.isFinite, v >= 0, v < 1e6 else { return nil }
            return Units.convert(v, from: unit, to: "s") ?? v * 3600
        }
        let stages = ["asleep", "core", "deep", "rem"].compactMap(seconds)
        let asleep = seconds("totalSleep") ?? (stages.isEmpty ? nil : stages.reduce(0, +))
        let length = seconds("inBed").flatMap { $0 > 0 ? $0 : nil } ?? ((asleep ?? 0) + (seconds("awake") ?? 0))
        func later(_ t: Timestamp, by s: Double) -> Timestamp {
            let ns = t.unixNanoseconds + Int64(s * 1e9)
            return Timestamp(
                seconds: ns / 1_000_000_000 - (ns % 1_000_000_000 < 0 ? 1 : 0),
                nanoseconds: Int32((ns % 1_000_000_000 + 1_000_000_000) % 1_000_000_000))
        }
        let window = [("sleepStart", "sleepEnd"), ("inBedStart", "inBedEnd")].lazy
            .compactMap { s, e in time(s).map { ($0, time(e)) } }.first
        let from: Timestamp, to: Timestamp, offset: Int?
        if let (s, e) = window {
            (from, offset) = s
            to = e?.0 ?? later(from, by: length)
        } else if let (d, o) = time("date") {
            (to, offset) = (d, o)
            from = later(d, by: -length)
        } else {
            return bad("an aggregated \(metric) night needs sleepStart, inBedStart or date", p, &batch)
        }
        guard to >= from else { return bad("the \(metric) night ends before it starts", p, &batch) }
        var r = CanonicalRecord(
            kind: "summary", device: ctx.device, receiver: ctx.receiver,
            uuid: Crypto.derivedKey(["hae", "summary", metric, "\(from.unixNanoseconds)", p["source"]?.string ?? ""]),
            type: "sleep_analysis", start: from, end: to, utcOffset: offset, unit: unit)
        r.source = source(p["source"])
        let times: Set<String> = ["sleepStart", "sleepEnd", "inBedStart", "inBedEnd", "date"]
        for (k, v) in p.members where k.string != "source" {
            if times.contains(k.string), let t = time(k.string) {
                r.addKindField(k.string, .string(t.0.rfc3339()))
            } else {
                r.addKindField(k.string, raw(v))
            }
        }
        batch.append(r)
    }

    static func workout(_ w: JSONRef, _ ctx: inout Context, _ batch: inout ReceivedBatch) {
        guard w.kind == .object else { return bad("a workout must be an object", w, &batch) }
        guard let s = w["start"]?.string, let (start, offset) = ctx.date(s) else { return bad("a workout needs a start", w, &batch) }
        var end: Timestamp?
        if let e = w["end"]?.string {
            guard let (t, _) = ctx.date(e) else { return bad("the workout's end is not a date", w, &batch) }
            end = t
        }
        if let end, end < start { return bad("the workout ends before it starts", w, &batch) }
        let name = w["name"]?.string ?? "Other"
        let activity =
            HealthTypes.workout(haeName: name)?.name
            ?? name.lowercased().split(whereSeparator: { !$0.isLetter && !$0.isNumber }).joined(separator: "_")
        let id = w["id"]?.string
        var r = CanonicalRecord(
            kind: RecordKind.workout, device: ctx.device, receiver: ctx.receiver,
            uuid: id ?? Crypto.derivedKey(["hae", "workout", "\(start.unixNanoseconds)", name]),
            type: "workout", start: start, end: end, utcOffset: offset, activity: activity)
        // HAE v1 workouts carry no duration: it is the time from start to end.
        r.durationS =
            w["duration"]?.double
            ?? end.map {
                Double($0.seconds - start.seconds) + Double($0.nanoseconds - start.nanoseconds) / 1e9
            }
        // The name as the app sent it (in the phone's language), whatever the mapping made of it.
        if let given = w["name"]?.string { r.extra.append(RecordField("name", .string(given))) }
        func quantity(_ key: String, _ unit: String) -> Double? {
            guard let q = w[key], let v = q["qty"]?.double else { return nil }
            let from = q["units"]?.string ?? unit
            return Units.convert(v, from: from, to: unit) ?? v
        }
        r.energyKcal = quantity("activeEnergyBurned", "kcal") ?? quantity("activeEnergy", "kcal")
        r.distanceM = quantity("distance", "m")
        let used: Set<String> = ["id", "name", "start", "end", "duration", "activeEnergyBurned", "distance"]
        for (k, v) in w.members where !used.contains(k.string) { r.addKindField(k.string, raw(v)) }
        if r.energyKcal == nil, let v = w["activeEnergy"] { r.addKindField("activeEnergy", raw(v)) }
        batch.append(r)
    }

    /// stateOfMind, symptoms, medications, ecg, …: kept whole as their own kind, keyed by
    /// their id or by what identifies them.
    static func other(kind: String, _ item: JSONRef, _ ctx: inout Context, _ batch: inout ReceivedBatch) {
        guard item.kind == .object else { return bad("an item of \(kind) must be an object", item, &batch) }
        let startText = item["start"]?.string ?? item["date"]?.string
        let start = startText.flatMap(ctx.date)
        let canonicalKind: String
        switch kind {
        case "stateOfMind": canonicalKind = "state_of_mind"
        case "heartRateNotifications": canonicalKind = "heart_rate_notification"
        case "cycleTracking": canonicalKind = "cycle_tracking"
        default: canonicalKind = kind.lowercased() == "symptoms" ? "symptom" : kind
        }
        var type = canonicalKind
        var r = CanonicalRecord(
            kind: canonicalKind, device: ctx.device, receiver: ctx.receiver, uuid: "", type: type,
            start: start?.0, utcOffset: start?.1)
        if kind == "symptoms", let name = item["name"]?.string {
            // A symptom is a HealthKit category with a severity.
            let snake = name.lowercased().split(whereSeparator: { !$0.isLetter && !$0.isNumber }).joined(separator: "_")
            if let t = HealthTypes.named(snake), t.kind == .category {
                type = t.name
                r.kind = RecordKind.category
                let severity = (item["severity"]?.string ?? "unspecified").lowercased()
                    .split(whereSeparator: { !$0.isLetter }).joined(separator: "_")
                r.value = .string(t.code(forValue: severity).flatMap { t.valueName(forCode: $0) } ?? severity)
                r.code = t.code(forValue: severity)
            } else {
                type = snake
            }
            r.type = type
        }
        if let e = item["end"]?.string, let (end, _) = ctx.date(e) { r.end = end }
        r.uuid = item["id"]?.string ?? Crypto.derivedKey(["hae", kind, type, startText ?? "", item["source"]?.string ?? ""])
        for (k, v) in item.members where !["id", "start", "end", "date"].contains(k.string) {
            if r.kind == RecordKind.category { r.extra.append(RecordField(k.string, raw(v))) } else { r.addKindField(k.string, raw(v)) }
        }
        batch.append(r)
    }
}
