import FastJSON
import HealthgateCore

/// One record on its way from the journal to a sink, as routes and sinks see it: the fields of
/// a canonical record, each read from the record's journal line when it is first asked for, and
/// the line itself — copied as it is while nothing changed it, and written once, with the
/// changed members anew and the others copied, where a route changed a field. A record made of
/// fields (a transform's own) has no line and is written whole.
///
/// A value: a copy that is changed leaves the original as it was (its storage is copied first).
/// Reading a field fills a cache that a record and its unchanged copies share, so a record is
/// used on one thread at a time; it crosses threads only handed over (a read-ahead's join).
public struct Record: @unchecked Sendable {
    @usableFromInline var box: Box

    /// A record's storage: its line, where each member lies in it (found by one walk of the
    /// line when the record is read), the fields read or set.
    @usableFromInline final class Box {
        /// The journal line without its line feed; empty for a record made of fields.
        @usableFromInline let line: ArraySlice<UInt8>
        /// Where each field's member in `line` ends (0: absent; the member starts where the one
        /// before it ends, the first at 0) and where its value starts: `LineWalk.Member`. One
        /// of each per field.
        @usableFromInline var ends: InlineArray<24, UInt32>
        var valueStarts: InlineArray<24, UInt32>
        /// The fields whose value holds an escape: read by the parser.
        var escaped: CanonicalRecord.Fields = []
        /// The line is not as the writer writes it past its head: it is read by the parser and
        /// written whole.
        var failed = false
        /// The fields read so far and those set.
        @usableFromInline var values: CanonicalRecord
        @usableFromInline var have: CanonicalRecord.Fields
        /// The fields set since the line was read: the line is written with these anew.
        @usableFromInline var changed: CanonicalRecord.Fields

        init(line: ArraySlice<UInt8>, values: CanonicalRecord, have: CanonicalRecord.Fields, changed: CanonicalRecord.Fields) {
            self.line = line
            self.ends = InlineArray(repeating: 0)
            self.valueStarts = InlineArray(repeating: 0)
            self.values = values
            self.have = have
            self.changed = changed
        }

        @usableFromInline func copy() -> Box {
            let c = Box(line: line, values: values, have: have, changed: changed)
            (c.ends, c.valueStarts, c.escaped, c.failed) = (ends, valueStarts, escaped, failed)
            return c
        }

        @inlinable @inline(__always) func need(_ f: CanonicalRecord.Field) {
            if !have.has(f) { read(f) }
        }

        /// Walks the line, noting where each member ends.
        func walk() {
            line.withUnsafeBytes { all in
                var w = LineWalk(all)
                while let m = w.next() {
                    // The kind's own fields, several members: from the first's value to the last's end.
                    if ends[m.field.rawValue] == 0 { valueStarts[m.field.rawValue] = UInt32(m.valueStart) }
                    ends[m.field.rawValue] = UInt32(m.end)
                    if m.escaped { escaped.insert(m.field) }
                }
                failed = w.failed || w.position != all.count - 1
            }
        }

        /// What `read` makes of field `f`'s value as it lies in the line (nil: the line has no
        /// such member); nil when the field is not read from there (set, the line parsed, an
        /// escape in it).
        func inPlace<T>(_ f: CanonicalRecord.Field, _ read: (UnsafeRawBufferPointer?) -> T) -> T? {
            guard !changed.has(f) && !line.isEmpty && !failed && !escaped.has(f) else { return nil }
            guard let range = value(f) else { return read(nil) }
            return line.withUnsafeBytes { read(UnsafeRawBufferPointer(rebasing: $0[range])) }
        }

        /// The value of field `f` in the line, when it has one.
        func value(_ f: CanonicalRecord.Field) -> Range<Int>? {
            let end = ends[f.rawValue]
            guard !failed, end != 0 else { return nil }
            return Int(valueStarts[f.rawValue])..<Int(end)
        }

