import CanonicalJSON
import FastJSON
import SinkKit
import HealthgateCore

/// Canonical records as InfluxDB line protocol, in the schema Syncky's own InfluxDB format
/// writes, so dashboards built for it keep working: measurement = type; tags `unit`, `source`
/// (the app), `device` (the source device), `activity` for workouts, the phone, and static
/// tags, sorted by key; fields `value` (and `value_name` for categories), `duration_s`,
/// `energy_kcal`, `distance_m` for workouts; time = the record's start.
struct LineProtocolEncoder: Sendable {
    /// The fields a measurement or tag template may use.
    static let fields: [RecordTemplate.Field] = [.type, .kind, .receiver, .phone, .source, .unit]

    /// The fields of a record the sink reads (`BuiltSink.reads`): the line, the point index and
    /// deletes use none of the phone's own JSON (`fields`, `metadata`, `extra`), nor the end, the
    /// UTC offset or the count of parts (a point is at its start), so the drainer reads the rest
    /// from a walk of each journal line instead of parsing all of it.
    static let reads = CanonicalRecord.Fields.all.subtracting(
        CanonicalRecord.Fields(.fields, .metadata, .extra, .end, .utcOffset, .parts))

    let measurement: RecordTemplate
    let phoneTag: String
    /// Tags whose value is the same on every point, and tags whose value is a template.
    let staticTags: [(String, String)]
    let templatedTags: [(String, RecordTemplate)]
    let precision: InfluxDBSinkConfig.Precision
    /// Every tag a point can have (but the labels routes add), sorted by key once: a record's
    /// line is then written tag by tag, with no tag list made, sorted or filtered per record.
    let slots: [Slot]

    /// One tag, its key escaped, and where its value comes from.
    struct Slot: Sendable {
        var key: [UInt8]
        var value: Value

        enum Value: Sendable {
            /// A static tag's value, escaped (never empty: an empty one has no slot).
            case fixed([UInt8])
            case template(RecordTemplate)
            case unit, source, device, activity, phone
        }
    }

    init(measurement: String, phoneTag: String, tags: [(String, String)], precision: InfluxDBSinkConfig.Precision) {
        self.measurement = RecordTemplate(measurement, allowed: LineProtocolEncoder.fields)
        self.phoneTag = phoneTag
        let compiled = tags.map { ($0.0, $0.1, RecordTemplate($0.1, allowed: LineProtocolEncoder.fields)) }
        staticTags = compiled.filter { $0.2.isConstant }.map { ($0.0, $0.1) }
        templatedTags = compiled.filter { !$0.2.isConstant }.map { ($0.0, $0.2) }
        self.precision = precision
        // In the order `appendTags(withLabelsOf:)` lists them, so that equal keys come out alike.
        var named: [(String, Slot.Value)] = []
        for (k, v) in staticTags where !v.isEmpty {
            var escaped: [UInt8] = []
            LineProtocolEncoder.appendEscaped(v, to: &escaped)
            named.append((k, .fixed(escaped)))
        }
        for (k, t) in templatedTags { named.append((k, .template(t))) }
        named += [("unit", .unit), ("source", .source), ("device", .device), ("activity", .activity)]
        if !phoneTag.isEmpty { named.append((phoneTag, .phone)) }
        slots = LineProtocolEncoder.sortedByKey(named).map { k, v in
            var key: [UInt8] = []
            LineProtocolEncoder.appendEscaped(k, to: &key)
            return Slot(key: key, value: v)
        }
    }

    /// Sorted by key, equal keys in the order given.
    static func sortedByKey<V>(_ tags: [(String, V)]) -> [(String, V)] {
        tags.enumerated().sorted { a, b in a.element.0 < b.element.0 || (a.element.0 == b.element.0 && a.offset < b.offset) }
            .map(\.element)
    }

    enum Encoded {
        /// The line was appended; its series (measurement and tags, as written) ends at
        /// `seriesEnd` in the output, and its point's time.
        case line(seriesEnd: Int, timeNanos: Int64)
        /// What the sink cannot represent, and why (it goes to the dead letters).
        case cannot(String)
    }

