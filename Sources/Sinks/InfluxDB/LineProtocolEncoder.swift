import Glibc
import CanonicalJSON
import HealthgateCore
import SinkKit

/// Canonical records as InfluxDB line protocol, in the schema Syncky's own InfluxDB format
/// writes, so dashboards built for it keep working: measurement = type; tags `unit`, `source`
/// (the app), `device` (the source device), `activity` for workouts, the phone, static tags and
/// the labels routes add, sorted by key; fields `value` (and `value_name` for categories),
/// `duration_s`, `energy_kcal`, `distance_m` for workouts; time = the record's start.
struct LineProtocolEncoder: Sendable {
    /// The fields a measurement or tag template may use.
    static let fields: [RecordTemplate.Field] = [.type, .kind, .receiver, .phone, .source, .unit]

    let measurement: RecordTemplate
    let precision: InfluxDBSinkConfig.Precision
    /// The sink's own tags, sorted by key (equal keys in the order given): a point's are written
    /// in this order, the labels of its record merged in where they sort. Plain values, so that
    /// writing a point retains nothing: their bytes are in `bytes`, their templates in `templates`.
    let tags: [Tag]
    let tagNames: [String]
    /// The escaped keys (`,key=`) and fixed values of the tags, and a fixed measurement.
    let bytes: [UInt8]
    let templates: [RecordTemplate]

    struct Tag: Sendable {
        /// `,key=`, escaped, in `bytes`.
        var key: Range<Int>
        var value: Value
    }

    enum Value: Sendable {
        /// Escaped, in `bytes`; never empty (an empty static tag has no place).
        case fixed(Range<Int>)
        /// A template of one field, or of several parts (in `templates`).
        case field(RecordTemplate.Field)
        case template(Int)
        case unit, source, device, activity, phone
    }

    /// The measurement: a template of one field, fixed text (escaped), or a template of several parts.
    let measurementFrom: Value

