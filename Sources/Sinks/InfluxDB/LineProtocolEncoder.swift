import Glibc
import CanonicalJSON
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

    let measurement: RecordTemplate
    let phoneTag: String
    /// Tags whose value is the same on every point, and tags whose value is a template.
    let staticTags: [(String, String)]
    let templatedTags: [(String, RecordTemplate)]
    let precision: InfluxDBSinkConfig.Precision
    /// Every tag a point can have (but the labels routes add), sorted by key once: a record's
    /// line is then written tag by tag, with no tag list made, sorted or filtered per record.
    let slots: [Slot]
    /// The measurement when it is one field or fixed text (escaped), for `encode(_:CanonicalView)`'s
    /// one write; nil for a template of several parts.
    let simpleMeasurement: SimpleMeasurement?
    /// Whether every templated tag is one field (`encode(_:CanonicalView)` then writes each from
    /// the line's bytes as they are).
    let simpleTags: Bool
    /// The bytes the slots' keys and fixed values take, each with its `,` and `=`.
    let slotBytes: Int

    enum SimpleMeasurement: Sendable {
        case field(RecordTemplate.Field)
        case fixed([UInt8])
    }

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
        let m = self.measurement
        if m.parts.count == 1, case .field(let f) = m.parts[0] {
            simpleMeasurement = .field(f)
        } else if m.isConstant {
            var escaped: [UInt8] = []
            LineProtocolEncoder.appendEscaped(m.parts.map { if case .text(let t) = $0 { t } else { "" } }.joined(), measurement: true,
                                              to: &escaped)
            simpleMeasurement = .fixed(escaped)
        } else {
            simpleMeasurement = nil
        }
        simpleTags = templatedTags.allSatisfy { _, t in t.parts.count == 1 && { if case .field = t.parts[0] { true } else { false } }() }
        slotBytes = slots.reduce(0) { n, slot in
            if case .fixed(let v) = slot.value { return n + slot.key.count + 2 + v.count }
            return n + slot.key.count + 2
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
        switch r.value {
        case .string(let s)? where !isWorkout:
            s.withUTF8Bytes {
                appendFields(isWorkout: false, number: nil, name: UnsafeRawBufferPointer($0), code: r.code, start: start, to: &out)
            }
        default:
            appendFields(isWorkout: isWorkout, durationS: r.durationS, energyKcal: r.energyKcal, distanceM: r.distanceM,
                         number: r.value?.number, name: nil, code: nil, start: start, to: &out)
        }
        return .line(seriesEnd: seriesEnd, timeNanos: start.unixNanoseconds)
    }

    /// The fields, the time and the line feed: a workout's numbers, or the value (a number, or a
    /// category's code and name).
    func appendFields(isWorkout: Bool, durationS: Double? = nil, energyKcal: Double? = nil, distanceM: Double? = nil,
                      number: Double?, name: UnsafeRawBufferPointer?, code: Int?, start: Timestamp, to out: inout [UInt8]) {
        var separator = UInt8(ascii: " ")
        func field(_ key: StaticString, _ write: (inout [UInt8]) -> Void) {
            out.append(separator)
            separator = UInt8(ascii: ",")
            key.withUTF8Buffer { out.append(contentsOf: $0) }
            out.append(UInt8(ascii: "="))
            write(&out)
        }
        if isWorkout {
            if let d = durationS { field("duration_s") { LineProtocolEncoder.appendFloat(d, to: &$0) } }
            if let e = energyKcal { field("energy_kcal") { LineProtocolEncoder.appendFloat(e, to: &$0) } }
            if let d = distanceM { field("distance_m") { LineProtocolEncoder.appendFloat(d, to: &$0) } }
        } else if let d = number {
            field("value") { LineProtocolEncoder.appendFloat(d, to: &$0) }
        } else if let name {
            if let code { field("value") { LineProtocolEncoder.appendInt(Int64(code), to: &$0) } }
            field("value_name") { LineProtocolEncoder.appendString(bytes: name, to: &$0) }
        }
        out.append(UInt8(ascii: " "))
        LineProtocolEncoder.appendInt(timestamp(start), to: &out)
        out.append(UInt8(ascii: "\n"))
    }

    /// `encode` of the record at `record`, read where it lies (`CanonicalRecord.inPlace`).
    func encode(at record: UnsafePointer<CanonicalRecord>, into out: inout [UInt8]) -> Encoded {
        CanonicalRecord.inPlace(record) { encode($0, into: &out) }
    }

    /// `encode` of a record from its journal line's fields (`CanonicalView`), written straight
    /// from the line's bytes: the same line as `encode` writes for the record the line decodes
    /// to, without the record (no string made, no record moved, for each sample the drain sends).
    func encode(_ v: CanonicalView, into out: inout [UInt8]) -> Encoded {
        let isWorkout = v.kind.count == 7 && memcmp(v.kind.baseAddress!, "workout", 7) == 0
        guard let start = v.start else {
            return .cannot("a \(String(decoding: v.kind, as: UTF8.self)) without a start time has no place in a time series")
        }
        if isWorkout {
            if v.durationS == nil && v.energyKcal == nil && v.distanceM == nil {
                return .cannot("a workout record with no value has no field to write")
            }
        } else {
            switch v.value {
            case .number(let d, _)?: if !d.isFinite { return .cannot("the value is not a finite number") }
            case .string?: break
            case nil: return .cannot("a \(String(decoding: v.kind, as: UTF8.self)) record with no value has no field to write")
            }
        }
        if v.labels == nil, simpleTags, let simpleMeasurement {
            return encodeAtOnce(v, measurement: simpleMeasurement, start: start, isWorkout: isWorkout, into: &out)
        }
        render(measurement, v, measurement: true, into: &out)
        if v.labels == nil {
            for slot in slots { append(slot, of: v, isWorkout: isWorkout, to: &out) }
        } else {
            func text(_ b: UnsafeRawBufferPointer?) -> String? { b.map { String(decoding: $0, as: UTF8.self) } }
            var labels: [(String, String)] = []
            v.forEachLabel { labels.append((String(decoding: $0, as: UTF8.self), String(decoding: $1, as: UTF8.self))) }
            appendTags(templated: templatedTags.map { k, t in
                var rendered: [UInt8] = []
                LineProtocolEncoder.render(t, v, into: &rendered)
                return (k, String(decoding: rendered, as: UTF8.self))
            }, unit: text(v.unit), app: text(v.sourceApp), device: text(v.sourceDevice), activity: isWorkout ? text(v.activity) : nil,
                       phone: String(decoding: v.device, as: UTF8.self), labels: labels, to: &out)
        }
        let seriesEnd = out.count
        switch v.value {
        case .string(let name)? where !isWorkout:
            appendFields(isWorkout: false, number: nil, name: name, code: v.code, start: start, to: &out)
        case .number(let d, _)?:
            appendFields(isWorkout: isWorkout, durationS: v.durationS, energyKcal: v.energyKcal, distanceM: v.distanceM,
                         number: d, name: nil, code: nil, start: start, to: &out)
        default:
            appendFields(isWorkout: isWorkout, durationS: v.durationS, energyKcal: v.energyKcal, distanceM: v.distanceM,
                         number: nil, name: nil, code: nil, start: start, to: &out)
        }
        return .line(seriesEnd: seriesEnd, timeNanos: start.unixNanoseconds)
    }

    /// `encode(_:CanonicalView)` where the measurement is one field or fixed, every templated tag
    /// one field and the record has no labels (most lines): the whole line in one write
    /// (`LineProtocolBytes`), its room made once.
    private func encodeAtOnce(_ v: CanonicalView, measurement m: SimpleMeasurement, start: Timestamp, isWorkout: Bool,
                              into out: inout [UInt8]) -> Encoded {
        let none = UnsafeRawBufferPointer(start: nil, count: 0)
        var strings = v.type.count + v.kind.count + v.receiver.count + 2 * v.device.count + (v.unit?.count ?? 0)
            + 2 * (v.sourceApp?.count ?? 0) + (v.sourceDevice?.count ?? 0) + (v.activity?.count ?? 0)
        strings += templatedTags.count * max(v.type.count, v.kind.count, v.receiver.count, v.device.count, v.unit?.count ?? 0,
                                             v.sourceApp?.count ?? 0)
        if case .string(let name)? = v.value { strings += name.count }
        if case .fixed(let bytes) = m { strings += bytes.count }
        let bound = 2 * strings + slotBytes + slots.count + 4 * LineProtocolBytes.numberBound + 64
        let before = out.count
        let seriesEnd = before + LineProtocolBytes.append(to: &out, atMost: bound) { w -> Int in
            switch m {
            case .field(let f): w.escaped(LineProtocolEncoder.value(f, v), measurement: true)
            case .fixed(let bytes): w.raw(bytes)
            }
            for slot in slots {
                let value: UnsafeRawBufferPointer
                switch slot.value {
                case .fixed(let bytes):
                    w.byte(UInt8(ascii: ","))
                    w.raw(slot.key)
                    w.byte(UInt8(ascii: "="))
                    w.raw(bytes)
                    continue
                case .template(let t):
                    guard case .field(let f) = t.parts[0] else { continue }
                    value = LineProtocolEncoder.value(f, v)
                case .unit: value = v.unit ?? none
                case .source: value = v.sourceApp ?? none
                case .device: value = v.sourceDevice ?? none
                case .activity: value = isWorkout ? v.activity ?? none : none
                case .phone: value = v.device
                }
                if value.isEmpty { continue }
                w.byte(UInt8(ascii: ","))
                w.raw(slot.key)
                w.byte(UInt8(ascii: "="))
                w.escaped(value, measurement: false)
            }
            let seriesEnd = w.count
            var separator = UInt8(ascii: " ")
            func key(_ name: StaticString) {
                w.byte(separator)
                separator = UInt8(ascii: ",")
                w.lit(name)
            }
            if isWorkout {
                if let d = v.durationS { key("duration_s="); w.float(d) }
                if let e = v.energyKcal { key("energy_kcal="); w.float(e) }
                if let d = v.distanceM { key("distance_m="); w.float(d) }
            } else {
                switch v.value {
                case .number(let d, _)?:
                    key("value=")
                    w.float(d)
                case .string(let name)?:
                    if let code = v.code {
                        key("value=")
                        w.int(Int64(code))
                    }
                    key("value_name=")
                    w.string(name)
                case nil:
                    break
                }
            }
            w.byte(UInt8(ascii: " "))
            w.int(timestamp(start))
            w.byte(UInt8(ascii: "\n"))
            return seriesEnd
        }
        return .line(seriesEnd: seriesEnd, timeNanos: start.unixNanoseconds)
    }

    /// A template's text for the record of `v`, escaped (as a measurement or a tag value).
    func render(_ t: RecordTemplate, _ v: CanonicalView, measurement: Bool, into out: inout [UInt8]) {
        if t.parts.count == 1, case .field(let f) = t.parts[0] {
            LineProtocolEncoder.appendEscaped(bytes: LineProtocolEncoder.value(f, v).assumingMemoryBound(to: UInt8.self),
                                              measurement: measurement, to: &out)
            return
        }
        var text: [UInt8] = []
        LineProtocolEncoder.render(t, v, into: &text)
        text.withUnsafeBufferPointer { LineProtocolEncoder.appendEscaped(bytes: $0, measurement: measurement, to: &out) }
    }

    /// A template's text for the record of `v`, as it is (not escaped).
    static func render(_ t: RecordTemplate, _ v: CanonicalView, into out: inout [UInt8]) {
        for p in t.parts {
            switch p {
            case .text(let s): out.append(contentsOf: s.utf8)
            case .field(let f): out.append(contentsOf: value(f, v))
            }
        }
    }

    static func value(_ f: RecordTemplate.Field, _ v: CanonicalView) -> UnsafeRawBufferPointer {
        let none = UnsafeRawBufferPointer(start: nil, count: 0)
        switch f {
        case .type: return v.type
        case .kind: return v.kind
        case .receiver: return v.receiver
        case .phone, .device: return v.device
        case .source: return v.sourceApp ?? none
        case .unit: return v.unit ?? none
        case .date: return none   // not allowed here
        }
    }

    /// `,key=value` for a slot whose value the record of `v` has.
    @inline(__always)
    func append(_ slot: Slot, of v: CanonicalView, isWorkout: Bool, to out: inout [UInt8]) {
        func tag(_ value: UnsafeRawBufferPointer?) {
            guard let value, !value.isEmpty else { return }
            out.append(UInt8(ascii: ","))
            out.append(contentsOf: slot.key)
            out.append(UInt8(ascii: "="))
            LineProtocolEncoder.appendEscaped(bytes: value.assumingMemoryBound(to: UInt8.self), measurement: false, to: &out)
        }
        switch slot.value {
        case .fixed(let value):
            out.append(UInt8(ascii: ","))
            out.append(contentsOf: slot.key)
            out.append(UInt8(ascii: "="))
            out.append(contentsOf: value)
        case .template(let t):
            var text: [UInt8] = []
            LineProtocolEncoder.render(t, v, into: &text)
            text.withUnsafeBytes { tag($0) }
        case .unit: tag(v.unit)
        case .source: tag(v.sourceApp)
        case .device: tag(v.sourceDevice)
        case .activity: if isWorkout { tag(v.activity) }
        case .phone: tag(v.device)
        }
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
        appendTags(templated: templatedTags.map { ($0.0, $0.1.render(r, LineProtocolEncoder.value)) }, unit: r.unit,
                   app: r.source?.app, device: r.source?.device, activity: isWorkout ? r.activity : nil, phone: r.device,
                   labels: r.tags.map { ($0.name, $0.value) }, to: &out)
    }

    /// The tags of a labelled record from their values: the sink's own, then the labels whose
    /// names are not taken, sorted by key and written (the empty ones left out).
    func appendTags(templated: [(String, String)], unit: String?, app: String?, device: String?, activity: String?, phone: String,
                    labels: [(String, String)], to out: inout [UInt8]) {
        var tags: [(String, String)] = staticTags + templated
        if let u = unit, !u.isEmpty { tags.append(("unit", u)) }
        if let a = app, !a.isEmpty { tags.append(("source", a)) }
        if let d = device, !d.isEmpty { tags.append(("device", d)) }
        if let a = activity, !a.isEmpty { tags.append(("activity", a)) }
        if !phoneTag.isEmpty { tags.append((phoneTag, phone)) }
        for (name, value) in labels where !tags.contains(where: { $0.0 == name }) { tags.append((name, value)) }
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
        s.withUTF8Bytes { appendString(bytes: UnsafeRawBufferPointer($0), to: &out) }
    }

    static func appendString(bytes: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for c in bytes {
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
    /// `healthgate-bench --micro`'s InfluxDB lines: each journal line read as the sink reads it
    /// (`CanonicalView`) and its line protocol written (Syncky's schema, a phone tag). Returns the
    /// bytes of line protocol made.
    public static func encodeBench(_ ndjson: [UInt8]) -> Int {
        let encoder = LineProtocolEncoder(measurement: "{type}", phoneTag: "phone", tags: [], precision: .ns)
        var out: [UInt8] = []
        out.reserveCapacity(ndjson.count)
        ndjson.withUnsafeBytes { all in
            guard let base = all.baseAddress else { return }
            var from = 0
            while from < all.count, let feed = memchr(base + from, 0x0A, all.count - from) {
                let end = UnsafeRawPointer(feed) - base
                if let v = CanonicalView.read(UnsafeRawBufferPointer(rebasing: all[from..<end])) { _ = encoder.encode(v, into: &out) }
                from = end + 1
            }
        }
        return out.count
    }
}
