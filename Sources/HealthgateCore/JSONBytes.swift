import Glibc

/// The writer of JSON text: `ByteWriter` (room made once in a byte array, written through a
/// pointer) with strings escaped as RFC 8259 asks (the same escapes `JSONWriter` makes),
/// numbers in their shortest exact form.
public typealias JSONBytes = ByteWriter

extension ByteWriter {
    /// The most `str(s)` writes.
    @inline(__always) public static func bound(_ s: String) -> Int { 6 * s.utf8.count + 2 }
    /// The most `int`, `double` or `time` write.
    public static let numberBound = 40

    /// A string as a JSON string, escaped where it must be (read where it lies: a record's eight
    /// or so strings each took a retain and a release when copied to reach their bytes).
    @inline(__always) public mutating func str(_ s: String) {
        // (Not `withUTF8Bytes`: a generic closure here is not specialized as well.)
        if s.utf8.withContiguousStorageIfAvailable({ str(UnsafeRawBufferPointer($0)) }) == nil {
            var s = s // not contiguous UTF-8 (bridged): made so
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
