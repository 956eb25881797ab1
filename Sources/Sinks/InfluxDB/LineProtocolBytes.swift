/// Writes line protocol into room already made in a byte array, through a pointer: what the
/// sink writes for each sample straight from its journal line (`LineProtocolEncoder.encode(_:
/// CanonicalView, into:)`), where appending each name, escape and number to the array itself
/// (a check of its capacity and uniqueness every time) cost as much as reading the line.
/// `append(to:atMost:)` makes room for the most the line can take; every write is checked
/// against that room. The escapes are `LineProtocolEncoder.appendEscaped`'s, byte for byte.
struct LineProtocolBytes {
    private let base: UnsafeMutablePointer<UInt8>
    private let capacity: Int
    /// Bytes written so far (into the room made: those before it not counted).
    private(set) var count: Int

    /// Appends what `body` writes, at most `bound` bytes, to `out`.
    static func append<R>(to out: inout [UInt8], atMost bound: Int, _ body: (inout LineProtocolBytes) -> R) -> R {
        var result: R?
        out.append(addingCapacity: bound) { (span: inout OutputSpan<UInt8>) in
            span.withUnsafeMutableBufferPointer { buffer, initialized in
                var w = LineProtocolBytes(base: buffer.baseAddress!, capacity: buffer.count, count: initialized)
                result = body(&w)
                initialized = w.count
            }
        }
        return result!
    }

    private init(base: UnsafeMutablePointer<UInt8>, capacity: Int, count: Int) {
        self.base = base
        self.capacity = capacity
        self.count = count
    }

    /// The most `escaped` writes for `n` bytes (each may become two, an empty name one `_`).
    @inline(__always) static func escapedBound(_ n: Int) -> Int { 2 * n + 1 }
    /// The most `int` or `float` write.
    static let numberBound = 32

    @inline(__always) private func room(_ n: Int) {
        precondition(count + n <= capacity, "LineProtocolBytes: the bound given was too small")
    }

    @inline(__always) mutating func byte(_ b: UInt8) {
        room(1)
        base[count] = b
        count += 1
    }

    @inline(__always) mutating func raw(_ p: UnsafeRawBufferPointer) {
        room(p.count)
        if let from = p.baseAddress { (base + count).update(from: from.assumingMemoryBound(to: UInt8.self), count: p.count) }
        count += p.count
    }

    @inline(__always) mutating func raw(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { raw($0) }
    }

    @inline(__always) mutating func lit(_ s: StaticString) {
        raw(UnsafeRawBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
    }

    /// A measurement (`,` and space escaped) or a tag key or value (`=` too): tabs and line
    /// breaks become escaped spaces, a trailing backslash is dropped, an empty name is `_`.
    mutating func escaped(_ p: UnsafeRawBufferPointer, measurement: Bool) {
        room(LineProtocolBytes.escapedBound(p.count))
        let start = count
        var w = base + count
        var i = 0
        let n = p.count
        if let from = p.baseAddress {
            // Eight bytes at a time while none of them is below `>` (every byte that changes is
            // at most `=`): one test of the word, one store.
            while i + 8 <= n {
                let word = (from + i).loadUnaligned(as: UInt64.self)
                if LineProtocolBytes.hasByteBelowGreaterThan(word) { break }
                UnsafeMutableRawPointer(w).storeBytes(of: word, as: UInt64.self)
                w += 8
                i += 8
            }
        }
        while i < n {
            let c = p[i]
            i += 1
            if c > 0x3D {
                w.pointee = c
                w += 1
                continue
            }
            switch c {
            case 0x2C, 0x20:
                w[0] = 0x5C; w[1] = c; w += 2
            case 0x3D where !measurement:
                w[0] = 0x5C; w[1] = c; w += 2
            case 9, 10, 13:
                w[0] = 0x5C; w[1] = 0x20; w += 2
            default:
                w.pointee = c
                w += 1
            }
        }
        count = w - base
        while count > start && base[count - 1] == 0x5C { count -= 1 }
        if count == start { byte(0x5F) }
    }

    /// Whether any of the eight bytes is below 0x3E (exact: the has-byte-less-than test).
    @inline(__always) static func hasByteBelowGreaterThan(_ x: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        return (x &- ones &* 0x3E) & ~x & highs != 0
    }

    /// A string field value: quoted, `"`, `\` and line feeds escaped.
    mutating func string(_ p: UnsafeRawBufferPointer) {
        room(2 * p.count + 2)
        base[count] = 0x22
        count += 1
        for c in p {
            switch c {
            case 0x22, 0x5C: base[count] = 0x5C; base[count + 1] = c; count += 2
            case 0x0A: base[count] = 0x5C; base[count + 1] = 0x6E; count += 2
            default: base[count] = c; count += 1
            }
        }
        base[count] = 0x22
        count += 1
    }

    mutating func int(_ v: Int64) {
        room(20)
        if v < 0 { byte(0x2D) }
        var m = v.magnitude
        var digits = 1
        var t = m
        while t >= 10 { t /= 10; digits += 1 }
        var i = count + digits
        count = i
        repeat {
            i -= 1
            base[i] = UInt8(truncatingIfNeeded: 0x30 + m % 10)
            m /= 10
        } while m > 0
    }

    /// `LineProtocolEncoder.appendFloat`: a whole number below 10^15 as an integer literal,
    /// anything else in Swift's shortest round-trip form.
    mutating func float(_ d: Double) {
        if d == d.rounded(.towardZero) && d.magnitude < 1e15 {
            int(Int64(d))
        } else {
            var text = d.description
            text.withUTF8 { raw(UnsafeRawBufferPointer($0)) }
        }
    }
}
