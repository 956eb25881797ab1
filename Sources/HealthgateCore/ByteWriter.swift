/// Writes bytes into room already made in a byte array, through a pointer: nothing is appended
/// a byte at a time to the array itself (a check of its capacity and uniqueness each time).
/// `append(to:atMost:)` makes room for the most the text can take, and every write is checked
/// against that room. The formats' own writes are extensions: JSON's (`JSONBytes`, this module:
/// the canonical NDJSON of every record ingest takes) and line protocol's (the InfluxDB sink's).
public struct ByteWriter {
    @usableFromInline let base: UnsafeMutablePointer<UInt8>
    @usableFromInline let capacity: Int
    @usableFromInline var written: Int

    /// The bytes written so far (into the room made: those the array held before not counted).
    @inlinable public var count: Int { written }

    /// Appends what `body` writes, at most `bound` bytes, to `out`.
    @inlinable public static func append<R>(to out: inout [UInt8], atMost bound: Int, _ body: (inout ByteWriter) -> R) -> R {
        var result: R?
        out.append(addingCapacity: bound) { (span: inout OutputSpan<UInt8>) in
            span.withUnsafeMutableBufferPointer { buffer, initialized in
                var w = ByteWriter(base: buffer.baseAddress!, capacity: buffer.count, written: initialized)
                result = body(&w)
                initialized = w.written
            }
        }
        return result!
    }

    /// The bytes `body` writes, at most `bound`.
    @inlinable public static func bytes(atMost bound: Int, _ body: (inout ByteWriter) -> Void) -> [UInt8] {
        var out: [UInt8] = []
        append(to: &out, atMost: bound, body)
        return out
    }

    @inlinable init(base: UnsafeMutablePointer<UInt8>, capacity: Int, written: Int) {
        self.base = base
        self.capacity = capacity
        self.written = written
    }

    @inline(__always) @inlinable func room(_ n: Int) {
        precondition(written + n <= capacity, "ByteWriter: the bound given was too small")
    }

    @inline(__always) @inlinable public mutating func byte(_ b: UInt8) {
        room(1)
        base[written] = b
        written += 1
    }

    @inline(__always) @inlinable public mutating func raw(_ p: UnsafeRawBufferPointer) {
        let n = p.count
        room(n)
        if let from = p.baseAddress {
            let to = UnsafeMutableRawPointer(base + written)
            if n >= 8 && n <= 32 {
                // A short text (a time, a name, a key) as two to four words, the last ones
                // overlapping: no call to memmove for the few dozen bytes most writes are.
                let a = from.loadUnaligned(as: UInt64.self), z = from.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self)
                if n > 16 {
                    let b = from.loadUnaligned(fromByteOffset: 8, as: UInt64.self)
                    let y = from.loadUnaligned(fromByteOffset: n - 16, as: UInt64.self)
                    to.storeBytes(of: b, toByteOffset: 8, as: UInt64.self)
                    to.storeBytes(of: y, toByteOffset: n - 16, as: UInt64.self)
                }
                to.storeBytes(of: a, as: UInt64.self)
                to.storeBytes(of: z, toByteOffset: n - 8, as: UInt64.self)
            } else {
                to.copyMemory(from: from, byteCount: n)
            }
        }
        written += n
    }

    @inline(__always) @inlinable public mutating func raw(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { raw($0) }
    }

    @inline(__always) @inlinable public mutating func lit(_ s: StaticString) {
        raw(UnsafeRawBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
    }

    /// At most `n` bytes written by `body` from the pointer it is given; it returns how many.
    @inline(__always) @inlinable public mutating func write(atMost n: Int, _ body: (UnsafeMutablePointer<UInt8>) -> Int) {
        room(n)
        let wrote = body(base + written)
        precondition(wrote <= n, "ByteWriter: wrote past the room asked for")
        written += wrote
    }

    /// A whole number in decimal: two digits at a time from its end into a scratch, then copied
    /// (a nanosecond time's 19 digits were 38 divisions, counted, then written one by one).
    @inlinable public mutating func int(_ v: Int64) {
        room(20)
        if v < 0 { byte(0x2D) }
        var scratch: (UInt64, UInt64, UInt64) = (0, 0, 0) // 24 bytes: an Int64 has at most 19 digits
        let n = withUnsafeMutableBytes(of: &scratch) { b -> Int in
            let end = b.baseAddress!.assumingMemoryBound(to: UInt8.self) + b.count
            let from = ByteWriter.writeDigits(v.magnitude, endingAt: end)
            (base + written).update(from: from, count: end - from)
            return end - from
        }
        written += n
    }

    /// `d` in Swift's shortest round-trip form (`description`'s text).
    @inlinable public mutating func shortest(_ d: Double) {
        if fixedDecimal(d) { return }
        var text = d.description
        text.withUTF8 { raw(UnsafeRawBufferPointer($0)) }
    }

    /// Writes `d` as `description` does, without making that string, when its text is a fixed
    /// decimal of at most 15 digits (what phones send: 1.375, 18.42, 36.6) and says whether it
    /// did. The fewest decimals `k` whose nearest k-decimal number `n / 10^k` reads back as `d`
    /// give the shortest digits that do, and of those the nearest: `description`'s. Exact: `n`
    /// below 10^15 is an integer a double holds, 10^k (k ≤ 19) too, so `n / 10^k` is the correctly
    /// rounded reading of the text; and `d · 10^k` lies within a quarter of `n`, so rounding it
    /// finds `n`. Outside [10^-4, 10^15) (where `description` turns to exponents) or with more
    /// digits, false: `description` writes it. Held to `description` by `ShortestDecimalTests`.
    @inlinable mutating func fixedDecimal(_ d: Double) -> Bool {
        let m = d.magnitude
        guard m >= 1e-4, m < 1e15 else { return false }
        var k = 0
        var scale = 1.0
        while k < 19 {
            k += 1
            scale *= 10
            let scaled = m * scale
            guard scaled < 1e15 else { return false }
            let n = scaled.rounded()
            guard n / scale == m else { continue }
            room(24)
            if d < 0 { byte(0x2D) }
            let digits = UInt64(n)
            var pow: UInt64 = 1
            for _ in 0..<k { pow &*= 10 }
            int(Int64(digits / pow))
            byte(0x2E)
            ByteWriter.writeDigits(digits % pow, width: k, endingAt: base + written + k)
            written += k
            return true
        }
        return false
    }

    /// Writes `v` in decimal ending just before `end` — its last `width` digits zero-padded, or
    /// (no width) all of them — two digits at a time from a table, and returns where it begins.
    /// For `int` and the digits of times (`Timestamp`).
    @inlinable @inline(__always) @discardableResult
    public static func writeDigits(_ v: UInt64, width: Int? = nil, endingAt end: UnsafeMutablePointer<UInt8>) -> UnsafeMutablePointer<UInt8>
    {
        let pairs: StaticString =
            "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899"
        let table = pairs.utf8Start
        var v = v
        var w = end
        @inline(__always) func pair() {
            let r = Int(v % 100) * 2
            v /= 100
            w -= 2
            w[0] = table[r]
            w[1] = table[r + 1]
        }
        if let width {
            let start = end - width
            while w - start >= 2 { pair() }
            if w > start {
                w -= 1
                w.pointee = UInt8(truncatingIfNeeded: 0x30 + v % 10)
            }
        } else {
            while v >= 100 { pair() }
            if v >= 10 {
                pair()
            } else {
                w -= 1
                w.pointee = UInt8(truncatingIfNeeded: 0x30 + v)
            }
        }
        return w
    }
}
