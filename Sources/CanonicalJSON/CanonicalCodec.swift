import FastJSON
import Glibc
import HealthgateCore

/// The canonical record as one JSON object per line: the journal's payload, the file sink's
/// lines and `replay`'s input. Field order is fixed so equal records give equal bytes.
public enum CanonicalCodec {
    /// Appends one record and a line feed (see `CanonicalRecord.appendNDJSON`).
    public static func encode(_ r: CanonicalRecord, into out: inout [UInt8]) {
        r.appendNDJSON(to: &out)
    }

    /// All records as NDJSON.
    public static func encodeLines(_ records: [CanonicalRecord]) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(records.count * 320)
        for r in records { encode(r, into: &out) }
        return out
    }

    /// One record as its NDJSON line, without the line feed.
    public static func encodeLine(_ r: CanonicalRecord) -> [UInt8] {
        var out = [UInt8]()
        encode(r, into: &out)
        out.removeLast()
        return out
    }

    /// Reads NDJSON canonical records with the byte range of each one's line (line feed
    /// included). The ranges are nil when some line did not decode (records and lines would not
    /// pair up). `only`: the fields read (see `decode(_:reuse:only:)`).
    public static func decodeLinesWithRanges(_ bytes: [UInt8], parser: JSONParser, only: CanonicalRecord.Fields = .all,
                                             onError: (Int, CanonicalDecodeError, Range<Int>) -> Void = { _, _, _ in })
        -> ([CanonicalRecord], [Range<Int>]?) {
        let read = readLines(bytes, parser: parser, only: only, onError: onError)
        return (read.records, read.ranges)
    }

    /// What `readLines` read.
    public struct ReadLines {
        public var records: [CanonicalRecord]
        /// Each line's bytes, line feed included; nil when some line did not decode (or walk).
        public var ranges: [Range<Int>]?
        /// With `patches`, each line's spans of those fields (`LineSpans.none` for each when
        /// they make more than two runs: a sink walks the line then).
        public var spans: [LineSpans]?
    }

    /// `decodeLinesWithRanges`, for a sink that writes records as their journal lines with the
    /// fields in `patches` written anew (those a route may change: `RecordLine.patched`): with
    /// fewer than all fields read, every line must walk (`CanonicalLine`), the ranges nil
    /// otherwise, and each line's spans of `patches` are found as it is read.
    /// Whether `readLines` parses the lines when reading `only` with `patches` (else it only
    /// splits them).
    public static func parses(only: CanonicalRecord.Fields, patches: CanonicalRecord.Fields) -> Bool {
        only.rawValue != 0 || patches.rawValue != 0
    }

    public static func readLines(_ bytes: [UInt8], parser: JSONParser, only: CanonicalRecord.Fields = .all,
                                 patches: CanonicalRecord.Fields = [],
                                 onError: (Int, CanonicalDecodeError, Range<Int>) -> Void = { _, _, _ in }) -> ReadLines {
        let patching = patches.rawValue != 0 && !only.isAll
        if !parses(only: only, patches: patches) {
            // Nothing read: the lines alone, not parsed (their entry's checksum was checked when
            // it was read), each with an empty record.
            let ranges = lineRanges(bytes)
            return ReadLines(records: Array(repeating: CanonicalRecord.empty, count: ranges.count), ranges: ranges)
        }
        if readsScanned(only) { return decodeScanned(bytes, parser: parser, only: only, patches: patching ? patches : [], onError: onError) }
        var failed = false
        let records = decodeLines(bytes, parser: parser, only: only) { line, error, range in
            failed = true
            onError(line, error, range)
        }
        if failed { return ReadLines(records: records) }
        var ranges: [Range<Int>] = []
        var spans: [LineSpans] = []
        ranges.reserveCapacity(records.count)
        let runs = LineSpans.runs(of: patches)
        forEachLine(bytes) { line, _, withFeed, _ in
            ranges.append(withFeed)
            guard patching, !failed else { return }
            if let s = CanonicalLine.spans(of: line, runs: runs) { spans.append(s) } else { failed = true }
        }
        guard !failed, ranges.count == records.count else { return ReadLines(records: records) }
        return ReadLines(records: records, ranges: ranges, spans: patching ? spans : nil)
    }

    /// The byte range of each line that is not blank (line feed included), as `decodeLines` reads them.
    public static func lineRanges(_ bytes: [UInt8]) -> [Range<Int>] {
        var ranges: [Range<Int>] = []
        forEachLine(bytes) { _, _, withFeed, _ in ranges.append(withFeed) }
        return ranges
    }

    /// Calls `body` for each line that is not blank (empty, or at most two spaces and carriage
    /// returns) with its text, its 1-based line number, its byte range with its line feed and
    /// without it.
    static func forEachLine(_ bytes: [UInt8],
                            _ body: (_ text: UnsafeRawBufferPointer, _ number: Int, _ withFeed: Range<Int>, _ range: Range<Int>) -> Void) {
        bytes.withUnsafeBytes { all in
            guard let base = all.baseAddress else { return }
            var lineStart = 0
            var lineNumber = 0
            while lineStart < all.count {
                lineNumber += 1
                let lineEnd = memchr(base + lineStart, 0x0A, all.count - lineStart).map { base.distance(to: UnsafeRawPointer($0)) }
                    ?? all.count
                let line = UnsafeRawBufferPointer(start: base + lineStart, count: lineEnd - lineStart)
                let range = lineStart..<lineEnd
                lineStart = lineEnd + 1
                if line.isEmpty || (line.count <= 2 && line.allSatisfy { $0 == 0x20 || $0 == 0x0D }) { continue }
                body(line, lineNumber, range.lowerBound..<min(lineEnd + 1, all.count), range)
            }
        }
    }

    /// One line parsed and decoded, or its error reported (nil then).
    static func decodeLine(_ line: UnsafeRawBufferPointer, number: Int, range: Range<Int>, parser: JSONParser,
                           reuse: inout JSONStringReuse, only: CanonicalRecord.Fields,
                           onError: (Int, CanonicalDecodeError, Range<Int>) -> Void) -> CanonicalRecord? {
        do {
            let doc = try parser.parse(line)
            return try decode(doc.root, reuse: &reuse, only: only)
        } catch let e as JSONError {
            onError(number, CanonicalDecodeError("\(e)"), range)
        } catch let e as CanonicalDecodeError {
            onError(number, e, range)
        } catch {
            onError(number, CanonicalDecodeError("\(error)"), range)
        }
        return nil
    }

    /// Decodes lines one at a time as `readLines` decodes each (the fields in `only`, from a
    /// walk of the line where they are all scanned and it is plain, else parsed), the strings
    /// they repeat shared: for a sink that writes most lines from their bytes and decodes the
    /// few it cannot.
    public struct LineDecoder {
        let parser = JSONParser()
        var reuse = JSONStringReuse(slots: CanonicalCodec.reuseSlots)
        public let only: CanonicalRecord.Fields

        public init(only: CanonicalRecord.Fields = .all) {
            self.only = only
        }

        /// The record of `line` (without its line feed), or why it is none.
        public mutating func decode(_ line: UnsafeRawBufferPointer) throws(CanonicalDecodeError) -> CanonicalRecord {
            if CanonicalCodec.readsScanned(only) {
                var r = CanonicalRecord.empty
                var noSpans: LineSpans.Finder?
                var found = LineSpans.none
                if CanonicalCodec.decodeScanned(line, only: only, whole: false, reuse: &reuse, into: &r, spans: &noSpans, found: &found) {
                    return r
                }
            }
            var failure = CanonicalDecodeError("not a canonical record")
            let r = CanonicalCodec.decodeLine(line, number: 1, range: 0..<line.count, parser: parser, reuse: &reuse, only: only) { _, e, _ in
                failure = e
            }
            guard let r else { throw failure }
            return r
        }
    }

    /// Reads NDJSON canonical records. Blank lines are skipped; a line that is not a canonical
    /// record is reported with its 1-based line number and its byte range. `only`: the fields
    /// read (see `decode(_:reuse:only:)`).
    public static func decodeLines(_ bytes: [UInt8], parser: JSONParser, only: CanonicalRecord.Fields = .all,
                                   onError: (Int, CanonicalDecodeError, Range<Int>) -> Void = { _, _, _ in }) -> [CanonicalRecord] {
        if let all = decodeAsArray(bytes, parser: parser, only: only) { return all }
        var out: [CanonicalRecord] = []
        var reuse = JSONStringReuse(slots: reuseSlots)
        forEachLine(bytes) { line, number, _, range in
            if let r = decodeLine(line, number: number, range: range, parser: parser, reuse: &reuse, only: only, onError: onError) {
                out.append(r)
            }
        }
        return out
    }

    /// The fast path for well-formed NDJSON: raw line feeds only ever separate records (JSON
    /// escapes them inside strings), so `[` + the lines joined by `,` + `]` is one JSON array,
    /// parsed in one go instead of one parse per line. Nil when anything is off; the caller
    /// then reads line by line and reports each bad line.
    static func decodeAsArray(_ bytes: [UInt8], parser: JSONParser, only: CanonicalRecord.Fields) -> [CanonicalRecord]? {
        guard let last = bytes.last, last == 0x0A, bytes.count > 1 else { return nil }
        var joined = [UInt8](repeating: 0, count: bytes.count + 1)
        let ok = joined.withUnsafeMutableBytes { out -> Bool in
            bytes.withUnsafeBytes { src -> Bool in
                out[0] = 0x5B
                UnsafeMutableRawBufferPointer(rebasing: out[1..<bytes.count]).copyMemory(
                    from: UnsafeRawBufferPointer(rebasing: src[0..<(bytes.count - 1)]))
                // Every line feed but the last becomes a comma; two in a row (a blank line) would
                // make `,,`, which the parser refuses, sending us to the careful path.
                var p = out.baseAddress! + 1
                var left = bytes.count - 1
                while left > 0, let nl = memchr(p, 0x0A, left) {
                    nl.storeBytes(of: 0x2C, as: UInt8.self)
                    let advance = p.distance(to: nl) + 1
                    p += advance
                    left -= advance
                }
                out[bytes.count] = 0x5D
                return true
            }
        }
        guard ok, let doc = try? parser.parse(joined), doc.root.kind == .array else { return nil }
        var out: [CanonicalRecord] = []
        out.reserveCapacity(doc.root.count)
        var reuse = JSONStringReuse(slots: reuseSlots)
        do {
            for element in doc.root.elements { out.append(try decode(element, reuse: &reuse, only: only)) }
        } catch {
            return nil
        }
        return out
    }

    /// String slots for `JSONStringReuse`: one per field (by its `rawValue`), then the source's
    /// app and device.
    static let reuseSlots = CanonicalRecord.Field.allCases.count + 2
    static let sourceAppSlot = CanonicalRecord.Field.allCases.count
    static let sourceDeviceSlot = CanonicalRecord.Field.allCases.count + 1

    /// One canonical record from a parsed JSON object, in one pass over its members.
    public static func decode(_ o: JSONRef) throws(CanonicalDecodeError) -> CanonicalRecord {
        var reuse = JSONStringReuse(slots: reuseSlots)
        return try decode(o, reuse: &reuse)
    }

    /// As `decode(_:)`, sharing repeated strings with the previous records through `reuse`.
    /// `only`: the fields read (`op` always is); the others are left empty, unread and unchecked —
    /// for a sink that reads a few fields and writes each record's journal line as it is.
    public static func decode(_ o: JSONRef, reuse: inout JSONStringReuse,
                              only: CanonicalRecord.Fields = .all) throws(CanonicalDecodeError) -> CanonicalRecord {
        guard o.kind == .object else { throw CanonicalDecodeError("a record must be a JSON object") }
        let every = only.isAll
        var op: CanonicalRecord.Op?
        var kind: String?, device: String?, receiver: String?, uuid: String?, type: String?
        var r = CanonicalRecord(kind: "", device: "", receiver: "", uuid: "", type: "")
        func str(_ v: JSONRef, _ k: StaticString) throws(CanonicalDecodeError) -> String? {
            if v.isNull { return nil }
            guard let s = v.string else { throw CanonicalDecodeError("\"\(k)\" must be a string") }
            return s
        }
        func shared(_ v: JSONRef, _ key: CanonicalRecord.Field, _ k: StaticString) throws(CanonicalDecodeError) -> String? {
            if v.isNull { return nil }
            guard let s = reuse.string(v, slot: key.rawValue) else { throw CanonicalDecodeError("\"\(k)\" must be a string") }
            return s
        }
        func num(_ v: JSONRef, _ k: StaticString) throws(CanonicalDecodeError) -> Double? {
            if v.isNull { return nil }
            guard let d = v.double else { throw CanonicalDecodeError("\"\(k)\" must be a number") }
            return d
        }
        func int(_ v: JSONRef, _ k: StaticString) throws(CanonicalDecodeError) -> Int? {
            if v.isNull { return nil }
            guard let i = v.int64 else { throw CanonicalDecodeError("\"\(k)\" must be an integer") }
            return Int(i)
        }
        func time(_ v: JSONRef, _ k: StaticString) throws(CanonicalDecodeError) -> Timestamp? {
            if v.isNull { return nil }
            guard let parsed = v.withStringBytes({ Timestamp.parseRFC3339($0) }), let (t, _) = parsed else {
                throw CanonicalDecodeError("\"\(k)\" is not an RFC 3339 time")
            }
            return t
        }
        for (k, v) in o.members {
            // Members of no canonical name go to `fields` (the walker's rule too: `CanonicalLine`).
            let key = k.withBytes { CanonicalRecord.Field(key: $0) } ?? .fields
            if !every && key != .op && !only.has(key) { continue }
            switch key {
            case .op:
                guard let s = try str(v, "op"), let parsed = CanonicalRecord.Op(rawValue: s) else {
                    throw CanonicalDecodeError("\"op\" must be \"upsert\" or \"delete\"")
                }
                op = parsed
            case .kind: kind = try shared(v, .kind, "kind")
            case .device: device = try shared(v, .device, "device")
            case .receiver: receiver = try shared(v, .receiver, "receiver")
            case .uuid: uuid = try str(v, "uuid")
            case .type: type = try shared(v, .type, "type")
            case .part: r.part = try int(v, "part")
            case .parts: r.parts = try int(v, "parts")
            case .start: r.start = try time(v, "start")
            case .end: r.end = try time(v, "end")
            case .utcOffset:
                if v.isNull { break }
                guard let parsed = v.withStringBytes({ Timestamp.parseOffset($0) }) else {
                    throw CanonicalDecodeError("\"utc_offset\" must be a string")
                }
                guard let secs = parsed else { throw CanonicalDecodeError("\"utc_offset\" is not ±hh:mm") }
                r.utcOffset = secs
            case .value:
                if v.isNull { break }
                if let s = v.string { r.value = .string(s) } else if let d = v.double { r.value = .number(d) } else {
                    throw CanonicalDecodeError("\"value\" must be a number or a string")
                }
            case .unit: r.unit = try shared(v, .unit, "unit")
            case .code: r.code = try int(v, "code")
            case .activity: r.activity = try str(v, "activity")
            case .durationS: r.durationS = try num(v, "duration_s")
            case .energyKcal: r.energyKcal = try num(v, "energy_kcal")
            case .distanceM: r.distanceM = try num(v, "distance_m")
            case .source:
                if v.kind == .object {
                    let app = v["app"].flatMap { reuse.string($0, slot: sourceAppSlot) }
                    let dev = v["device"].flatMap { reuse.string($0, slot: sourceDeviceSlot) }
                    r.source = RecordSource(app: app, device: dev)
                }
            case .metadata:
                if !v.isNull { r.metadata = raw(v) }
            case .extra:
                if v.kind == .object {
                    for (ek, ev) in v.members { r.extra.append(RecordField(ek.string, raw(ev))) }
                }
            case .tags:
                // Labels are an object of strings; anything else under that name (journals from
                // before tags existed) stays a field of the kind, as it was.
                if v.kind == .object && v.members.allSatisfy({ $0.value.kind == .string }) {
                    for (tk, tv) in v.members { r.tags.append(RecordTag(tk.string, tv.string ?? "")) }
                } else {
                    r.fields.append(RecordField(k.string, raw(v)))
                }
            case .fields:
                r.fields.append(RecordField(k.string, raw(v)))
            }
        }
        guard let op else { throw CanonicalDecodeError("\"op\" is missing") }
        r.op = op
        func required(_ value: String?, _ field: CanonicalRecord.Field, _ k: StaticString) throws(CanonicalDecodeError) -> String {
            if let value { return value }
            if !every && !only.has(field) { return "" }
            throw CanonicalDecodeError("\"\(k)\" is missing")
        }
        r.kind = try required(kind, .kind, "kind")
        r.device = try required(device, .device, "device")
        r.receiver = try required(receiver, .receiver, "receiver")
        r.uuid = try required(uuid, .uuid, "uuid")
        r.type = try required(type, .type, "type")
        return r
    }

    /// A subtree as compact JSON text.
    public static func raw(_ v: JSONRef) -> RawJSON {
        var w = JSONWriter(capacity: 32)
        v.write(to: &w)
        return RawJSON(encoded: w.bytes)
    }
}

public struct CanonicalDecodeError: Error, Sendable, Equatable, CustomStringConvertible {
    public var description: String
    public init(_ d: String) { description = d }
}
