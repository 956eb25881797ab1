import FastJSON
import Glibc
import HealthgateCore

/// The fields at the head of a canonical line, read without a parser: a sink that needs only
/// some of them (the file sink's `{device}/{date}`) and writes each journal line as it is
/// gets them from a scan of the line's first bytes instead of a parse of all of it.
extension CanonicalCodec {
    /// The fields `CanonicalRecord.appendNDJSON` writes before `value`, first and in this order:
    /// strings, integers and times only (never an object, an array or `null`).
    public static let headFields = CanonicalRecord.Fields(.op, .kind, .device, .receiver, .uuid, .type, .part, .parts, .start,
                                                          .end, .utcOffset)

    /// The fields every record has (`decode` refuses a line without one it reads).
    @inline(__always) static var requiredFields: CanonicalRecord.Fields {
        func bit(_ f: CanonicalRecord.Field) -> UInt32 { 1 << UInt32(f.rawValue) }
        return CanonicalRecord.Fields(rawValue: bit(.kind) | bit(.device) | bit(.receiver) | bit(.uuid) | bit(.type))
    }

    /// Whether `only` can be read from the head of each line (some fields, all of them there).
    static func readsHeadOnly(_ only: CanonicalRecord.Fields) -> Bool {
        only.rawValue != 0 && only.rawValue & ~headFields.rawValue == 0
    }

    /// `decodeLinesWithRanges` for fields all in `headFields`: each line's head scanned
    /// (`decodeHead`), a line that is not as the writer writes it parsed instead.
    static func decodeHeads(_ bytes: [UInt8], parser: JSONParser, only: CanonicalRecord.Fields,
                            onError: (Int, CanonicalDecodeError, Range<Int>) -> Void) -> ([CanonicalRecord], [Range<Int>]?) {
        var records: [CanonicalRecord] = []
        var ranges: [Range<Int>] = []
        var failed = false
        var reuse = JSONStringReuse(slots: Key.allCases.count + 2)
        let blank = CanonicalRecord.empty
        let table = keys
        records.reserveCapacity(bytes.count / 200)
        ranges.reserveCapacity(bytes.count / 200)
        forEachLine(bytes) { line, number, withFeed, range in
            // Scanned into its place in the array (a record returned would be copied out).
            records.append(blank)
            let scanned = records.withUnsafeMutableBufferPointer { all in
                decodeHead(line, only: only, keys: table, reuse: &reuse, into: &all[all.count - 1])
            }
            if scanned {
                ranges.append(withFeed)
                return
            }
            records.removeLast()
            if let r = decodeLine(line, number: number, range: range, parser: parser, reuse: &reuse, only: only, onError: onError) {
                records.append(r)
                ranges.append(withFeed)
            } else {
                failed = true
            }
        }
        return (records, failed ? nil : ranges)
    }

    /// The fields in `only` (all among `headFields`) of one canonical line (without its line
    /// feed), scanned from its start: `{"key":value,…` with the keys in the writer's order,
    /// each value a string without escapes or a number, until the first key past the head.
    /// Fields not in `only` are skipped unread, as `decode(_:reuse:only:)` skips them. nil when
    /// the line is not as the writer writes it (an escaped string, a key out of order, a value
    /// of the wrong kind): the caller parses it then.
    static func decodeHead(_ line: UnsafeRawBufferPointer, only: CanonicalRecord.Fields, keys: JSONKeyTable,
                           reuse: inout JSONStringReuse, into r: inout CanonicalRecord) -> Bool {
        let n = line.count
        guard n > 1, line[0] == 0x7B else { return false }   // {
        var op: CanonicalRecord.Op?
        var seen = CanonicalRecord.Fields()
        var last = -1   // the key before, in `Key` order
        var i = 1
        scan: while i < n {
            // "key":
            guard line[i] == 0x22 else { return false }
            var j = i + 1
            while j < n && line[j] != 0x22 { j += 1 }
            guard j + 1 < n, line[j + 1] == 0x3A else { return false }
            guard let index = keys.index(ofBytes: UnsafeRawBufferPointer(rebasing: line[(i + 1)..<j])),
                  index < Key.value.rawValue else { break scan }   // past the head: done
            guard index > last else { return false }
            last = index
            let key = Key(rawValue: index)!
            i = j + 2
            // The value: a string (its bytes between the quotes, no escape) or a number.
            let quoted = i < n && line[i] == 0x22
            let from: Int, to: Int
            if quoted {
                var e = i + 1
                while e < n && line[e] != 0x22 {
                    if line[e] == 0x5C { return false }
                    e += 1
                }
                guard e < n else { return false }
                (from, to, i) = (i + 1, e, e + 1)
            } else {
                var e = i
                while e < n && line[e] != 0x2C && line[e] != 0x7D { e += 1 }
                (from, to, i) = (i, e, e)
            }
            let v = UnsafeRawBufferPointer(rebasing: line[from..<to])
            let isString = key != .part && key != .parts
            guard quoted == isString else { return false }
            if key == .op {
                op = v.count == 6 && memcmp(v.baseAddress!, "upsert", 6) == 0 ? .upsert
                    : v.count == 6 && memcmp(v.baseAddress!, "delete", 6) == 0 ? .delete : nil
                if op == nil { return false }
            } else if only.has(field(key)) {
                seen.insert(field(key))
                switch key {
                case .kind: r.kind = reuse.string(bytes: v, slot: index)
                case .device: r.device = reuse.string(bytes: v, slot: index)
                case .receiver: r.receiver = reuse.string(bytes: v, slot: index)
                case .type: r.type = reuse.string(bytes: v, slot: index)
                case .uuid: r.uuid = String(decoding: v, as: UTF8.self)
                case .part, .parts:
                    guard let int = Int(String(decoding: v, as: UTF8.self)) else { return false }
                    if key == .part { r.part = int } else { r.parts = int }
                case .start, .end:
                    guard let (t, _) = Timestamp.parseRFC3339(v) else { return false }
                    if key == .start { r.start = t } else { r.end = t }
                case .utcOffset:
                    guard let seconds = Timestamp.parseOffset(v) else { return false }
                    r.utcOffset = seconds
                default: return false
                }
            }
            // , or the end of the object
            guard i < n else { return false }
            if line[i] == 0x7D { break scan }
            guard line[i] == 0x2C else { return false }
            i += 1
        }
        // A required field asked for and not there: the parser says so.
        let required = CanonicalRecord.Fields(rawValue: only.rawValue & CanonicalCodec.requiredFields.rawValue)
        guard let op, seen.rawValue & required.rawValue == required.rawValue else { return false }
        r.op = op
        return true
    }
}
