import FastJSON
import HealthgateCore

/// The canonical record as one JSON object per line: the journal's payload, the file sink's
/// lines and `replay`'s input. Field order is fixed so equal records give equal bytes.
public enum CanonicalCodec {
    /// Appends one record and a newline.
    public static func encode(_ r: CanonicalRecord, into w: inout JSONWriter) {
        w.beginObject()
        w.key("op"); w.string(r.op.rawValue)
        w.key("kind"); w.string(r.kind)
        w.key("device"); w.string(r.device)
        w.key("receiver"); w.string(r.receiver)
        w.key("uuid"); w.string(r.uuid)
        w.key("type"); w.string(r.type)
        if let v = r.part { w.key("part"); w.int(Int64(v)) }
        if let v = r.parts { w.key("parts"); w.int(Int64(v)) }
        if let v = r.start { w.key("start"); w.timestamp(v) }
        if let v = r.end { w.key("end"); w.timestamp(v) }
        if let v = r.utcOffset { w.key("utc_offset"); w.string(Timestamp.formatOffset(v)) }
        switch r.value {
        case .number(let d)?: w.key("value"); w.double(d)
        case .string(let s)?: w.key("value"); w.string(s)
        case nil: break
        }
        if let v = r.unit { w.key("unit"); w.string(v) }
        if let v = r.code { w.key("code"); w.int(Int64(v)) }
        if let v = r.activity { w.key("activity"); w.string(v) }
        if let v = r.durationS { w.key("duration_s"); w.double(v) }
        if let v = r.energyKcal { w.key("energy_kcal"); w.double(v) }
        if let v = r.distanceM { w.key("distance_m"); w.double(v) }
        for f in r.fields {
            w.key(f.name)
            w.raw(f.value.bytes)
        }
        if let s = r.source {
            w.key("source")
            w.beginObject()
            if let a = s.app { w.key("app"); w.string(a) }
            if let d = s.device { w.key("device"); w.string(d) }
            w.endObject()
        }
        if let m = r.metadata { w.key("metadata"); w.raw(m.bytes) }
        if !r.extra.isEmpty {
            w.key("extra")
            w.beginObject()
            for f in r.extra {
                w.key(f.name)
                w.raw(f.value.bytes)
            }
            w.endObject()
        }
        w.endObject()
        w.newline()
    }

    /// All records as NDJSON.
    public static func encodeLines(_ records: [CanonicalRecord]) -> [UInt8] {
        var w = JSONWriter(capacity: records.count * 256)
        for r in records { encode(r, into: &w) }
        return w.bytes
    }

    /// Reads NDJSON canonical records. Blank lines are skipped; a line that is not a canonical
    /// record is reported with its 1-based line number.
    public static func decodeLines(_ bytes: [UInt8], parser: JSONParser,
                                   onError: (Int, CanonicalDecodeError) -> Void = { _, _ in }) -> [CanonicalRecord] {
        var out: [CanonicalRecord] = []
        bytes.withUnsafeBytes { all in
            var lineStart = 0
            var lineNumber = 0
            while lineStart < all.count {
                lineNumber += 1
                var lineEnd = lineStart
                if let p = memchrIndex(all, from: lineStart, byte: 0x0A) { lineEnd = p } else { lineEnd = all.count }
                let line = UnsafeRawBufferPointer(rebasing: all[lineStart..<lineEnd])
                lineStart = lineEnd + 1
                if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { continue }
                do {
                    let doc = try parser.parse(line)
                    out.append(try decode(doc.root))
                } catch let e as JSONError {
                    onError(lineNumber, CanonicalDecodeError("\(e)"))
                } catch let e as CanonicalDecodeError {
                    onError(lineNumber, e)
                } catch {
                    onError(lineNumber, CanonicalDecodeError("\(error)"))
                }
            }
        }
        return out
    }

    private static func memchrIndex(_ buf: UnsafeRawBufferPointer, from: Int, byte: UInt8) -> Int? {
        var i = from
        while i < buf.count {
            if buf[i] == byte { return i }
            i += 1
        }
        return nil
    }