    /// Appends the record's line (with its line feed) to `out`, byte by byte (no string is
    /// built per record: this runs once per sample on the sink's thread).
    func encode(_ r: CanonicalRecord, into out: inout [UInt8]) -> Encoded {
        guard let start = r.start else { return .cannot("a \(r.kind) without a start time has no place in a time series") }
        let isWorkout = r.kind == RecordKind.workout
        if isWorkout {
            if r.durationS == nil && r.energyKcal == nil && r.distanceM == nil {
                return .cannot("a workout record with no value has no field to write")
            }
        } else {
            switch r.value {
            case .number(let d)?: if !d.isFinite { return .cannot("the value is not a finite number") }
            case .string?: break
            case nil: return .cannot("a \(r.kind) record with no value has no field to write")
            }
        }
        let name = measurement.render(r, LineProtocolEncoder.value)
        LineProtocolEncoder.appendEscaped(name, measurement: true, to: &out)
        if r.tags.isEmpty {
            for slot in slots { append(slot, of: r, isWorkout: isWorkout, to: &out) }
        } else {
            appendTags(withLabelsOf: r, isWorkout: isWorkout, to: &out)
        }
        let seriesEnd = out.count
        var separator = UInt8(ascii: " ")
        func field(_ key: StaticString, _ write: (inout [UInt8]) -> Void) {
            out.append(separator)
            separator = UInt8(ascii: ",")
            key.withUTF8Buffer { out.append(contentsOf: $0) }
            out.append(UInt8(ascii: "="))
            write(&out)
        }
        if isWorkout {
            if let d = r.durationS { field("duration_s") { LineProtocolEncoder.appendFloat(d, to: &$0) } }
            if let e = r.energyKcal { field("energy_kcal") { LineProtocolEncoder.appendFloat(e, to: &$0) } }
            if let d = r.distanceM { field("distance_m") { LineProtocolEncoder.appendFloat(d, to: &$0) } }
        } else {
            switch r.value {
            case .number(let d)?:
                field("value") { LineProtocolEncoder.appendFloat(d, to: &$0) }
            case .string(let s)?:
                if let code = r.code { field("value") { LineProtocolEncoder.appendInt(Int64(code), to: &$0) } }
                field("value_name") { LineProtocolEncoder.appendString(s, to: &$0) }
            case nil:
                break
            }
        }
        out.append(UInt8(ascii: " "))
        LineProtocolEncoder.appendInt(timestamp(start), to: &out)
        out.append(UInt8(ascii: "\n"))
        return .line(seriesEnd: seriesEnd, timeNanos: start.unixNanoseconds)
    }

    /// `encode` of the record at `record`, read where it lies (`CanonicalRecord.inPlace`).
    func encode(at record: UnsafePointer<CanonicalRecord>, into out: inout [UInt8]) -> Encoded {
        CanonicalRecord.inPlace(record) { encode($0, into: &out) }
    }

    /// `,key=value` for a slot whose value the record has.
    @inline(__always)
    func append(_ slot: Slot, of r: CanonicalRecord, isWorkout: Bool, to out: inout [UInt8]) {
        func key() {
            out.append(UInt8(ascii: ","))
            out.append(contentsOf: slot.key)
            out.append(UInt8(ascii: "="))
        }
        func tag(_ value: String?) {
            guard let value, !value.isEmpty else { return }
            key()
            LineProtocolEncoder.appendEscaped(value, to: &out)
        }
        switch slot.value {
        case .fixed(let v):
            key()
            out.append(contentsOf: v)
        case .template(let t): tag(t.render(r, LineProtocolEncoder.value))
        case .unit: tag(r.unit)
        case .source: tag(r.source?.app)
        case .device: tag(r.source?.device)
        case .activity: if isWorkout { tag(r.activity) }
        case .phone: tag(r.device)
        }
    }

    /// The tags of a record that carries labels from routes (`tag`): listed, the labels added
    /// where they do not take a name the sink gives itself, sorted and written.
    func appendTags(withLabelsOf r: CanonicalRecord, isWorkout: Bool, to out: inout [UInt8]) {
        var tags: [(String, String)] = staticTags
        for (k, t) in templatedTags { tags.append((k, t.render(r, LineProtocolEncoder.value))) }
        if let u = r.unit, !u.isEmpty { tags.append(("unit", u)) }
        if let a = r.source?.app, !a.isEmpty { tags.append(("source", a)) }
        if let d = r.source?.device, !d.isEmpty { tags.append(("device", d)) }
        if let a = r.activity, !a.isEmpty, isWorkout { tags.append(("activity", a)) }
        if !phoneTag.isEmpty { tags.append((phoneTag, r.device)) }
        for t in r.tags where !tags.contains(where: { $0.0 == t.name }) { tags.append((t.name, t.value)) }
        for (k, v) in LineProtocolEncoder.sortedByKey(tags) where !v.isEmpty {
            out.append(UInt8(ascii: ","))
            LineProtocolEncoder.appendEscaped(k, to: &out)
            out.append(UInt8(ascii: "="))
            LineProtocolEncoder.appendEscaped(v, to: &out)
        }
    }

