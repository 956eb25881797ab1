import HealthgateCore
import Testing

/// `ByteWriter.shortest` writes a number's text without making `description`'s string when the
/// text is a short fixed decimal: it must be `description`'s, byte for byte, for every double —
/// the journal's numbers (canonical JSON) and InfluxDB's fields (line protocol) are written by it.
@Suite struct ShortestDecimalTests {
    static func written(_ d: Double) -> String {
        String(decoding: ByteWriter.bytes(atMost: 32) { $0.shortest(d) }, as: UTF8.self)
    }

    /// A small deterministic generator, xorshift64 (the same values each run, so a failure comes back).
    struct Mix {
        var state: UInt64
        mutating func next() -> UInt64 {
            state ^= state << 13; state ^= state >> 7; state ^= state << 17
            return state
        }
    }

    @Test func decimalsAsPhonesSendThemAreWrittenAsDescriptionWritesThem() {
        // Texts of 1 to 17 digits with the point anywhere, read as Swift reads them: most are
        // short decimals (the fast way), the longest are not (description's way); both must agree.
        var mix = Mix(state: 1)
        var mismatches: [String] = []
        for _ in 0..<200_000 {
            let digits = Int(mix.next() % 17) + 1
            var text = ""
            for i in 0..<digits { text.append(Character(UnicodeScalar(UInt8(0x30 + (i == 0 ? 1 + mix.next() % 9 : mix.next() % 10))))) }
            let point = Int(mix.next() % UInt64(digits + 6))
            if point < digits {
                text.insert(".", at: text.index(text.startIndex, offsetBy: point))
                if point == 0 { text = "0" + text }
            } else {
                text = "0." + String(repeating: "0", count: point - digits) + text
            }
            if mix.next() % 2 == 0 { text = "-" + text }
            guard let d = Double(text) else { continue }
            if Self.written(d) != d.description { mismatches.append("\(text): \(Self.written(d)) vs \(d.description)") }
        }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(10))")
    }

    @Test func anyDoubleIsWrittenAsDescriptionWritesIt() {
        var mix = Mix(state: 2)
        var mismatches: [String] = []
        for _ in 0..<200_000 {
            let d = Double(bitPattern: mix.next())
            guard d.isFinite else { continue }
            if Self.written(d) != d.description { mismatches.append("\(d.bitPattern): \(Self.written(d)) vs \(d.description)") }
        }
        // Near the edges of the fixed form, and values one step from a short decimal.
        let edges: [Double] = [
            1e-4, 0.99999e-4, 1.0000000000001e-4, 0.0001234, 0.00012345678901234, 1e15, 999_999_999_999_999.9,
            99_999_999_999_999.9, 9_007_199_254_740_992, 0.1, 0.2, 0.3, 0.1 + 0.2, 1.375, 18.42, 36.6, 2.5, 0.5,
            123_456_789.123456, 1 / 3, 2 / 3, 1e-5, Double.leastNonzeroMagnitude, Double.greatestFiniteMagnitude, -0.0, 0, 72, 1e14,
            1e14 + 0.5
        ]
        for e in edges {
            for d in [e, -e, e.nextUp, e.nextDown, (-e).nextUp, (-e).nextDown] where d.isFinite {
                if Self.written(d) != d.description { mismatches.append("\(d): \(Self.written(d)) vs \(d.description)") }
            }
        }
        // Every short decimal of a few digits, and its neighbours.
        for n in 1...20_000 {
            for k in 1...6 {
                var scale = 1.0
                for _ in 0..<k { scale *= 10 }
                let d = Double(n) / scale
                for x in [d, d.nextUp, d.nextDown] where Self.written(x) != x.description {
                    mismatches.append("\(x): \(Self.written(x)) vs \(x.description)")
                }
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(10))")
    }
}

/// `ByteWriter.raw` copies a short text as overlapping words: every length, after any number of
/// bytes already written, gives the bytes given.
@Suite struct ByteWriterRawTests {
    @Test func everyLengthIsCopiedWhole() {
        let source = (0..<64).map { UInt8(0x41 + $0 % 50) }
        for before in 0..<9 {
            for length in 0...40 {
                let written = ByteWriter.bytes(atMost: before + length) { w in
                    for _ in 0..<before { w.byte(0x2E) }
                    source.withUnsafeBytes { w.raw(UnsafeRawBufferPointer(rebasing: $0[3..<(3 + length)])) }
                }
                #expect(written == Array(repeating: 0x2E, count: before) + Array(source[3..<(3 + length)]), "\(before) + \(length)")
            }
        }
    }
}
