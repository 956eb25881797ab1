/// The canonical record as one line of NDJSON: the journal's payload, the file sink's lines
/// and `replay`'s input. (Reading it back needs a JSON parser: `CanonicalJSON`.)
extension CanonicalRecord {
    /// Appends this record as one line of canonical NDJSON, with its line feed. Written byte by
    /// byte: the keys are fixed ASCII, so only values need escaping, and this runs once per
    /// sample on the ingest path. Field order is fixed, so equal records give equal bytes.
    public func appendNDJSON(to out: inout [UInt8]) {
        let r = self
        var o = JSONBytes(out: out)
        out = []
        o.lit("{\"op\":"); o.str(r.op.rawValue)
        o.lit(",\"kind\":"); o.str(r.kind)
        o.lit(",\"device\":"); o.str(r.device)
        o.lit(",\"receiver\":"); o.str(r.receiver)
        o.lit(",\"uuid\":"); o.str(r.uuid)
        o.lit(",\"type\":"); o.str(r.type)
        if let v = r.part { o.lit(",\"part\":"); o.int(Int64(v)) }
        if let v = r.parts { o.lit(",\"parts\":"); o.int(Int64(v)) }
        if let v = r.start { o.lit(",\"start\":"); o.time(v) }
        if let v = r.end { o.lit(",\"end\":"); o.time(v) }
        if let v = r.utcOffset { o.lit(",\"utc_offset\":"); o.str(Timestamp.formatOffset(v)) }
        switch r.value {
        case .number(let d)?: o.lit(",\"value\":"); o.double(d)
        case .string(let s)?: o.lit(",\"value\":"); o.str(s)
        case nil: break
        }
        if let v = r.unit { o.lit(",\"unit\":"); o.str(v) }
        if let v = r.code { o.lit(",\"code\":"); o.int(Int64(v)) }
        if let v = r.activity { o.lit(",\"activity\":"); o.str(v) }
        if let v = r.durationS { o.lit(",\"duration_s\":"); o.double(v) }
        if let v = r.energyKcal { o.lit(",\"energy_kcal\":"); o.double(v) }
        if let v = r.distanceM { o.lit(",\"distance_m\":"); o.double(v) }
        for f in r.fields {
            o.byte(0x2C); o.str(f.name); o.byte(0x3A); o.out.append(contentsOf: f.value.bytes)
        }
        if let s = r.source {
            o.lit(",\"source\":{")
            var first = true
            if let a = s.app { o.lit("\"app\":"); o.str(a); first = false }
            if let d = s.device {
                if !first { o.byte(0x2C) }
                o.lit("\"device\":"); o.str(d)
            }
            o.byte(0x7D)
        }
        if !r.tags.isEmpty {
            o.lit(",\"tags\":{")
            for (i, t) in r.tags.enumerated() {
                if i > 0 { o.byte(0x2C) }
                o.str(t.name); o.byte(0x3A); o.str(t.value)
            }
            o.byte(0x7D)
        }
        if let m = r.metadata { o.lit(",\"metadata\":"); o.out.append(contentsOf: m.bytes) }
        if !r.extra.isEmpty {
            o.lit(",\"extra\":{")
            for (i, f) in r.extra.enumerated() {
                if i > 0 { o.byte(0x2C) }
                o.str(f.name); o.byte(0x3A); o.out.append(contentsOf: f.value.bytes)
            }
            o.byte(0x7D)
        }
        o.lit("}\n")
        out = o.out
    }
}

/// Appends JSON text to a byte array: literals as they are, strings escaped as RFC 8259 asks
/// (the same escapes `JSONWriter` makes), numbers in their shortest exact form.
struct JSONBytes {
    var out: [UInt8]

    @inline(__always) mutating func byte(_ b: UInt8) { out.append(b) }

    @inline(__always) mutating func lit(_ s: StaticString) {
        out.append(contentsOf: UnsafeRawBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
    }

    mutating func str(_ s: String) {
        var s = s
        s.withUTF8 { p in
            out.append(0x22)
            var runStart = 0
            for i in 0..<p.count {
                let b = p[i]
                guard b < 0x20 || b == 0x22 || b == 0x5C else { continue }
                if i > runStart { out.append(contentsOf: UnsafeBufferPointer(rebasing: p[runStart..<i])) }
                out.append(0x5C)
                switch b {
                case 0x22: out.append(0x22)
                case 0x5C: out.append(0x5C)
                case 0x0A: out.append(0x6E)
                case 0x0D: out.append(0x72)
                case 0x09: out.append(0x74)
                case 0x08: out.append(0x62)
                case 0x0C: out.append(0x66)
                default:
                    let hex: [UInt8] = Array("0123456789abcdef".utf8)
                    out.append(contentsOf: [0x75, 0x30, 0x30, hex[Int(b >> 4)], hex[Int(b & 0xF)]])
                }
                runStart = i + 1
            }
            if p.count > runStart { out.append(contentsOf: UnsafeBufferPointer(rebasing: p[runStart..<p.count])) }
            out.append(0x22)
        }
    }

    mutating func int(_ v: Int64) {
        if v < 0 { out.append(0x2D) }
        var m = v.magnitude
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { buf in
            var i = 20
            repeat {
                i -= 1
                buf[i] = UInt8(truncatingIfNeeded: 0x30 + m % 10)
                m /= 10
            } while m > 0
            out.append(contentsOf: UnsafeBufferPointer(rebasing: buf[i..<20]))
        }
    }

    mutating func double(_ d: Double) {
        if !d.isFinite {
            lit("null")
        } else if d.magnitude <= 9_007_199_254_740_992 && d == Double(Int64(d)) {
            int(Int64(d))
        } else {
            out.append(contentsOf: d.description.utf8)
        }
    }

    mutating func time(_ t: Timestamp) {
        withUnsafeTemporaryAllocation(byteCount: 40, alignment: 1) { buf in
            buf[0] = 0x22
            let n = t.formatRFC3339(into: UnsafeMutableRawBufferPointer(rebasing: buf[1...]))
            buf[n + 1] = 0x22
            out.append(contentsOf: UnsafeRawBufferPointer(rebasing: buf[0..<(n + 2)]))
        }
    }
}
