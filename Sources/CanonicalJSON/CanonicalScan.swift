import FastJSON
import Glibc
import HealthgateCore

/// Fields of canonical lines read without a parser: a sink that needs some of a record's fields
/// (the file sink's `{device}/{date}`, the value and unit a `convert` changes) and writes the
/// rest of each journal line as it is gets them from a walk of the line (`CanonicalLine`)
/// instead of a parse of all of it.
extension CanonicalCodec {
    /// The fields read from a walk: strings, numbers, times, the source and the labels — all but
    /// those that hold the phone's own JSON (`fields`, `metadata`, `extra`).
    public static let scannedFields = CanonicalRecord.Fields(rawValue: CanonicalRecord.Fields.all.rawValue
        & ~CanonicalRecord.Fields(.fields, .metadata, .extra).rawValue)

    /// The fields every record has (`decode` refuses a line without one it reads).
    @inline(__always) static var requiredFields: CanonicalRecord.Fields {
        CanonicalRecord.Fields(.kind, .device, .receiver, .uuid, .type)
    }

    /// Whether `only` can be read from a walk of each line (some fields, all of them scanned).
    static func readsScanned(_ only: CanonicalRecord.Fields) -> Bool {
        only.rawValue != 0 && only.rawValue & ~scannedFields.rawValue == 0
    }

    /// `readLines` for fields all in `scannedFields`: each line walked (`decodeScanned`), a
    /// line whose fields are not as the writer writes them parsed instead. With `patches`, each
    /// line's spans of them found on the way; a line that does not walk makes the ranges nil.
    static func decodeScanned(_ bytes: [UInt8], parser: JSONParser, only: CanonicalRecord.Fields, patches: CanonicalRecord.Fields,
                              onError: (Int, CanonicalDecodeError, Range<Int>) -> Void) -> ReadLines {
        var records: [CanonicalRecord] = []
        var ranges: [Range<Int>] = []
        var spans: [LineSpans] = []
        var failed = false
        var reuse = JSONStringReuse(slots: reuseSlots)
        let blank = CanonicalRecord.empty
        let patching = patches.rawValue != 0
        let runs = patching ? LineSpans.runs(of: patches) : nil
        records.reserveCapacity(bytes.count / 200)
        ranges.reserveCapacity(bytes.count / 200)
        if patching { spans.reserveCapacity(bytes.count / 200) }
        let noFinder: LineSpans.Finder? = runs.map { LineSpans.Finder(runs: $0) }
        forEachLine(bytes) { line, number, withFeed, range in
            // Scanned into its place in the array (a record returned would be copied out).
            records.append(blank)
            var finder = noFinder
            var found = LineSpans.none
            let scanned = records.withUnsafeMutableBufferPointer { all in
                decodeScanned(line, only: only, whole: patching && runs == nil, reuse: &reuse, into: &all[all.count - 1],
                              spans: &finder, found: &found)
            }
            if scanned {
                ranges.append(withFeed)
                if patching { spans.append(found) }
                return
            }
            records.removeLast()
            if patching {
                if let s = CanonicalLine.spans(of: line, runs: runs) { spans.append(s) } else { failed = true }
            }
            if let r = decodeLine(line, number: number, range: range, parser: parser, reuse: &reuse, only: only, onError: onError) {
                records.append(r)
                ranges.append(withFeed)
            } else {
                failed = true
            }
        }
        return ReadLines(records: records, ranges: failed ? nil : ranges, spans: failed || !patching ? nil : spans)
    }

