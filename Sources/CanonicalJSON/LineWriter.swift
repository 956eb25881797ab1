import Glibc
import HealthgateCore

/// The canonical record as one line of NDJSON: the journal's payload, the file sink's lines
/// and `replay`'s input. (Reading it back needs a JSON parser: `CanonicalJSON`.)
extension CanonicalRecord {
    /// Appends this record as one line of canonical NDJSON, with its line feed. Written byte by
    /// byte: the keys are fixed ASCII, so only values need escaping, and this runs once per
    /// sample on the ingest path. Field order is fixed, so equal records give equal bytes.
    public func appendNDJSON(to out: inout [UInt8]) {
        JSONBytes.append(to: &out, atMost: ndjsonBound) { o in
            writeMembers(&o, only: .all)
            o.lit("}\n")
        }
    }

    /// At most how many bytes `appendNDJSON` writes: every string escaped at its worst (6
    /// bytes a byte), every number and time at its longest, every key.
    var ndjsonBound: Int { ndjsonBound(only: .all) }

    /// At most how many bytes `writeMembers(only:)` writes.
    func ndjsonBound(only: Fields) -> Int {
        func s(_ t: String?) -> Int { t.map { JSONBytes.bound($0) } ?? 0 }
        var n = 400 + 9 * JSONBytes.numberBound
        if only.has(.op) { n += s(op.rawValue) }
        if only.has(.kind) { n += s(kind) }
        if only.has(.device) { n += s(device) }
        if only.has(.receiver) { n += s(receiver) }
        if only.has(.uuid) { n += s(uuid) }
        if only.has(.type) { n += s(type) }
        if only.has(.value), case .string(let v)? = value { n += s(v) }
        if only.has(.unit) { n += s(unit) }
        if only.has(.timeZone) { n += s(timeZone) }
        if only.has(.activity) { n += s(activity) }
        if only.has(.fields) { for f in fields { n += s(f.name) + f.value.bytes.count + 2 } }
        if only.has(.source), let source { n += s(source.app) + s(source.device) }
        if only.has(.tags) { for t in tags { n += s(t.name) + s(t.value) + 2 } }
        if only.has(.metadata) { n += metadata?.bytes.count ?? 0 }
        if only.has(.extra) { for f in extra { n += s(f.name) + f.value.bytes.count + 2 } }
        return n
    }

