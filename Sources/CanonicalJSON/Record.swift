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

    /// A record's storage: its line, where each member lies in it, the fields read or set.
    @usableFromInline final class Box {
        /// The journal line without its line feed; empty for a record made of fields.
        @usableFromInline let line: ArraySlice<UInt8>
        /// Each field's member in `line` (`start << 32 | end`, `LineWalk.Member`; 0: absent).
        @usableFromInline var spans: InlineArray<32, UInt64>
        /// The fields read so far and those set.
        @usableFromInline var values: CanonicalRecord
        @usableFromInline var have: CanonicalRecord.Fields
        /// The fields set since the line was read: the line is written with these anew.
        @usableFromInline var changed: CanonicalRecord.Fields

        init(line: ArraySlice<UInt8>, spans: InlineArray<32, UInt64>, values: CanonicalRecord,
             have: CanonicalRecord.Fields, changed: CanonicalRecord.Fields) {
            self.line = line
            self.spans = spans
            self.values = values
            self.have = have
            self.changed = changed
        }

        @usableFromInline func copy() -> Box { Box(line: line, spans: spans, values: values, have: have, changed: changed) }

        @inlinable @inline(__always) func need(_ f: CanonicalRecord.Field) {
            if !have.has(f) { read(f) }
        }

        /// Reads field `f` from its member (or all of the line with the parser, where the member
        /// is not in the form the writer writes, such as a string with an escape in it).
        @usableFromInline func read(_ f: CanonicalRecord.Field) {
            have.insert(f)
            let span = spans[f.rawValue]
            guard span != 0 else { return }
            let start = Int(span >> 32), end = Int(span & 0xFFFF_FFFF)
            let done = line.withUnsafeBytes { all -> Bool in
                if f == .fields { return false }   // the kind's own members: parsed
                let value = UnsafeRawBufferPointer(rebasing: all[(start + f.key.utf8CodeUnitCount + 4)..<end])
                return LineRead.member(f, value, into: &values)
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

    /// The record a journal line holds (without its line feed): its members found by one walk
    /// (`LineWalk`), none of them read yet. A line not as the writer writes it (from an older
    /// version, say) is read by the parser instead; one that is no canonical record throws.
    public static func read(line: ArraySlice<UInt8>) throws(CanonicalDecodeError) -> Record {
        var spans = InlineArray<32, UInt64>(repeating: 0)
        let walked = line.withUnsafeBytes { all -> Bool in
            var walk = LineWalk(all)
            while let m = walk.next() {
                let f = m.field.rawValue
                let start = spans[f] == 0 ? UInt64(m.start) : spans[f] >> 32   // the kind's own fields: one span
                spans[f] = start << 32 | UInt64(m.end)
            }
            return !walk.failed
        }
        let required = CanonicalRecord.Fields(.op, .kind, .device, .receiver, .uuid, .type)
        if walked && CanonicalRecord.Field.allCases.allSatisfy({ !required.has($0) || spans[$0.rawValue] != 0 }) {
            return Record(box: Box(line: line, spans: spans, values: .empty, have: [], changed: []))
        }
        return Record(try CanonicalCodec.decodeLine(line))
    }

    /// A record made of its fields, with no line (written whole when it is written).
    public init(_ fields: CanonicalRecord) {
        box = Box(line: [], spans: InlineArray(repeating: 0), values: fields, have: .all, changed: .all)
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
    func hasMember(_ f: CanonicalRecord.Field) -> Bool { box.spans[f.rawValue] != 0 }

    /// Whether a route changed the record since it was read (or it was made of fields).
    public var isChanged: Bool { box.changed.rawValue != 0 }

    /// Appends the record's canonical line, with its line feed: the journal's bytes while nothing
    /// changed, else the changed members written anew and the others copied.
    public func appendLine(to out: inout [UInt8]) {
        let b = box
        if b.changed.rawValue == 0 {
            out.append(contentsOf: b.line)
            out.append(0x0A)
        } else if b.line.isEmpty || b.changed.isAll {
            canonical.appendNDJSON(to: &out)
        } else {
            b.line.withUnsafeBytes { line in
                JSONBytes.append(to: &out, atMost: line.count + 2 + b.values.ndjsonBound(only: b.changed)) { o in
                    for f in CanonicalRecord.Field.allCases {
                        if b.changed.has(f) {
                            b.values.writeMembers(&o, only: CanonicalRecord.Fields(f))
                        } else if b.spans[f.rawValue] != 0 {
                            let span = b.spans[f.rawValue]
                            o.raw(UnsafeRawBufferPointer(rebasing: line[Int(span >> 32)..<Int(span & 0xFFFF_FFFF)]))
                        }
                    }
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

extension Record: Equatable {
    public static func == (a: Record, b: Record) -> Bool { a.canonical == b.canonical }
}

extension Record {
    /// The records of a journal entry's payload, each with its place among the payload's lines
    /// (blank lines are no records and have none); a line that is no canonical record is
    /// reported with its place, its bytes and why, and left out.
    public static func records(in payload: [UInt8], from first: Int = 0,
                               bad: (_ index: Int, _ line: ArraySlice<UInt8>, CanonicalDecodeError) -> Void) -> [(Record, Int)] {
        var out: [(Record, Int)] = []
        var index = 0
        CanonicalCodec.forEachLine(payload) { _, _, _, range in
            defer { index += 1 }
            guard index >= first else { return }
            do throws(CanonicalDecodeError) {
                out.append((try Record.read(line: payload[range]), index))
            } catch {
                bad(index, payload[range], error)
            }
        }
        return out
    }
}