    init(measurement: String, phoneTag: String, tags given: [(String, String)], precision: InfluxDBSinkConfig.Precision) {
        self.measurement = RecordTemplate(measurement, allowed: LineProtocolEncoder.fields)
        self.precision = precision
        var bytes: [UInt8] = []
        var templates: [RecordTemplate] = []
        func escaped(_ text: String, measurement: Bool = false, prefix: String = "", suffix: String = "") -> Range<Int> {
            let start = bytes.count
            bytes += Array(prefix.utf8)
            LineProtocolEncoder.appendEscaped(text, measurement: measurement, to: &bytes)
            bytes += Array(suffix.utf8)
            return start..<bytes.count
        }
        func from(_ t: RecordTemplate) -> Value {
            if t.parts.count == 1, case .field(let f) = t.parts[0] { return .field(f) }
            templates.append(t)
            return .template(templates.count - 1)
        }
        measurementFrom = self.measurement.isConstant ? .fixed(escaped(measurement, measurement: true)) : from(self.measurement)
        var named: [(String, Value)] = []
        for (k, v) in given {
            let t = RecordTemplate(v, allowed: LineProtocolEncoder.fields)
            if !t.isConstant {
                named.append((k, from(t)))
            } else if !v.isEmpty {
                named.append((k, .fixed(escaped(v))))
            }
        }
        named += [("unit", .unit), ("source", .source), ("device", .device), ("activity", .activity)]
        if !phoneTag.isEmpty { named.append((phoneTag, .phone)) }
        let sorted = LineProtocolEncoder.sortedByKey(named)
        tags = sorted.map { k, v in Tag(key: escaped(k, prefix: ",", suffix: "="), value: v) }
        tagNames = sorted.map(\.0)
        self.bytes = bytes
        self.templates = templates
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

    /// Appends the record's point (with its line feed) to `out`, or says why it has none: no
    /// start, or nothing to write as a field. Its strings are written from where they lie in the
    /// record's line (`Record.withText`): no string is made for them.
    func encode(_ r: Record, into out: inout [UInt8]) -> Encoded {
        var isWorkout = false
        r.withText(.kind) { kind in
            isWorkout = kind.map { $0.count == 7 && memcmp($0.baseAddress!, "workout", 7) == 0 } ?? false
        }
        guard let start = r.start else { return .cannot("a \(r.kind) without a start time has no place in a time series") }
        let value = isWorkout ? nil : r.value
        let workout = isWorkout ? (r.durationS, r.energyKcal, r.distanceM) : (nil, nil, nil)
        if isWorkout {
            if workout.0 == nil && workout.1 == nil && workout.2 == nil {
                return .cannot("a workout record with no value has no field to write")
            }
        } else if value == nil {
            return .cannot("a \(r.kind) record with no value has no field to write")
        } else if let d = value?.number, !d.isFinite {
            return .cannot("the value is not a finite number")
        }
        // The sink's tags and the record's labels, both sorted, merged; a label named as one of
        // the sink's tags gives way to it.
        let labels =
            r.tags.isEmpty
            ? []
            : LineProtocolEncoder.sortedByKey(
                r.tags.filter { l in !tagNames.contains(l.name) }
                    .map { ($0.name, $0.value) })
        var next = 0
        func label(before name: String?) {
            while next < labels.count, name.map({ labels[next].0 < $0 }) ?? true {
                if !labels[next].1.isEmpty {
                    out.append(UInt8(ascii: ","))
                    LineProtocolEncoder.appendEscaped(labels[next].0, to: &out)
                    out.append(UInt8(ascii: "="))
                    LineProtocolEncoder.appendEscaped(labels[next].1, to: &out)
                }
                next += 1
            }
        }
        // The source's app and device read once for the measurement and the tags that need them.
        r.withSource { app, device in
            bytes.withUnsafeBytes { bytes in
                if case .fixed(let range) = measurementFrom {
                    out.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[range]))
                } else {
                    write(measurementFrom, of: r, isWorkout: isWorkout, source: (app, device)) {
                        LineProtocolEncoder.appendEscaped($0 ?? UnsafeRawBufferPointer(start: nil, count: 0), measurement: true, to: &out)
                    }
                }
                for (i, tag) in tags.enumerated() {
                    if !labels.isEmpty { label(before: tagNames[i]) }
                    if case .fixed(let range) = tag.value {
                        out.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[tag.key]))
                        out.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[range]))
                        continue
                    }
                    write(tag.value, of: r, isWorkout: isWorkout, source: (app, device)) { v in
                        guard let v, !v.isEmpty else { return }
                        out.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[tag.key]))
                        LineProtocolEncoder.appendEscaped(v, to: &out)
                    }
                }
            }
        }
        if !labels.isEmpty { label(before: nil) }
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
            if let d = workout.0 { field("duration_s") { LineProtocolEncoder.appendFloat(d, to: &$0) } }
            if let e = workout.1 { field("energy_kcal") { LineProtocolEncoder.appendFloat(e, to: &$0) } }
            if let d = workout.2 { field("distance_m") { LineProtocolEncoder.appendFloat(d, to: &$0) } }
        } else {
            switch value {
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

    /// A tag's or the measurement's text for the record, where it lies (nil: none); `source`: the
    /// record's source app and device.
    private func write(
        _ v: Value, of r: Record, isWorkout: Bool,
        source: (app: UnsafeRawBufferPointer?, device: UnsafeRawBufferPointer?),
        _ body: (UnsafeRawBufferPointer?) -> Void
    ) {
        switch v {
        case .fixed(let range): bytes.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[range])) }
        case .field(let f):
            switch f {
            case .type: r.withText(.type, body)
            case .kind: r.withText(.kind, body)
            case .receiver: r.withText(.receiver, body)
            case .phone, .device: r.withText(.device, body)
            case .source: body(source.app)
            case .unit: r.withText(.unit, body)
            case .date: body(nil) // not allowed here
            }
        case .template(let t): templates[t].render(r, LineProtocolEncoder.value).withUTF8Bytes { body(UnsafeRawBufferPointer($0)) }
        case .unit: r.withText(.unit, body)
        case .source: body(source.app)
        case .device: body(source.device)
        case .activity: isWorkout ? r.withText(.activity, body) : body(nil)
        case .phone: r.withText(.device, body)
        }
    }

    static func value(_ f: RecordTemplate.Field, _ r: Record) -> String {
        switch f {
        case .type: r.type
        case .kind: r.kind
        case .receiver: r.receiver
        case .phone, .device: r.device
        case .source: r.source?.app ?? ""
        case .unit: r.unit ?? ""
        case .date: "" // not allowed here
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

    // The escapes and numbers of the record path, written by `LineProtocolBytes` as the line
    // path writes them: one escaper for the sink's output.

    /// A whole number as an integer literal without a fraction (as Syncky writes it: `value=412`),
    /// anything else in Swift's shortest round-trip form.
    static func appendFloat(_ d: Double, to out: inout [UInt8]) {
        LineProtocolBytes.append(to: &out, atMost: LineProtocolBytes.lineNumberBound) { $0.float(d) }
    }

    static func appendInt(_ v: Int64, to out: inout [UInt8]) {
        LineProtocolBytes.append(to: &out, atMost: LineProtocolBytes.lineNumberBound) { $0.int(v) }
    }

    /// A string field value: quoted, `"`, `\\` and line feeds escaped.
    static func appendString(_ s: String, to out: inout [UInt8]) {
        s.withUTF8Bytes { p in
            LineProtocolBytes.append(to: &out, atMost: 2 * p.count + 2) { $0.string(UnsafeRawBufferPointer(p)) }
        }
    }

    /// Measurement: `,` and space; tag keys and values, field keys: `,`, `=` and space. Tabs and
    /// line breaks become spaces; a trailing backslash (which cannot round-trip) is dropped; an
    /// empty name becomes `_`. (UTF-8 continuation bytes are never ASCII, so bytewise is safe.)
    static func appendEscaped(_ s: String, measurement: Bool = false, to out: inout [UInt8]) {
        s.withUTF8Bytes { appendEscaped(UnsafeRawBufferPointer($0), measurement: measurement, to: &out) }
    }

    static func appendEscaped(_ p: UnsafeRawBufferPointer, measurement: Bool = false, to out: inout [UInt8]) {
        LineProtocolBytes.append(to: &out, atMost: LineProtocolBytes.escapedBound(p.count)) { $0.escaped(p, measurement: measurement) }
    }
}
