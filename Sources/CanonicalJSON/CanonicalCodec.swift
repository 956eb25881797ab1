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

    /// Calls `body` for each line that is not blank (empty, or at most two spaces and carriage
    /// returns) with its text, its 1-based line number, its byte range with its line feed and
    /// without it.
    static func forEachLine(
        _ bytes: [UInt8],
        _ body: (_ text: UnsafeRawBufferPointer, _ number: Int, _ withFeed: Range<Int>, _ range: Range<Int>) -> Void
    ) {
        bytes.withUnsafeBytes { all in
            guard let base = all.baseAddress else { return }
            var lineStart = 0
            var lineNumber = 0
            while lineStart < all.count {
                lineNumber += 1
                let lineEnd =
                    memchr(base + lineStart, 0x0A, all.count - lineStart).map { base.distance(to: UnsafeRawPointer($0)) }
                    ?? all.count
                let line = UnsafeRawBufferPointer(start: base + lineStart, count: lineEnd - lineStart)
                let range = lineStart..<lineEnd
                lineStart = lineEnd + 1
                if line.isEmpty || (line.count <= 2 && line.allSatisfy { $0 == 0x20 || $0 == 0x0D }) { continue }
                body(line, lineNumber, range.lowerBound..<min(lineEnd + 1, all.count), range)
            }
        }
    }

    /// One line (without its line feed) read by the parser: a line from elsewhere (a file given
    /// to `replay`), or one the walk of a `Record` does not read.
    public static func decodeLine(_ line: ArraySlice<UInt8>) throws(CanonicalDecodeError) -> CanonicalRecord {
        let parser = JSONParser()
        let result: Result<CanonicalRecord, CanonicalDecodeError> = line.withUnsafeBytes { b in
            do {
                return .success(try decode(try parser.parse(b).root))
            } catch let e as CanonicalDecodeError {
                return .failure(e)
            } catch {
                return .failure(CanonicalDecodeError("\(error)"))
            }
        }
        return try result.get()
    }

    /// Reads NDJSON canonical records. Blank lines are skipped; a line that is not a canonical
    /// record is reported with its 1-based line number and its byte range.
    public static func decodeLines(
        _ bytes: [UInt8], parser: JSONParser,
        onError: (Int, CanonicalDecodeError, Range<Int>) -> Void = { _, _, _ in }
    ) -> [CanonicalRecord] {
        var out: [CanonicalRecord] = []
        forEachLine(bytes) { line, number, _, range in
            do {
                out.append(try decode(try parser.parse(line).root))
            } catch let e as CanonicalDecodeError {
                onError(number, e, range)
            } catch {
                onError(number, CanonicalDecodeError("\(error)"), range)
            }
        }
        return out
    }

    /// One canonical record from a parsed JSON object, its members in any order.
    public static func decode(_ o: JSONRef) throws(CanonicalDecodeError) -> CanonicalRecord {
        guard o.kind == .object else { throw CanonicalDecodeError("a record must be a JSON object") }
        var op: CanonicalRecord.Op?
        var kind: String?, device: String?, receiver: String?, uuid: String?, type: String?
        var r = CanonicalRecord(kind: "", device: "", receiver: "", uuid: "", type: "")
        func str(_ v: JSONRef, _ k: StaticString) throws(CanonicalDecodeError) -> String? {
            if v.isNull { return nil }
            guard let s = v.string else { throw CanonicalDecodeError("\"\(k)\" must be a string") }
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
            // Members of no canonical name go to `fields` (the walker's rule too: `LineWalk`).
            let key = k.withBytes { CanonicalRecord.Field(key: $0) } ?? .fields
            switch key {
            case .op:
                guard let s = try str(v, "op"), let parsed = CanonicalRecord.Op(rawValue: s) else {
                    throw CanonicalDecodeError("\"op\" must be \"upsert\" or \"delete\"")
                }
                op = parsed
            case .kind: kind = try str(v, "kind")
            case .device: device = try str(v, "device")
            case .receiver: receiver = try str(v, "receiver")
            case .uuid: uuid = try str(v, "uuid")
            case .type: type = try str(v, "type")
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
            case .timeZone: r.timeZone = try str(v, "timezone")
            case .value:
                if v.isNull { break }
                if let s = v.string {
                    r.value = .string(s)
                } else if let d = v.double {
                    r.value = .number(d)
                } else {
                    throw CanonicalDecodeError("\"value\" must be a number or a string")
                }
            case .unit: r.unit = try str(v, "unit")
            case .code: r.code = try int(v, "code")
            case .activity: r.activity = try str(v, "activity")
            case .durationS: r.durationS = try num(v, "duration_s")
            case .energyKcal: r.energyKcal = try num(v, "energy_kcal")
            case .distanceM: r.distanceM = try num(v, "distance_m")
            case .source:
                if v.kind == .object {
                    let app = v["app"].flatMap(\.string)
                    let dev = v["device"].flatMap(\.string)
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