    /// Writes the members of the fields in `only` (those the record has), each `,"key":value`
    /// but `op`, which opens the object: `{"op":…`. The object's closing `}` is the caller's.
    func writeMembers(_ o: inout JSONBytes, only: Fields) {
        @inline(__always) func writes(_ f: Field) -> Bool { only.has(f) }
        // Every member in the order of `Field` (LINE.md): `LineWalk` walks the lines in that
        // order, and refuses any other.
        if writes(.op) { o.lit("{\"op\":"); o.str(op.rawValue) }
        if writes(.kind) { o.lit(",\"kind\":"); o.str(kind) }
        if writes(.device) { o.lit(",\"device\":"); o.str(device) }
        if writes(.receiver) { o.lit(",\"receiver\":"); o.str(receiver) }
        if writes(.uuid) { o.lit(",\"uuid\":"); o.str(uuid) }
        if writes(.type) { o.lit(",\"type\":"); o.str(type) }
        if writes(.part), let v = part { o.lit(",\"part\":"); o.int(Int64(v)) }
        if writes(.parts), let v = parts { o.lit(",\"parts\":"); o.int(Int64(v)) }
        if writes(.start), let v = start { o.lit(",\"start\":"); o.time(v) }
        if writes(.end), let v = end { o.lit(",\"end\":"); o.time(v) }
        if writes(.utcOffset), let v = utcOffset { o.lit(",\"utc_offset\":"); o.offset(v) }
        if writes(.timeZone), let v = timeZone { o.lit(",\"timezone\":"); o.str(v) }
        if writes(.value) {
            switch value {
            case .number(let d)?: o.lit(",\"value\":"); o.double(d)
            case .string(let s)?: o.lit(",\"value\":"); o.str(s)
            case nil: break
            }
        }
        if writes(.unit), let v = unit { o.lit(",\"unit\":"); o.str(v) }
        if writes(.code), let v = code { o.lit(",\"code\":"); o.int(Int64(v)) }
        if writes(.activity), let v = activity { o.lit(",\"activity\":"); o.str(v) }
        if writes(.durationS), let v = durationS { o.lit(",\"duration_s\":"); o.double(v) }
        if writes(.energyKcal), let v = energyKcal { o.lit(",\"energy_kcal\":"); o.double(v) }
        if writes(.distanceM), let v = distanceM { o.lit(",\"distance_m\":"); o.double(v) }
        if writes(.fields) {
            for f in fields {
                o.byte(0x2C); o.str(f.name); o.byte(0x3A); o.raw(f.value.bytes)
            }
        }
        if writes(.source), let s = source {
            o.lit(",\"source\":{")
            var first = true
            if let a = s.app { o.lit("\"app\":"); o.str(a); first = false }
            if let d = s.device {
                if !first { o.byte(0x2C) }
                o.lit("\"device\":"); o.str(d)
            }
            o.byte(0x7D)
        }
        if writes(.tags), !tags.isEmpty {
            CanonicalRecord.writeTags(tags, to: &o)
        }
        if writes(.metadata), let m = metadata { o.lit(",\"metadata\":"); o.raw(m.bytes) }
        if writes(.extra), !extra.isEmpty {
            o.lit(",\"extra\":{")
            for (i, f) in extra.enumerated() {
                if i > 0 { o.byte(0x2C) }
                o.str(f.name); o.byte(0x3A); o.raw(f.value.bytes)
            }
            o.byte(0x7D)
        }
    }

    /// `,"tags":{…}`.
    static func writeTags(_ tags: [RecordTag], to o: inout JSONBytes) {
        o.lit(",\"tags\":{")
        for (i, t) in tags.enumerated() {
            if i > 0 { o.byte(0x2C) }
            o.str(t.name); o.byte(0x3A); o.str(t.value)
        }
        o.byte(0x7D)
    }

    /// A record's fields in the order its canonical line holds them.
    public enum Field: Int, Comparable, Sendable, CaseIterable {
        case op, kind, device, receiver, uuid, type, part, parts, start, end, utcOffset, timeZone, value, unit, code, activity,
            durationS, energyKcal, distanceM, fields, source, tags, metadata, extra

        public static func < (a: Field, b: Field) -> Bool { a.rawValue < b.rawValue }
    }

    /// A set of fields: those a transform may change.
    public struct Fields: OptionSet, Sendable {
        public let rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        /// None (not the variadic form with no fields: that one builds an array).
        public init() { rawValue = 0 }
        public init(_ fields: Field...) { self.init(rawValue: fields.reduce(0) { $0 | 1 << UInt32($1.rawValue) }) }
        @inlinable public func has(_ f: Field) -> Bool { rawValue & 1 << UInt32(f.rawValue) != 0 }
        @inlinable public mutating func insert(_ f: Field) { self = Fields(rawValue: rawValue | 1 << UInt32(f.rawValue)) }
        public static let all = Fields(rawValue: 1 << UInt32(Field.allCases.count) - 1)
        /// Every field.
        @inlinable public var isAll: Bool { rawValue == Fields.all.rawValue }
    }
}

extension CanonicalRecord {
    /// The names the canonical record itself uses at its top level.
    public static let canonicalFieldNames: Set<String> = Set(Field.allCases.filter { $0 != .fields }.map { "\($0.key)" })

    /// Keeps a field of the record's kind at the top level (`fields`), unless its name is one the
    /// canonical record uses for something else: then it goes under `extra`, so a sender's
    /// `"kind"` or `"code"` can never change or break the record.
    public mutating func addKindField(_ name: String, _ value: RawJSON) {
        if CanonicalRecord.canonicalFieldNames.contains(name) {
            extra.append(RecordField(name, value))
        } else {
            fields.append(RecordField(name, value))
        }
    }
}
