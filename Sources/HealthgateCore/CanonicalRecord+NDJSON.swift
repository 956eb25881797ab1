import Glibc

/// The canonical record as one line of NDJSON: the journal's payload, the file sink's lines
/// and `replay`'s input. (Reading it back needs a JSON parser: `CanonicalJSON`.)
extension CanonicalRecord {
    /// Appends this record as one line of canonical NDJSON, with its line feed. Written byte by
    /// byte: the keys are fixed ASCII, so only values need escaping, and this runs once per
    /// sample on the ingest path. Field order is fixed, so equal records give equal bytes.
    public func appendNDJSON(to out: inout [UInt8]) {
        appendNDJSON(to: &out, tagsText: nil)
    }

    /// `appendNDJSON(to:)`, the labels' text shared with the records before (`TagsText`).
    func appendNDJSON(to out: inout [UInt8], tagsText: TagsText?) {
        JSONBytes.append(to: &out, atMost: ndjsonBound) { o in
            writeMembers(&o, only: .all, tagsText: tagsText)
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
    func writeMembers(_ o: inout JSONBytes, only: Fields, tagsText: TagsText? = nil) {
        @inline(__always) func writes(_ f: Field) -> Bool { only.has(f) }
        // Every member in the order of `Field`: `CanonicalLine` walks the lines in that order, and
        // refuses any other (a change here is a change there).
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
            if let tagsText { tagsText.write(tags, to: &o) } else { CanonicalRecord.writeTags(tags, to: &o) }
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
        case op, kind, device, receiver, uuid, type, part, parts, start, end, utcOffset, value, unit, code, activity,
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

/// What of a record's canonical line the journal's bytes still hold, on its way to a sink.
public enum RecordLine: Sendable {
    /// Nothing known: the record is encoded.
    case none
    /// The whole line (with its line feed), as the journal holds it: the record is unchanged.
    case whole(ArraySlice<UInt8>)
    /// The journal line (with its line feed) of a record whose fields in `changed` may have
    /// changed (none: the line is the record's): those are written anew from the record, every
    /// other member is copied from the line. Where `spans` holds the changed fields, the runs
    /// it spans are written from the record and the bytes around them copied; otherwise the
    /// line is walked for its members (`CanonicalLine`). The record need hold no other field
    /// than those written from it.
    case patched(ArraySlice<UInt8>, changed: CanonicalRecord.Fields, spans: LineSpans)

    /// This line once the record's fields in `changed` changed (nothing of it when it is none).
    public func changing(_ changed: CanonicalRecord.Fields) -> RecordLine {
        if changed.rawValue == 0 { return self }
        switch self {
        case .none: return .none
        case .whole(let bytes): return .patched(bytes, changed: changed, spans: .none)
        case .patched(let bytes, let before, let spans): return .patched(bytes, changed: before.union(changed), spans: spans)
        }
    }
}

extension CanonicalRecord {
    /// Reads the record at `record` where it lies: `body(records[i])` copies the record first
    /// (retaining each of its strings, releasing them after), which cost a sixth of writing a
    /// changed line and a twentieth of the InfluxDB sink's decoding and encoding. `body` must not
    /// write to it: the array behind `record` may be shared (a batch in flight and the next).
    @inlinable public static func inPlace<R>(_ record: UnsafePointer<CanonicalRecord>, _ body: (inout CanonicalRecord) -> R) -> R {
        // Inout access to the pointee is the one the compiler does not copy.
        body(&UnsafeMutablePointer(mutating: record).pointee)
    }

    /// `appendNDJSON(to:reusing:tagsText:)` for the record at `record`, read where it lies (`inPlace`).
    public static func appendNDJSON(at record: UnsafePointer<CanonicalRecord>, to out: inout [UInt8],
                                    reusing line: RecordLine, tagsText: TagsText?) {
        inPlace(record) { $0.appendNDJSON(to: &out, reusing: line, tagsText: tagsText) }
    }

    /// Appends this record's canonical line, with its line feed, reusing what `line` holds
    /// (and the `tags` text of the records before, with `tagsText`).
    public func appendNDJSON(to out: inout [UInt8], reusing line: RecordLine, tagsText: TagsText? = nil) {
        switch line {
        case .none:
            appendNDJSON(to: &out, tagsText: tagsText)
        case .whole(let bytes):
            out.append(contentsOf: bytes)
        case .patched(let bytes, let changed, let spans):
            if changed.rawValue == 0 {
                out.append(contentsOf: bytes)
            } else if spans.first.rawValue != 0 && changed.isSubset(of: spans.fields) {
                appendSpliced(bytes, changed: changed, spans: spans, to: &out, tagsText: tagsText)
            } else if !appendPatched(bytes, changed: changed, to: &out, tagsText: tagsText) {
                // Not a line as the writer writes it: nothing of it is kept. (Lines a sink gets
                // patched walked when they were read, or their records were read whole.)
                appendNDJSON(to: &out, tagsText: tagsText)
            }
        }
    }

    /// `line` with the runs `spans` spans that hold changed fields written from the record
    /// (the others are as the line has them).
    private func appendSpliced(_ line: ArraySlice<UInt8>, changed: Fields, spans: LineSpans, to out: inout [UInt8], tagsText: TagsText?) {
        let first = spans.first.rawValue & changed.rawValue != 0 ? spans.first : Fields()
        let second = spans.second.rawValue & changed.rawValue != 0 ? spans.second : Fields()
        line.withUnsafeBytes { b in
            JSONBytes.append(to: &out, atMost: b.count + ndjsonBound(only: first.union(second))) { o in
                var copied = 0
                @inline(__always) func splice(_ run: Fields, _ start: UInt32, _ end: UInt32) {
                    guard run.rawValue != 0 else { return }
                    o.raw(UnsafeRawBufferPointer(rebasing: b[copied..<Int(start)]))
                    writeMembers(&o, only: run, tagsText: tagsText)
                    copied = Int(end)
                }
                splice(first, spans.firstStart, spans.firstEnd)
                splice(second, spans.secondStart, spans.secondEnd)
                o.raw(UnsafeRawBufferPointer(rebasing: b[copied...]))
            }
        }
    }

    /// `line`'s members in order, each changed one written from the record instead (where the
    /// line has it, or where it belongs when the line lacks it); false, and nothing written,
    /// when the line does not walk.
    private func appendPatched(_ line: ArraySlice<UInt8>, changed: Fields, to out: inout [UInt8], tagsText: TagsText?) -> Bool {
        line.withUnsafeBytes { all -> Bool in
            guard all.count >= 3, all[all.count - 1] == 0x0A else { return false }
            let b = UnsafeRawBufferPointer(rebasing: all[..<(all.count - 1)])
            var walked = false
            JSONBytes.append(to: &out, atMost: b.count + 2 + ndjsonBound(only: changed)) { o in
                let start = o.count
                var walk = CanonicalLine(b)
                var copied = 0   // the line's bytes before this are written (or left out)
                var done: UInt32 = 0   // the fields below this bit are written
                @inline(__always) func below(_ bit: UInt32) -> UInt32 { bit >= 32 ? ~0 : (1 << bit) - 1 }
                while let m = walk.next() {
                    let bit = UInt32(m.field.rawValue)
                    let isChanged = changed.has(m.field)
                    // The changed fields between the last member and this one (and this one's).
                    var due = changed.rawValue & below(bit) & ~below(done)
                    if isChanged && bit >= done { due |= 1 << bit }
                    if due != 0 || isChanged {
                        o.raw(UnsafeRawBufferPointer(rebasing: b[copied..<m.start]))
                        if due != 0 { writeMembers(&o, only: Fields(rawValue: due), tagsText: tagsText) }
                        copied = isChanged ? m.end : m.start
                    }
                    done = max(done, bit + 1)
                }
                guard !walk.failed else {
                    o.truncate(to: start)
                    return
                }
                o.raw(UnsafeRawBufferPointer(rebasing: b[copied..<walk.position]))
                let due = changed.rawValue & ~below(done)
                if due != 0 { writeMembers(&o, only: Fields(rawValue: due), tagsText: tagsText) }
                o.lit("}\n")
                walked = true
            }
            return walked
        }
    }
}

/// The `tags` text of the last record a writer wrote, for the next one: the records a `tag`
/// transform labelled share its one array of labels, so their text is made once a batch, not
/// once a record. An array is known by its storage, held here so that it cannot go and its
/// address come back with other labels.
public final class TagsText {
    private var tags: [RecordTag] = []
    private var text: [UInt8] = []

    public init() {}

    func write(_ tags: [RecordTag], to o: inout JSONBytes) {
        let same = tags.withUnsafeBufferPointer { a in
            self.tags.withUnsafeBufferPointer { b in a.baseAddress == b.baseAddress && a.count == b.count }
        }
        if !same {
            var bound = 16
            for t in tags { bound += JSONBytes.bound(t.name) + JSONBytes.bound(t.value) + 2 }
            text = JSONBytes.bytes(atMost: bound) { CanonicalRecord.writeTags(tags, to: &$0) }
            self.tags = tags
        }
        o.raw(text)
    }
}

/// The writer of JSON text: `ByteWriter` (room made once in a byte array, written through a
/// pointer) with strings escaped as RFC 8259 asks (the same escapes `JSONWriter` makes),
/// numbers in their shortest exact form.
typealias JSONBytes = ByteWriter

extension ByteWriter {
    /// The most `str(s)` writes.
    @inline(__always) public static func bound(_ s: String) -> Int { 6 * s.utf8.count + 2 }
    /// The most `int`, `double` or `time` write.
    public static let numberBound = 40

    /// A string as a JSON string, escaped where it must be (read where it lies: a record's eight
    /// or so strings each took a retain and a release when copied to reach their bytes).
    @inline(__always) public mutating func str(_ s: String) {
        // (Not `withUTF8Bytes`: by callgrind, 1 % more of the receive stage through it, with or
        // without `rethrows`.)
        if s.utf8.withContiguousStorageIfAvailable({ str(UnsafeRawBufferPointer($0)) }) == nil {
            var s = s   // not contiguous UTF-8 (bridged): made so
            s.withUTF8 { str(UnsafeRawBufferPointer($0)) }
        }
    }

    public mutating func str(_ raw: UnsafeRawBufferPointer) {
        let p = raw.assumingMemoryBound(to: UInt8.self)
        room(p.count * 6 + 2)
        var w = base + count
        w.pointee = 0x22
        w += 1
        var i = 0
        let n = p.count
        if let from = p.baseAddress {
            // Eight bytes at a time while none of them needs an escape (most strings
            // have none): one test of the word, one store.
            while i + 8 <= n {
                let word = UnsafeRawPointer(from + i).loadUnaligned(as: UInt64.self)
                if JSONBytes.needsEscape(word) { break }
                UnsafeMutableRawPointer(w).storeBytes(of: word, as: UInt64.self)
                w += 8
                i += 8
            }
        }
        while i < n {
            w = JSONBytes.escape(p[i], at: w)
            i += 1
        }
        w.pointee = 0x22
        written = w + 1 - base
    }

    /// Whether any of the eight bytes is below 0x20, a quote or a backslash (the exact
    /// has-zero-byte and has-byte-less-than tests on the word).
    @inline(__always) static func needsEscape(_ x: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        @inline(__always) func hasZero(_ v: UInt64) -> Bool { (v &- ones) & ~v & highs != 0 }
        return (x &- ones &* 0x20) & ~x & highs != 0 || hasZero(x ^ (ones &* 0x22)) || hasZero(x ^ (ones &* 0x5C))
    }

    /// Writes one byte of a JSON string at `w`, escaped if it must be; returns where the next goes.
    @inline(__always) static func escape(_ b: UInt8, at w: UnsafeMutablePointer<UInt8>) -> UnsafeMutablePointer<UInt8> {
        if b >= 0x20 && b != 0x22 && b != 0x5C {
            w.pointee = b
            return w + 1
        }
        w[0] = 0x5C
        switch b {
        case 0x22, 0x5C: w[1] = b
        case 0x0A: w[1] = 0x6E
        case 0x0D: w[1] = 0x72
        case 0x09: w[1] = 0x74
        case 0x08: w[1] = 0x62
        case 0x0C: w[1] = 0x66
        default:
            let hex: StaticString = "0123456789abcdef"
            w[1] = 0x75; w[2] = 0x30; w[3] = 0x30
            w[4] = hex.utf8Start[Int(b >> 4)]; w[5] = hex.utf8Start[Int(b & 0xF)]
            return w + 6
        }
        return w + 2
    }

    public mutating func double(_ d: Double) {
        if !d.isFinite {
            lit("null")
        } else if d.magnitude <= 9_007_199_254_740_992 && d == Double(Int64(d)) {
            int(Int64(d))
        } else {
            shortest(d)
        }
    }

    /// A UTC offset in seconds as its JSON string, `"+02:00"` (`Timestamp.formatOffset`).
    public mutating func offset(_ seconds: Int) {
        room(8)
        base[count] = 0x22
        let n = Timestamp.formatOffset(seconds, into: UnsafeMutableRawBufferPointer(start: base + count + 1, count: 6))
        base[count + n + 1] = 0x22
        written += n + 2
    }

    public mutating func time(_ t: Timestamp) {
        room(JSONBytes.numberBound)
        base[count] = 0x22
        let n = t.formatRFC3339(into: UnsafeMutableRawBufferPointer(start: base + count + 1, count: JSONBytes.numberBound - 2))
        base[count + n + 1] = 0x22
        written += n + 2
    }
}