        /// Reads field `f` from its member (or all of the line with the parser, where the member
        /// is not in the form the writer writes, or holds an escape: JSON text is copied as it is).
        @usableFromInline func read(_ f: CanonicalRecord.Field) {
            have.insert(f)
            if failed || (escaped.has(f) && f != .metadata) { return readWhole() }
            guard let range = value(f) else { return }
            let done =
                f != .fields
                && line.withUnsafeBytes { all in
                    LineRead.member(f, UnsafeRawBufferPointer(rebasing: all[range]), into: &values)
                }
            if !done { readWhole() }
        }

        /// Every field not set yet, from the line read by the parser.
        func readWhole() {
            let parsed = try? CanonicalCodec.decodeLine(line)
            for f in CanonicalRecord.Field.allCases where !changed.has(f) {
                if let parsed { values.take(f, from: parsed) }
                have.insert(f)
            }
        }
    }

    /// The record a journal line holds (without its line feed), none of its fields read yet,
    /// its members found by a walk. A line whose first members (`op` to `type`, which every
    /// record has) are not so written (from an older version, say) is read by the parser
    /// instead; one that is no canonical record throws.
    public static func read(line: ArraySlice<UInt8>) throws(CanonicalDecodeError) -> Record {
        // Made here rather than copied from `.empty`: no copy of each of its fields.
        let box = Box(line: line, values: CanonicalRecord(kind: "", device: "", receiver: "", uuid: "", type: ""), have: [], changed: [])
        box.walk()
        if !box.failed && (CanonicalRecord.Field.op.rawValue...CanonicalRecord.Field.type.rawValue).allSatisfy({ box.ends[$0] != 0 }) {
            return Record(box: box)
        }
        return Record(try CanonicalCodec.decodeLine(line))
    }

    /// A record made of its fields, with no line (written whole when it is written).
    public init(_ fields: CanonicalRecord) {
        box = Box(line: [], values: fields, have: .all, changed: .all)
    }

    @usableFromInline init(box: Box) { self.box = box }

    /// The storage, alone to this record, for a change of field `f`.
    @inlinable mutating func changing(_ f: CanonicalRecord.Field) -> Box {
        if !isKnownUniquelyReferenced(&box) { box = box.copy() }
        box.have.insert(f)
        box.changed.insert(f)
        return box
    }

    /// Every field, read (for a sink that takes the whole record, and for comparing).
    public var canonical: CanonicalRecord {
        get {
            for f in CanonicalRecord.Field.allCases { box.need(f) }
            return box.values
        }
        set {
            if !isKnownUniquelyReferenced(&box) { box = box.copy() }
            box.values = newValue
            box.have = .all
            box.changed = .all
        }
    }

    /// Whether the record reads its fields from a journal line, and which members that holds (tests).
    var hasLine: Bool { !box.line.isEmpty }
    var walksWhole: Bool { !box.failed }
    func hasMember(_ f: CanonicalRecord.Field) -> Bool { box.value(f) != nil }

    /// Whether a route changed the record since it was read (or it was made of fields).
    public var isChanged: Bool { box.changed.rawValue != 0 }

    /// Appends the record's canonical line, with its line feed: the journal's bytes while nothing
    /// changed, else the changed members written anew and the others copied.
    public func appendLine(to out: inout [UInt8]) {
        let b = box
        if b.changed.rawValue == 0 {
            out.append(contentsOf: b.line)
            out.append(0x0A)
        } else if b.line.isEmpty || b.changed.isAll || b.failed {
            canonical.appendNDJSON(to: &out)
        } else {
            // The line's members in order, each run of unchanged ones copied at once, the changed
            // ones written from their fields where they belong.
            let values = b.values // one copy, not one per call on the box's
            b.line.withUnsafeBytes { line in
                JSONBytes.append(to: &out, atMost: line.count + 2 + values.ndjsonBound(only: b.changed)) { o in
                    var from = 0, to = 0 // the run of unchanged members not copied yet
                    var previous = 0 // where the member before ends
                    for f in CanonicalRecord.Field.allCases {
                        let end = Int(b.ends[f.rawValue])
                        if b.changed.has(f) {
                            o.raw(UnsafeRawBufferPointer(rebasing: line[from..<to]))
                            from = to
                            values.writeMembers(&o, only: CanonicalRecord.Fields(rawValue: 1 << UInt32(f.rawValue)))
                        } else if end != 0 {
                            if previous != to {
                                o.raw(UnsafeRawBufferPointer(rebasing: line[from..<to]))
                                from = previous
                            }
                            to = end
                        }
                        if end != 0 { previous = end }
                    }
                    o.raw(UnsafeRawBufferPointer(rebasing: line[from..<to]))
                    o.lit("}\n")
                }
            }
        }
    }