    static func value(_ f: RecordTemplate.Field, _ r: CanonicalRecord) -> String {
        switch f {
        case .type: r.type
        case .kind: r.kind
        case .receiver: r.receiver
        case .phone, .device: r.device
        case .source: r.source?.app ?? ""
        case .unit: r.unit ?? ""
        case .date: ""   // not allowed here
        }
    }

    func timestamp(_ t: Timestamp) -> Int64 {
        switch precision {
        case .ns: return t.unixNanoseconds
        case .us: return t.unixNanoseconds / 1_000
        case .ms: return t.unixNanoseconds / 1_000_000
        case .s: return t.seconds
        }
    }

    /// A whole number as an integer literal without a fraction (as Syncky writes it: `value=412`),
    /// anything else in Swift's shortest round-trip form.
    static func appendFloat(_ d: Double, to out: inout [UInt8]) {
        if d == d.rounded(.towardZero) && d.magnitude < 1e15 {
            appendInt(Int64(d), to: &out)
        } else {
            out.append(contentsOf: d.description.utf8)
        }
    }

    static func appendInt(_ v: Int64, to out: inout [UInt8]) {
        if v < 0 { out.append(UInt8(ascii: "-")) }
        var m = v.magnitude
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)   // 24 bytes; an Int64 has at most 19 digits
        withUnsafeMutableBytes(of: &digits) { buf in
            var i = buf.count
            repeat {
                i -= 1
                buf[i] = UInt8(truncatingIfNeeded: m % 10) + UInt8(ascii: "0")
                m /= 10
            } while m > 0
            out.append(contentsOf: buf[i...])
        }
    }

    /// A string field value: quoted, `"`, `\\` and line feeds escaped.
    static func appendString(_ s: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for c in s.utf8 {
            switch c {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): out.append(UInt8(ascii: "\\")); out.append(c)
            case UInt8(ascii: "\n"): out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "n"))
            default: out.append(c)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    /// Measurement: `,` and space; tag keys and values, field keys: `,`, `=` and space. Tabs and
    /// line breaks become spaces; a trailing backslash (which cannot round-trip) is dropped; an
    /// empty name becomes `_`. (UTF-8 continuation bytes are never ASCII, so bytewise is safe.)
    static func appendEscaped(_ s: String, measurement: Bool = false, to out: inout [UInt8]) {
        s.withUTF8Bytes { appendEscaped(bytes: $0, measurement: measurement, to: &out) }   // where it lies: no retain a tag
    }

    static func appendEscaped(bytes p: UnsafeBufferPointer<UInt8>, measurement: Bool, to out: inout [UInt8]) {
        let start = out.count
        // The bytes between escapes go in at once (most names have none: all of them).
        var run = 0
        for i in 0..<p.count {
            let c = p[i]
            guard c <= UInt8(ascii: "=") else { continue }   // every byte that changes is at most `=`
            let escaped: UInt8
            switch c {
            case UInt8(ascii: ","), UInt8(ascii: " "): escaped = c
            case UInt8(ascii: "="): if measurement { continue } else { escaped = c }
            case 9, 10, 13: escaped = UInt8(ascii: " ")
            default: continue
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: p[run..<i]))
            out.append(UInt8(ascii: "\\"))
            out.append(escaped)
            run = i + 1
        }
        out.append(contentsOf: UnsafeBufferPointer(rebasing: p[run...]))
        while out.count > start, out.last == UInt8(ascii: "\\") { out.removeLast() }
        if out.count == start { out.append(UInt8(ascii: "_")) }
    }
}

extension InfluxDBSink {
    /// The fields of a record the sink reads (`LineProtocolEncoder.reads`; `--micro` decodes them).
    public static var fieldsRead: CanonicalRecord.Fields { LineProtocolEncoder.reads }

    /// `healthgate-bench --micro`'s InfluxDB lines: the drainer's read of journal lines for this
    /// sink, then each record encoded as the sink encodes it on its thread (Syncky's schema, a
    /// phone tag). Returns the bytes of line protocol made.
    public static func encodeBench(_ ndjson: [UInt8], parser: JSONParser) -> Int {
        let encoder = LineProtocolEncoder(measurement: "{type}", phoneTag: "phone", tags: [], precision: .ns)
        let read = CanonicalCodec.readLines(ndjson, parser: parser, only: fieldsRead)
        var out: [UInt8] = []
        out.reserveCapacity(ndjson.count)
        read.records.withUnsafeBufferPointer { records in
            for i in records.indices { _ = encoder.encode(at: records.baseAddress! + i, into: &out) }
        }
        return out.count
    }
}