    static let known: Set<String> = [
        "op", "kind", "device", "receiver", "uuid", "type", "part", "parts", "start", "end", "utc_offset",
        "value", "unit", "code", "activity", "duration_s", "energy_kcal", "distance_m", "source", "metadata", "extra",
    ]

    /// One canonical record from a parsed JSON object.
    public static func decode(_ o: JSONRef) throws(CanonicalDecodeError) -> CanonicalRecord {
        guard o.kind == .object else { throw CanonicalDecodeError("a record must be a JSON object") }
        func str(_ k: String, required: Bool = true) throws(CanonicalDecodeError) -> String? {
            guard let v = o[k], !v.isNull else {
                if required { throw CanonicalDecodeError("\"\(k)\" is missing") }
                return nil
            }
            guard let s = v.string else { throw CanonicalDecodeError("\"\(k)\" must be a string") }
            return s
        }
        func num(_ k: String) throws(CanonicalDecodeError) -> Double? {
            guard let v = o[k], !v.isNull else { return nil }
            guard let d = v.double else { throw CanonicalDecodeError("\"\(k)\" must be a number") }
            return d
        }
        func int(_ k: String) throws(CanonicalDecodeError) -> Int? {
            guard let v = o[k], !v.isNull else { return nil }
            guard let i = v.int64 else { throw CanonicalDecodeError("\"\(k)\" must be an integer") }
            return Int(i)
        }
        func time(_ k: String) throws(CanonicalDecodeError) -> Timestamp? {
            guard let s = try str(k, required: false) else { return nil }
            guard let (t, _) = Timestamp.parseRFC3339(s) else {
                throw CanonicalDecodeError("\"\(k)\" is not an RFC 3339 time: \(s)")
            }
            return t
        }
        guard let op = CanonicalRecord.Op(rawValue: try str("op")!) else {
            throw CanonicalDecodeError("\"op\" must be \"upsert\" or \"delete\"")
        }
        var r = CanonicalRecord(op: op, kind: try str("kind")!, device: try str("device")!,
                                receiver: try str("receiver")!, uuid: try str("uuid")!, type: try str("type")!)
        r.part = try int("part")
        r.parts = try int("parts")
        r.start = try time("start")
        r.end = try time("end")
        if let off = try str("utc_offset", required: false) {
            guard let secs = Timestamp.parseOffset(off) else { throw CanonicalDecodeError("\"utc_offset\" is not ±hh:mm") }
            r.utcOffset = secs
        }
        if let v = o["value"], !v.isNull {
            if let s = v.string { r.value = .string(s) } else if let d = v.double { r.value = .number(d) } else {
                throw CanonicalDecodeError("\"value\" must be a number or a string")
            }
        }
        r.unit = try str("unit", required: false)
        r.code = try int("code")
        r.activity = try str("activity", required: false)
        r.durationS = try num("duration_s")
        r.energyKcal = try num("energy_kcal")
        r.distanceM = try num("distance_m")
        if let s = o["source"], s.kind == .object {
            r.source = RecordSource(app: s["app"]?.string, device: s["device"]?.string)
        }
        if let m = o["metadata"], !m.isNull { r.metadata = raw(m) }
        for (k, v) in o.members {
            let name = k.string
            if !known.contains(name) { r.fields.append(RecordField(name, raw(v))) }
        }
        if let e = o["extra"], e.kind == .object {
            for (k, v) in e.members { r.extra.append(RecordField(k.string, raw(v))) }
        }
        return r
    }

    /// A subtree as compact JSON text.
    public static func raw(_ v: JSONRef) -> RawJSON {
        var w = JSONWriter(capacity: 32)
        v.write(to: &w)
        return RawJSON(bytes: w.bytes)
    }
}

public struct CanonicalDecodeError: Error, Sendable, Equatable, CustomStringConvertible {
    public var description: String
    public init(_ d: String) { description = d }
}

extension JSONWriter {
    mutating func timestamp(_ t: Timestamp) {
        var buf = [UInt8]()
        buf.reserveCapacity(32)
        buf.append(0x22)
        t.appendRFC3339(to: &buf)
        buf.append(0x22)
        raw(buf)
    }
}
