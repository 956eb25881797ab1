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

    /// The fields of a record a point is made of (the line, the point index and deletes use
    /// none of the phone's own JSON, nor the end, the UTC offset or the count of parts: a point
    /// is at its start): what the lines not written from their bytes are decoded for.
    static let reads = CanonicalRecord.Fields.all.subtracting(
        CanonicalRecord.Fields(.fields, .metadata, .extra, .end, .utcOffset, .parts))

    let measurement: RecordTemplate
    let phoneTag: String
    /// Tags whose value is the same on every point, and tags whose value is a template.
    let staticTags: [(String, String)]
    let templatedTags: [(String, RecordTemplate)]
    let precision: InfluxDBSinkConfig.Precision
    /// The measurement, when it and every templated tag are one field or fixed text: then a
    /// point is written straight from its journal line (`encode(_:CanonicalView)`); nil when
    /// some template joins several parts (such points are written from their records).
    let lineMeasurement: LineMeasurement?
    /// Every tag a point can have (but the labels routes add), sorted by key once: a line —
    /// from its view or its record — is then written tag by tag, with no tag list made, sorted or
    /// filtered per point.
    let lineSlots: LineSlots
    /// The bytes the slots' keys and fixed values take, each with its `,` and `=`.
    var slotBytes: Int { lineSlots.textBytes }

    /// Each slot's `,key=` (with a fixed value, all of `,key=value`) in one buffer made once,
    /// and where its value comes from, as plain values: the slots' arrays and enums with arrays
    /// in them were retained and released for every tag of every point. (Sendable: never
    /// changed after `init`.)
    final class LineSlots: @unchecked Sendable {
        /// A tag's value: fixed (in the slot's text), one field, a template that joins several
        /// parts (only records are written with those), or one of the sink's own tags.
        enum From { case fixed, field(RecordTemplate.Field), template, unit, source, device, activity, phone }
        struct Slot {
            var start: Int
            var count: Int
            var from: From
            /// A `.template` slot's place in `templates` (no payload on `From`: a second one made
            /// the view path's walk of the slots ~60 instructions a point slower).
            var template: Int = 0
        }
        let text: UnsafeMutableRawBufferPointer
        let slots: UnsafeMutableBufferPointer<Slot>
        let count: Int
        /// The bytes of every slot's text together.
        let textBytes: Int
        /// The templates that join several parts, by `Slot.template`.
        let templates: [RecordTemplate]

        init(_ slots: [LineProtocolEncoder.Slot]) {
            var text: [UInt8] = []
            var made: [Slot] = []
            var templates: [RecordTemplate] = []
            for slot in slots {
                let start = text.count
                text.append(UInt8(ascii: ","))
                text += slot.key
                text.append(UInt8(ascii: "="))
                let from: From
                var template = 0
                switch slot.value {
                case .fixed(let bytes):
                    text += bytes
                    from = .fixed
                case .template(let t):
                    if t.parts.count == 1, case .field(let f) = t.parts[0] {
                        from = .field(f)
                    } else {
                        from = .template
                        template = templates.count
                        templates.append(t)
                    }
                case .unit: from = .unit
                case .source: from = .source
                case .device: from = .device
                case .activity: from = .activity
                case .phone: from = .phone
                }
                made.append(Slot(start: start, count: text.count - start, from: from, template: template))
            }
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(text.count, 1), alignment: 8)
            text.withUnsafeBytes { buffer.copyMemory(from: $0) }
            let table = UnsafeMutableBufferPointer<Slot>.allocate(capacity: max(made.count, 1))
            _ = table.initialize(from: made)
            self.text = buffer
            self.slots = table
            self.count = made.count
            textBytes = text.count
            self.templates = templates
        }

        /// A slot's `,key=` (a static tag's `,key=value`).
        @inline(__always) func prefix(_ s: Slot) -> UnsafeRawBufferPointer {
            UnsafeRawBufferPointer(start: text.baseAddress! + s.start, count: s.count)
        }

        deinit {
            text.deallocate()
            slots.deallocate()
        }
    }

    enum LineMeasurement: Sendable {
        case field(RecordTemplate.Field)
        /// Fixed text, escaped.
        case fixed([UInt8])
    }

    /// One tag, its key escaped, and where its value comes from (what `LineSlots` is made of).
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
        let slots = LineProtocolEncoder.sortedByKey(named).map { k, v in
            var key: [UInt8] = []
            LineProtocolEncoder.appendEscaped(k, to: &key)
            return Slot(key: key, value: v)
        }
        let oneField = { (t: RecordTemplate) -> RecordTemplate.Field? in
            if t.parts.count == 1, case .field(let f) = t.parts[0] { return f }
            return nil
        }
        let m = self.measurement
        if templatedTags.contains(where: { oneField($0.1) == nil }) {
            lineMeasurement = nil
        } else if let f = oneField(m) {
            lineMeasurement = .field(f)
        } else if m.isConstant {
            var escaped: [UInt8] = []
            LineProtocolEncoder.appendEscaped(m.parts.map { if case .text(let t) = $0 { t } else { "" } }.joined(), measurement: true,
                                              to: &escaped)
            lineMeasurement = .fixed(escaped)
        } else {
            lineMeasurement = nil
        }
        lineSlots = LineSlots(slots)
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

    /// Why a record cannot be a point, if it cannot: no start, or nothing to write as a field.
    static func refusal(kind: () -> String, hasStart: Bool, isWorkout: Bool, hasWorkoutValue: Bool, number: Double?,
                        hasValue: Bool) -> String? {
        guard hasStart else { return "a \(kind()) without a start time has no place in a time series" }
        if isWorkout { return hasWorkoutValue ? nil : "a workout record with no value has no field to write" }
        if let d = number, !d.isFinite { return "the value is not a finite number" }
        return hasValue ? nil : "a \(kind()) record with no value has no field to write"
    }

    /// Appends the record's line (with its line feed) to `out`, byte by byte (no string is
    /// built per record). The points of plain journal lines are written from the lines
    /// (`encode(_:CanonicalView)`); this writes the others, and must write the same bytes.
    func encode(_ r: CanonicalRecord, into out: inout [UInt8]) -> Encoded {
        let isWorkout = r.kind == RecordKind.workout
        if let why = LineProtocolEncoder.refusal(kind: { r.kind }, hasStart: r.start != nil, isWorkout: isWorkout,
                                                 hasWorkoutValue: r.durationS != nil || r.energyKcal != nil || r.distanceM != nil,
                                                 number: r.value?.number, hasValue: r.value != nil) {
            return .cannot(why)
        }
        let start = r.start!
        let name = measurement.render(r, LineProtocolEncoder.value)
        LineProtocolEncoder.appendEscaped(name, measurement: true, to: &out)
        if r.tags.isEmpty {
            appendSlotTags(of: r, isWorkout: isWorkout, to: &out)
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

    /// `encode` of the record a plain journal line holds, written from the line's bytes
    /// (`CanonicalView`) in one go through a pointer (`LineProtocolBytes`, its room made once):
    /// the same bytes, without a record decoded, moved or destroyed for each point. Nil for a
    /// record with labels, or where a template joins several parts: the caller decodes the line
    /// and writes it from the record.
    func encode(_ v: CanonicalView, into out: inout [UInt8]) -> Encoded? {
        guard v.labels == nil, let m = lineMeasurement else { return nil }
        let isWorkout = v.kind.count == 7 && memcmp(v.kind.baseAddress!, "workout", 7) == 0
        var number: Double?
        if case .number(let d)? = v.value { number = d }
        if let why = LineProtocolEncoder.refusal(kind: { String(decoding: v.kind, as: UTF8.self) }, hasStart: v.start != nil,
                                                 isWorkout: isWorkout,
                                                 hasWorkoutValue: v.durationS != nil || v.energyKcal != nil || v.distanceM != nil,
                                                 number: number, hasValue: v.value != nil) {
            return .cannot(why)
        }
        let start = v.start!
        let none = UnsafeRawBufferPointer(start: nil, count: 0)
        // Every string written is one of the line's, escaped (at most doubled), a field at most
        // once a slot or the measurement.
        var strings = v.type.count + v.kind.count + v.receiver.count + 2 * v.device.count + (v.unit?.count ?? 0)
            + 2 * (v.sourceApp?.count ?? 0) + (v.sourceDevice?.count ?? 0) + (v.activity?.count ?? 0)
        strings += templatedTags.count * max(v.type.count, v.kind.count, v.receiver.count, v.device.count, v.unit?.count ?? 0,
                                             v.sourceApp?.count ?? 0)
        if case .string(let name)? = v.value { strings += name.count }
        if case .fixed(let bytes) = m { strings += bytes.count }
        let bound = 2 * strings + slotBytes + lineSlots.count + 4 * LineProtocolBytes.lineNumberBound + 64
        let before = out.count
        let seriesEnd = before + LineProtocolBytes.append(to: &out, atMost: bound) { w -> Int in
            switch m {
            case .field(let f): w.escaped(LineProtocolEncoder.value(f, v), measurement: true)
            case .fixed(let bytes): w.raw(bytes)
            }
            let table = lineSlots
            for i in 0..<table.count {
                let slot = table.slots[i]
                let value: UnsafeRawBufferPointer
                switch slot.from {
                case .fixed:
                    w.raw(table.prefix(slot))
                    continue
                case .field(let f): value = LineProtocolEncoder.value(f, v)
                case .unit: value = v.unit ?? none
                case .source: value = v.sourceApp ?? none
                case .device: value = v.sourceDevice ?? none
                case .activity: value = isWorkout ? v.activity ?? none : none
                case .phone: value = v.device
                case .template: continue   // never here: such slots make `lineMeasurement` nil
                }
                if value.isEmpty { continue }
                w.raw(table.prefix(slot))
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
                case .number(let d)?:
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

    /// `,key=value` for each slot whose value the record has, from the slots' text as the view
    /// path writes them.
    func appendSlotTags(of r: CanonicalRecord, isWorkout: Bool, to out: inout [UInt8]) {
        let table = lineSlots
        for i in 0..<table.count {
            let slot = table.slots[i]
            let value: String?
            switch slot.from {
            case .fixed:
                out.append(contentsOf: table.prefix(slot))
                continue
            case .field(let f): value = LineProtocolEncoder.value(f, r)
            case .template: value = table.templates[slot.template].render(r, LineProtocolEncoder.value)
            case .unit: value = r.unit
            case .source: value = r.source?.app
            case .device: value = r.source?.device
            case .activity: value = isWorkout ? r.activity : nil
            case .phone: value = r.device
            }
            guard let value, !value.isEmpty else { continue }
            out.append(contentsOf: table.prefix(slot))
            LineProtocolEncoder.appendEscaped(value, to: &out)
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
        s.withUTF8Bytes { p in   // where it lies: no retain a tag
            LineProtocolBytes.append(to: &out, atMost: LineProtocolBytes.escapedBound(p.count)) {
                $0.escaped(UnsafeRawBufferPointer(p), measurement: measurement)
            }
        }
    }
}

extension InfluxDBSink {
    /// `healthgate-bench --micro`'s InfluxDB lines: each journal line split and read as the sink
    /// has them (`CanonicalCodec.lineRanges`, `CanonicalView`) and its line protocol written
    /// (Syncky's schema, a phone tag). Returns the bytes of line protocol made.
    public static func encodeBench(_ ndjson: [UInt8]) -> Int {
        let encoder = LineProtocolEncoder(measurement: "{type}", phoneTag: "phone", tags: [], precision: .ns)
        var out: [UInt8] = []
        out.reserveCapacity(ndjson.count)
        var recentDay = Timestamp.RecentDay()
        var view = CanonicalView()
        ndjson.withUnsafeBytes { all in
            for range in CanonicalCodec.lineRanges(ndjson) {
                let line = UnsafeRawBufferPointer(rebasing: all[range.lowerBound..<(all[range.upperBound - 1] == 0x0A ? range.upperBound - 1 : range.upperBound)])
                if CanonicalView.read(line, recent: &recentDay, into: &view) { _ = encoder.encode(view, into: &out) }
            }
        }
        return out.count
    }
}
