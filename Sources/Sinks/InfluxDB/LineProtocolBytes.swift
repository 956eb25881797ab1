import HealthgateCore

/// The writer of line protocol: `ByteWriter` (room made once in a byte array, written through a
/// pointer) with line protocol's escapes: the one escaper of the sink's output.
typealias LineProtocolBytes = ByteWriter

extension ByteWriter {
    /// The most `escaped` writes for `n` bytes (each may become two, an empty name one `_`).
    @inline(__always) static func escapedBound(_ n: Int) -> Int { 2 * n + 1 }
    /// The most `int` or `float` write (in line protocol).
    static let lineNumberBound = 32

    /// A measurement (`,` and space escaped) or a tag key or value (`=` too): tabs and line
    /// breaks become escaped spaces, a trailing backslash is dropped, an empty name is `_`.
    mutating func escaped(_ p: UnsafeRawBufferPointer, measurement: Bool) {
        write(atMost: ByteWriter.escapedBound(p.count)) { start in
            var w = start
            var i = 0
            let n = p.count
            if let from = p.baseAddress {
                // Eight bytes at a time while none of them is below `>` (every byte that changes
                // is at most `=`): one test of the word, one store.
                while i + 8 <= n {
                    let word = (from + i).loadUnaligned(as: UInt64.self)
                    if ByteWriter.hasByteBelowGreaterThan(word) { break }
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
            while w > start && w[-1] == 0x5C { w -= 1 }
            if w == start {
                w.pointee = 0x5F
                w += 1
            }
            return w - start
        }
    }

    /// Whether any of the eight bytes is below 0x3E (exact: the has-byte-less-than test).
    @inline(__always) static func hasByteBelowGreaterThan(_ x: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        return (x &- ones &* 0x3E) & ~x & highs != 0
    }

    /// A string field value: quoted, `"`, `\` and line feeds escaped.
    mutating func string(_ p: UnsafeRawBufferPointer) {
        write(atMost: 2 * p.count + 2) { start in
            var w = start
            w.pointee = 0x22
            w += 1
            for c in p {
                switch c {
                case 0x22, 0x5C: w[0] = 0x5C; w[1] = c; w += 2
                case 0x0A: w[0] = 0x5C; w[1] = 0x6E; w += 2
                default: w.pointee = c; w += 1
                }
            }
            w.pointee = 0x22
            return w + 1 - start
        }
    }

    /// A whole number below 10^15 as an integer literal (as Syncky writes it: `value=412`),
    /// anything else in Swift's shortest round-trip form.
    mutating func float(_ d: Double) {
        if d == d.rounded(.towardZero) && d.magnitude < 1e15 {
            int(Int64(d))
        } else {
            shortest(d)
        }
    }
}
