import HealthgateCore

/// Canonical records as InfluxDB line protocol, in the schema Syncky's own InfluxDB format
/// writes, so dashboards built for it keep working: measurement = type; tags `unit`, `source`
/// (the app), `device` (the source device), `activity` for workouts, the phone, and static
/// tags, sorted by key; fields `value` (and `value_name` for categories), `duration_s`,
/// `energy_kcal`, `distance_m` for workouts; time = the record's start.
struct LineProtocolEncoder: Sendable {
    let measurement: String
    let phoneTag: String
    let staticTags: [(String, String)]
    let precision: InfluxDBSinkConfig.Precision

    enum Encoded {
        /// The line was appended; where the point lives.
        case line(PointIndex.Point)
        /// What the sink cannot represent, and why (it goes to the dead letters).
        case cannot(String)
    }

    /// Appends the record's line (with its line feed) to `out`.
    func encode(_ r: CanonicalRecord, into out: inout [UInt8]) -> Encoded {
        guard let start = r.start else { return .cannot("a \(r.kind) without a start time has no place in a time series") }
        var fields: [(String, String)] = []
        switch r.kind {
        case RecordKind.workout:
            if let d = r.durationS { fields.append(("duration_s", LineProtocolEncoder.float(d))) }
            if let e = r.energyKcal { fields.append(("energy_kcal", LineProtocolEncoder.float(e))) }
            if let d = r.distanceM { fields.append(("distance_m", LineProtocolEncoder.float(d))) }
        default:
            switch r.value {
            case .number(let d)?:
                guard d.isFinite else { return .cannot("the value is not a finite number") }
                fields.append(("value", LineProtocolEncoder.float(d)))
            case .string(let s)?:
                if let code = r.code { fields.append(("value", LineProtocolEncoder.float(Double(code)))) }
                fields.append(("value_name", LineProtocolEncoder.string(s)))
            case nil:
                break
            }
        }
        if fields.isEmpty { return .cannot("a \(r.kind) record with no value has no field to write") }
        var tags: [(String, String)] = staticTags
        if templated { for i in tags.indices where tags[i].1.contains("{") { tags[i].1 = render(tags[i].1, r) } }
        if let u = r.unit, !u.isEmpty { tags.append(("unit", u)) }
        if let a = r.source?.app, !a.isEmpty { tags.append(("source", a)) }
        if let d = r.source?.device, !d.isEmpty { tags.append(("device", d)) }
        if let a = r.activity, !a.isEmpty, r.kind == RecordKind.workout { tags.append(("activity", a)) }
        if !phoneTag.isEmpty { tags.append((phoneTag, r.device)) }
        tags.sort { $0.0 < $1.0 }
        let name = render(r)
        var line = LineProtocolEncoder.escape(name, measurement: true)
        tags.removeAll { $0.1.isEmpty }
        for (k, v) in tags {
            line += "," + LineProtocolEncoder.escape(k) + "=" + LineProtocolEncoder.escape(v)
        }
        line += " " + fields.map { LineProtocolEncoder.escape($0.0) + "=" + $0.1 }.joined(separator: ",")
        line += " \(timestamp(start))\n"
        out.append(contentsOf: line.utf8)
        return .line(PointIndex.Point(measurement: name, tags: tags, timeNanos: start.unixNanoseconds))
    }

    /// The placeholders a measurement or tag template may use.
    static let placeholders = ["type", "kind", "receiver", "phone", "source", "unit"]

    /// Whether any static tag is a template (so plain tags cost nothing per record).
    var templated: Bool { staticTags.contains { $0.1.contains("{") } }

    func render(_ r: CanonicalRecord) -> String {
        measurement.contains("{") ? render(measurement, r) : measurement
    }

    func render(_ template: String, _ r: CanonicalRecord) -> String {
        template.replacingPlaceholders(["type": r.type, "kind": r.kind, "receiver": r.receiver, "phone": r.device,
                                        "source": r.source?.app ?? "", "unit": r.unit ?? ""])
    }

    func timestamp(_ t: Timestamp) -> Int64 {
        switch precision {
        case .ns: return t.unixNanoseconds
        case .us: return t.unixNanoseconds / 1_000
        case .ms: return t.unixNanoseconds / 1_000_000
        case .s: return t.seconds
        }
    }

    static func float(_ d: Double) -> String {
        d == d.rounded(.towardZero) && d.magnitude < 1e15 ? String(Int64(d)) : String(d)
    }

    static func string(_ s: String) -> String {
        var out = "\""
        for c in s.unicodeScalars {
            switch c {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            default: out.unicodeScalars.append(c)
            }
        }
        return out + "\""
    }

    /// Measurement: `,` and space; tag keys and values, field keys: `,`, `=` and space. Tabs and
    /// line breaks become spaces; a trailing backslash (which cannot round-trip) is dropped.
    static func escape(_ s: String, measurement: Bool = false) -> String {
        var out = ""
        for c in s.unicodeScalars {
            switch c {
            case ",", " ": out += "\\"; out.unicodeScalars.append(c)
            case "=" where !measurement: out += "\\="
            case "\t", "\n", "\r": out += "\\ "
            default: out.unicodeScalars.append(c)
            }
        }
        while out.hasSuffix("\\") && !out.hasSuffix("\\ ") && !out.hasSuffix("\\,") && !out.hasSuffix("\\=") { out.removeLast() }
        return out.isEmpty ? "_" : out
    }
}

extension String {
    /// The `{name}`s in a template that are not among `known`.
    func unknownPlaceholders(_ known: [String]) -> [String] {
        var unknown: [String] = []
        var rest = Substring(self)
        while let open = rest.firstIndex(of: "{"), let close = rest[open...].firstIndex(of: "}") {
            let key = String(rest[rest.index(after: open)..<close])
            if !known.contains(key) { unknown.append(key) }
            rest = rest[rest.index(after: close)...]
        }
        return unknown
    }

    func replacingPlaceholders(_ values: [String: String]) -> String {
        var out = ""
        var rest = Substring(self)
        while let open = rest.firstIndex(of: "{"), let close = rest[open...].firstIndex(of: "}") {
            out += rest[..<open]
            let key = String(rest[rest.index(after: open)..<close])
            out += values[key] ?? String(rest[open...close])
            rest = rest[rest.index(after: close)...]
        }
        return out + rest
    }
}