    /// The fields in `only` (all among `scannedFields`) of one canonical line (without its line
    /// feed), read from its walk: each a string without escapes, a number, or the source or
    /// labels object of such strings. Fields not in `only` are skipped unread, as
    /// `decode(_:reuse:only:)` skips them; the walk stops after the last field asked for (or
    /// spanned: `finder`'s spans put in `found`) unless `whole`. nil when the line is not as the
    /// writer writes it (an escaped string, a `null`, a member out of order): the caller parses
    /// it then.
    static func decodeScanned(_ line: UnsafeRawBufferPointer, only: CanonicalRecord.Fields, whole: Bool,
                              reuse: inout JSONStringReuse, into r: inout CanonicalRecord,
                              spans finder: inout LineSpans.Finder?, found: inout LineSpans) -> Bool {
        var op: CanonicalRecord.Op?
        var seen = CanonicalRecord.Fields()
        // The last field asked for (or spanned): past it, nothing more is read.
        let lastRead = 31 - only.rawValue.leadingZeroBitCount
        let last = CanonicalRecord.Field(rawValue: max(lastRead, finder?.last ?? 0))!
        var walk = CanonicalLine(line)
        while let m = walk.next() {
            finder?.see(m)
            let v = UnsafeRawBufferPointer(rebasing: line[m.valueStart..<m.end])
            if m.field == .op {
                guard let s = walk.string(m) else { return false }
                op = s.count == 6 && memcmp(s.baseAddress!, "upsert", 6) == 0 ? .upsert
                    : s.count == 6 && memcmp(s.baseAddress!, "delete", 6) == 0 ? .delete : nil
                if op == nil { return false }
                continue
            }
            if m.field > last && !whole { break }
            guard only.has(m.field) else { continue }
            seen.insert(m.field)
            let slot = m.field.rawValue
            switch m.field {
            case .kind, .device, .receiver, .type, .unit:
                guard let s = walk.string(m) else { return false }
                let text = reuse.string(bytes: s, slot: slot)
                switch m.field {
                case .kind: r.kind = text
                case .device: r.device = text
                case .receiver: r.receiver = text
                case .type: r.type = text
                default: r.unit = text
                }
            case .uuid, .activity:
                guard let s = walk.string(m) else { return false }
                if m.field == .uuid { r.uuid = String(decoding: s, as: UTF8.self) } else { r.activity = String(decoding: s, as: UTF8.self) }
            case .part, .parts, .code:
                guard let int = integer(v) else { return false }
                switch m.field {
                case .part: r.part = int
                case .parts: r.parts = int
                default: r.code = int
                }
            case .start, .end:
                guard let s = walk.string(m), let (t, _) = Timestamp.parseRFC3339(s) else { return false }
                if m.field == .start { r.start = t } else { r.end = t }
            case .utcOffset:
                guard let s = walk.string(m), let seconds = Timestamp.parseOffset(s) else { return false }
                r.utcOffset = seconds
            case .value:
                if let s = walk.string(m) {
                    r.value = .string(String(decoding: s, as: UTF8.self))
                } else {
                    guard let d = number(v) else { return false }
                    r.value = .number(d)
                }
            case .durationS, .energyKcal, .distanceM:
                guard let d = number(v) else { return false }
                switch m.field {
                case .durationS: r.durationS = d
                case .energyKcal: r.energyKcal = d
                default: r.distanceM = d
                }
            case .source:
                guard let (app, device) = source(v) else { return false }
                r.source = RecordSource(app: app.map { reuse.string(bytes: $0, slot: sourceAppSlot) },
                                        device: device.map { reuse.string(bytes: $0, slot: sourceDeviceSlot) })
            case .tags:
                var tags: [RecordTag] = []
                guard objectOfStrings(v, { name, text in
                    tags.append(RecordTag(String(decoding: name, as: UTF8.self), String(decoding: text, as: UTF8.self)))
                    return true
                }) else { return false }
                r.tags = tags
            case .op, .fields, .metadata, .extra:
                return false
            }
        }
        guard !walk.failed else { return false }
        if let finder { found = finder.spans(closing: walk.position) }
        // A required field asked for and not there: the parser says so.
        let required = CanonicalRecord.Fields(rawValue: only.rawValue & requiredFields.rawValue)
        guard let op, seen.rawValue & required.rawValue == required.rawValue else { return false }
        r.op = op
        return true
    }

    /// The app and device of a source object (`{"app":"…","device":"…"}`, either or both, no
    /// escapes); nil for anything else.
    static func source(_ v: UnsafeRawBufferPointer) -> (app: UnsafeRawBufferPointer?, device: UnsafeRawBufferPointer?)? {
        var app: UnsafeRawBufferPointer?, device: UnsafeRawBufferPointer?
        guard objectOfStrings(v, { name, text in
            if name.count == 3 && memcmp(name.baseAddress!, "app", 3) == 0 && app == nil {
                app = text
            } else if name.count == 6 && memcmp(name.baseAddress!, "device", 6) == 0 && device == nil {
                device = text
            } else {
                return false
            }
            return true
        }) else { return nil }
        return (app, device)
    }