    /// The record's canonical line, without its line feed.
    public var line: [UInt8] {
        var out: [UInt8] = []
        appendLine(to: &out)
        out.removeLast()
        return out
    }
}

extension Record {
    /// String field `f`'s text where it lies, for an encoder that writes it out as it is: the
    /// line's bytes of its member when the field is unchanged and holds no escape, else its
    /// string's UTF-8; nil when the record has none (or `f` is no string field). No string made.
    public func withText(_ f: CanonicalRecord.Field, _ body: (UnsafeRawBufferPointer?) -> Void) {
        let done = box.inPlace(f) { v -> Bool in
            guard let v else { body(nil); return true } // no such member
            guard let text = LineRead.text(v) else { return false } // no string: read as a field
            body(text)
            return true
        }
        if done == true { return }
        let text: String?
        switch f {
        case .kind: text = kind
        case .device: text = device
        case .receiver: text = receiver
        case .uuid: text = uuid
        case .type: text = type
        case .unit: text = unit
        case .activity: text = activity
        case .timeZone: text = timeZone
        case .value: text = value?.string
        default: text = nil // no string field
        }
        guard let text else { return body(nil) }
        text.withUTF8Bytes { body(UnsafeRawBufferPointer($0)) }
    }

    /// The source's app and device where they lie (as `withText`).
    public func withSource(_ body: (_ app: UnsafeRawBufferPointer?, _ device: UnsafeRawBufferPointer?) -> Void) {
        let done = box.inPlace(.source) { v -> Bool in
            guard let v else { body(nil, nil); return true }
            var app: UnsafeRawBufferPointer?, device: UnsafeRawBufferPointer?
            guard
                LineRead.objectOfStrings(
                    v,
                    { name, text in
                        if LineRead.equal(name, "app") {
                            app = text
                        } else if LineRead.equal(name, "device") {
                            device = text
                        } else {
                            return false
                        }
                        return true
                    })
            else { return false }
            body(app, device)
            return true
        }
        if done == true { return }
        let s = source
        func bytes(_ t: String?, _ next: (UnsafeRawBufferPointer?) -> Void) {
            guard let t else { return next(nil) }
            t.withUTF8Bytes { next(UnsafeRawBufferPointer($0)) }
        }
        bytes(s?.app) { app in bytes(s?.device) { device in body(app, device) } }
    }
}

extension Record: Equatable {
    public static func == (a: Record, b: Record) -> Bool { a.canonical == b.canonical }
}

extension Record {
    /// The records of a journal entry's payload, each with its place among the payload's lines
    /// (blank lines are no records and have none); a line that is no canonical record is
    /// reported with its place, its bytes and why, and left out.
    public static func records(
        in payload: [UInt8], from first: Int = 0,
        bad: (_ index: Int, _ line: ArraySlice<UInt8>, CanonicalDecodeError) -> Void
    ) -> [(Record, Int)] {
        var out: [(Record, Int)] = []
        forEach(in: payload, from: first, bad: bad) { out.append(($0, $1)) }
        return out
    }

    /// `records(in:from:bad:)` handed over one at a time, each moved to `body` (no array of
    /// them made first).
    public static func forEach(
        in payload: [UInt8], from first: Int = 0,
        bad: (_ index: Int, _ line: ArraySlice<UInt8>, CanonicalDecodeError) -> Void,
        _ body: (consuming Record, Int) -> Void
    ) {
        var index = 0
        CanonicalCodec.forEachLine(payload) { _, _, _, range in
            defer { index += 1 }
            guard index >= first else { return }
            do throws(CanonicalDecodeError) {
                body(try Record.read(line: payload[range]), index)
            } catch {
                bad(index, payload[range], error)
            }
        }
    }
}