    /// An integer written as JSON writes one (digits, a minus sign before), within Int's range.
    static func integer(_ v: UnsafeRawBufferPointer) -> Int? {
        guard !v.isEmpty else { return nil }
        let negative = v[0] == 0x2D
        let digits = UnsafeRawBufferPointer(rebasing: v[(negative ? 1 : 0)...])
        guard !digits.isEmpty, digits.count <= 19 else { return nil }
        var magnitude: UInt64 = 0
        for d in digits {
            guard d >= 0x30 && d <= 0x39 else { return nil }
            magnitude = magnitude * 10 + UInt64(d - 0x30)
        }
        if negative { return magnitude <= UInt64(Int.max) + 1 ? Int(truncatingIfNeeded: 0 &- magnitude) : nil }
        return magnitude <= UInt64(Int.max) ? Int(magnitude) : nil
    }

    /// A JSON number (`-`, digits, `.`, exponent), read exactly. Most are a few digits with a
    /// fraction and no exponent: at most 15 digits make an integer a double holds exactly, and a
    /// power of ten up to 10^22 is exact too, so one division (rounded correctly, as every IEEE
    /// operation is) gives the nearest double; anything else goes to strtod, which also rounds
    /// correctly, as the parser does (on a copy ending in NUL).
    static func number(_ v: UnsafeRawBufferPointer) -> Double? {
        guard let base = v.baseAddress, !v.isEmpty else { return nil }
        let negative = v[0] == 0x2D
        var i = negative ? 1 : 0
        var mantissa: UInt64 = 0, digits = 0, fraction = 0, dot = false
        while i < v.count {
            let c = v[i]
            if c >= 0x30 && c <= 0x39 {
                mantissa = mantissa &* 10 &+ UInt64(c - 0x30)
                digits += 1
                if dot { fraction += 1 }
            } else if c == 0x2E && !dot && digits > 0 {
                dot = true
            } else {
                break
            }
            i += 1
        }
        if i == v.count && digits > 0 && digits <= 15 && (!dot || fraction > 0) {
            let exact = Double(mantissa) / CanonicalCodec.powersOfTen[fraction]
            return negative ? -exact : exact
        }
        guard v[0] == 0x2D || (v[0] >= 0x30 && v[0] <= 0x39) else { return nil }
        for c in v where !((c >= 0x30 && c <= 0x39) || c == 0x2E || c == 0x65 || c == 0x45 || c == 0x2B || c == 0x2D) {
            return nil
        }
        // strtod reads to a byte that is no part of a number: a copy that ends in NUL, so that
        // it never reads past the value whatever follows it (a line may end with the number).
        return withUnsafeTemporaryAllocation(of: CChar.self, capacity: v.count + 1) { copy -> Double? in
            guard let start = copy.baseAddress else { return nil }
            UnsafeMutableRawPointer(start).copyMemory(from: base, byteCount: v.count)
            start[v.count] = 0
            var end: UnsafeMutablePointer<CChar>?
            let d = strtod(start, &end)
            guard let end, end == start + v.count, d.isFinite else { return nil }
            return d
        }
    }

    /// 10^0 … 10^15, each exact in a double.
    static let powersOfTen: [Double] = (0...15).map { k in (0..<k).reduce(1.0) { r, _ in r * 10 } }

    /// Calls `member` with each name and text of `{"name":"text",…}` (no escapes); false when
    /// the value is not such an object or `member` says so.
    static func objectOfStrings(_ v: UnsafeRawBufferPointer,
                                _ member: (_ name: UnsafeRawBufferPointer, _ text: UnsafeRawBufferPointer) -> Bool) -> Bool {
        let n = v.count
        guard n >= 2, v[0] == 0x7B, v[n - 1] == 0x7D else { return false }
        var i = 1
        if n == 2 { return true }
        while i < n - 1 {
            func string() -> UnsafeRawBufferPointer? {
                guard i < n, v[i] == 0x22, let base = v.baseAddress else { return nil }
                // The closing quote, and no backslash before it (libc's memchr, a word at a time).
                guard let quote = memchr(base + i + 1, 0x22, n - i - 1) else { return nil }
                let e = UnsafeRawPointer(quote) - base
                if memchr(base + i + 1, 0x5C, e - i - 1) != nil { return nil }
                defer { i = e + 1 }
                return UnsafeRawBufferPointer(rebasing: v[(i + 1)..<e])
            }
            guard let name = string(), i < n, v[i] == 0x3A else { return false }
            i += 1
            guard let text = string(), member(name, text), i < n else { return false }
            if v[i] == 0x7D { return i == n - 1 }
            guard v[i] == 0x2C else { return false }
            i += 1
        }
        return false
    }
}
