import FastJSON
import Testing

func text(_ w: JSONWriter) -> String { String(decoding: w.bytes, as: UTF8.self) }

/// Straightforward reference for the writer's string output: repair invalid UTF-8 the way Swift does
/// (one U+FFFD per maximal invalid subpart), then escape byte by byte.
func referenceQuoted(_ bytes: [UInt8]) -> [UInt8] {
    let repaired = String(decoding: bytes, as: UTF8.self)
    var out: [UInt8] = [0x22]
    let hex = Array("0123456789abcdef".utf8)
    for b in repaired.utf8 {
        switch b {
        case 0x22: out += [0x5C, 0x22]
        case 0x5C: out += [0x5C, 0x5C]
        case 0x0A: out += [0x5C, UInt8(ascii: "n")]
        case 0x0D: out += [0x5C, UInt8(ascii: "r")]
        case 0x09: out += [0x5C, UInt8(ascii: "t")]
        case 0x08: out += [0x5C, UInt8(ascii: "b")]
        case 0x0C: out += [0x5C, UInt8(ascii: "f")]
        case 0..<0x20: out += [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(b >> 4)], hex[Int(b & 15)]]
        default: out.append(b)
        }
    }
    out.append(0x22)
    return out
}

/// Deterministic pseudo-random numbers (SplitMix64).
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

@Suite("JSONWriter")
struct WriterTests {
    @Test func structureAndCommas() {
        var w = JSONWriter()
        w.beginObject()
        w.key("a"); w.int(1)
        w.key("b"); w.beginArray()
        w.int(1); w.string("x"); w.bool(true); w.bool(false); w.null()
        w.beginObject(); w.endObject()
        w.beginArray(); w.endArray()
        w.endArray()
        w.key("c"); w.beginObject(); w.key("d"); w.double(2.5); w.endObject()
        w.key("e"); w.uint(UInt64.max)
        w.endObject()
        #expect(text(w) == #"{"a":1,"b":[1,"x",true,false,null,{},[]],"c":{"d":2.5},"e":18446744073709551615}"#)
        #expect(w.isComplete)
        #expect(w.depth == 0)
    }

    @Test func depthAndCompleteness() {
        var w = JSONWriter()
        #expect(!w.isComplete)
        w.beginArray()
        #expect(w.depth == 1)
        w.beginObject()
        #expect(w.depth == 2)
        #expect(!w.isComplete)
        w.endObject()
        w.endArray()
        #expect(w.depth == 0)
        #expect(w.isComplete)
    }

    @Test func staticStringKeysAndValues() {
        var w = JSONWriter()
        let k: StaticString = "static"
        let v: StaticString = "vé\"lue"
        w.beginObject(); w.key(k); w.string(v); w.endObject()
        #expect(text(w) == #"{"static":"vé\"lue"}"#)
    }

    @Test func rawFragmentsAndNewlines() {
        var w = JSONWriter()
        w.beginObject()
        w.key("kept"); w.raw(Array(#"{"x":[1,2]}"#.utf8))
        w.key("n"); w.int(3)
        w.endObject()
        w.newline()
        w.beginArray(); w.raw(Array("1".utf8)); w.raw(Array("2".utf8)); w.endArray()
        w.newline()
        w.string("third")
        Array("4".utf8).withUnsafeBytes { raw in
            w.newline()
            w.raw(raw)
        }
        #expect(text(w) == "{\"kept\":{\"x\":[1,2]},\"n\":3}\n[1,2]\n\"third\"\n4")
    }

    @Test func resetKeepsCapacity() {
        var w = JSONWriter(capacity: 1 << 16)
        w.beginArray()
        for i in 0..<1000 { w.int(i) }
        w.endArray()
        let capacity = w.bytes.capacity
        #expect(capacity >= 1 << 16)
        w.reset()
        #expect(w.bytes.isEmpty)
        #expect(w.bytes.capacity == capacity)
        #expect(!w.isComplete)
        w.string("again")
        #expect(text(w) == #""again""#)
    }

    @Test func escapesEveryControlCharacter() {
        let named: [UInt8: String] = [0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r"]
        for c in UInt8(0)..<0x20 {
            var w = JSONWriter()
            w.string(String(decoding: [c], as: UTF8.self))
            let hex = Array("0123456789abcdef")
            let expected = named[c] ?? "\\u00\(hex[Int(c >> 4)])\(hex[Int(c & 15)])"
            #expect(text(w) == "\"\(expected)\"", "control \(c)")
        }
        var w = JSONWriter()
        w.string("\u{0}\u{1F}\u{7F} ~")
        #expect(text(w) == #""\u0000\u001f"# + "\u{7F}" + #" ~""#) // DEL needs no escape
    }

    @Test func escapesQuotesAndBackslashes() {
        var w = JSONWriter()
        w.beginObject()
        w.key(#"k"\"#); w.string(#"say "hi" \ C:\path\"#)
        w.endObject()
        #expect(text(w) == #"{"k\"\\":"say \"hi\" \\ C:\\path\\"}"#)
        #expect(String(decoding: referenceQuoted(Array(#"a"b\"#.utf8)), as: UTF8.self) == #""a\"b\\""#)
    }

    @Test func passesNonASCIIThrough() {
        var w = JSONWriter()
        let s = "héllo 日本語 😀 \u{2028} ünïcödé"
        w.string(s)
        #expect(w.bytes == [0x22] + Array(s.utf8) + [0x22])
        var w2 = JSONWriter()
        w2.string(utf8: Array(s.utf8)) // validated path: valid input is unchanged
        #expect(w2.bytes == w.bytes)
    }

    @Test func replacesInvalidUTF8() {
        let fffd = "\u{FFFD}"
        let cases: [([UInt8], String)] = [
            ([0x61, 0xFF, 0x62], "a\(fffd)b"),
            ([0x80], fffd), // lone continuation byte
            ([0xC3], fffd), // truncated at the end
            ([0xC3, 0x28], "\(fffd)("),
            ([0xC0, 0xAF], "\(fffd)\(fffd)"), // overlong: each byte invalid
            ([0xE0, 0x80, 0xAF], "\(fffd)\(fffd)\(fffd)"), // overlong 3-byte
            ([0xED, 0xA0, 0x80], "\(fffd)\(fffd)\(fffd)"), // surrogate D800
            ([0xE2, 0x82], fffd), // truncated 3-byte: one maximal subpart
            ([0xE2, 0x82, 0x41], "\(fffd)A"),
            ([0xF0, 0x9F, 0x98], fffd), // truncated 4-byte
            ([0xF0, 0x9F, 0x98, 0x41], "\(fffd)A"),
            ([0xF4, 0x90, 0x80, 0x80], "\(fffd)\(fffd)\(fffd)\(fffd)"), // above U+10FFFF
            ([0xF5, 0x80], "\(fffd)\(fffd)"),
            ([0xE2, 0x82, 0xAC, 0xFE], "€\(fffd)")
        ]
        for (bytes, expected) in cases {
            var w = JSONWriter()
            w.string(utf8: bytes)
            #expect(text(w) == "\"\(expected)\"", "\(bytes)")
            #expect(w.bytes == referenceQuoted(bytes), "\(bytes)")
            var k = JSONWriter()
            k.beginObject()
            bytes.withUnsafeBytes { k.key(utf8: $0) }
            k.null()
            k.endObject()
            #expect(text(k) == "{\"\(expected)\":null}", "key \(bytes)")
        }
    }

    @Test func escapingMatchesTheReferenceOnRandomInput() {
        var rng = SplitMix(state: 42)
        let alphabet: [[UInt8]] = [
            [0x61], [0x62], [0x20], [0x22], [0x5C], [0x0A], [0x00], [0x1F], [0x7F], Array("é".utf8),
            Array("日".utf8), Array("😀".utf8), [0x80], [0xFF], [0xC3], [0xE2, 0x82], [0xF0, 0x9F], [0xED, 0xA0, 0x80]
        ]
        for round in 0..<3000 {
            var bytes: [UInt8] = []
            let length = round < 2000 ? Int.random(in: 0..<40, using: &rng) : Int.random(in: 100..<400, using: &rng)
            let plain = round % 3 == 0 // mostly clean runs, to exercise the 8-byte scan
            for _ in 0..<length {
                if plain && Int.random(in: 0..<16, using: &rng) != 0 {
                    bytes.append(UInt8.random(in: 0x23...0x5B, using: &rng))
                } else {
                    bytes += alphabet[Int.random(in: 0..<alphabet.count, using: &rng)]
                }
            }
            var w = JSONWriter()
            w.string(utf8: bytes)
            #expect(w.bytes == referenceQuoted(bytes), "\(bytes)")
            // The String path (valid UTF-8 only) matches too.
            let s = String(decoding: bytes, as: UTF8.self)
            var ws = JSONWriter()
            ws.string(s)
            #expect(ws.bytes == referenceQuoted(Array(s.utf8)))
            if w.bytes != referenceQuoted(bytes) { break }
        }
    }

    @Test func longStringsWithEscapesAtEveryOffset() {
        for offset in 0..<140 {
            var bytes = Array(repeating: UInt8(ascii: "x"), count: 150)
            bytes[offset] = UInt8(ascii: "\"")
            let s = String(decoding: bytes, as: UTF8.self)
            var w = JSONWriter()
            w.string(s)
            #expect(w.bytes == referenceQuoted(bytes), "offset \(offset)")
        }
    }

    @Test func writtenStringsParseBack() throws {
        let parser = JSONParser()
        var all: [String] = []
        for c in UInt32(0)..<0x80 { all.append(String(UnicodeScalar(UInt8(c)))) }
        all += ["", "é", "😀", "\u{FFFF}", "\u{10FFFF}", "\u{2028}", String(repeating: "ab\"\\\n", count: 50)]
        var w = JSONWriter()
        w.beginArray()
        for s in all { w.string(s) }
        w.endArray()
        let doc = try parser.parse(w.bytes)
        #expect(doc.root.elements.map { $0.string! } == all)
    }

    @Test func numberFormatting() {
        func d(_ v: Double) -> String {
            var w = JSONWriter()
            w.double(v)
            return text(w)
        }
        #expect(d(412) == "412")
        #expect(d(-0.5) == "-0.5")
        #expect(d(312.4) == "312.4")
        #expect(d(1e-05) == "1e-05")
        #expect(d(1.7976931348623157e308) == "1.7976931348623157e+308")
        #expect(d(0) == "0")
        #expect(d(-0.0) == "-0")
        #expect(d(-412) == "-412")
        #expect(d(9_007_199_254_740_992) == "9007199254740992") // 2^53: still an integer
        #expect(d(-9_007_199_254_740_992) == "-9007199254740992")
        #expect(d(18_014_398_509_481_984) == "1.8014398509481984e+16") // 2^54: shortest round-trip text
        #expect(d(0.1) == "0.1")
        #expect(d(1.0 / 3.0) == "0.3333333333333333")
        #expect(d(.leastNonzeroMagnitude) == "5e-324")
        #expect(d(1e21) == "1e+21")
        #expect(d(.nan) == "null")
        #expect(d(.infinity) == "null")
        #expect(d(-.infinity) == "null")

        var w = JSONWriter()
        w.beginArray()
        w.int(9_007_199_254_740_993)
        w.int(Int64.min)
        w.int(Int64.max)
        w.int(0)
        w.int(-1)
        w.int(7)
        w.int(10)
        w.int(99)
        w.int(100)
        w.uint(UInt64.max)
        w.endArray()
        #expect(text(w) == "[9007199254740993,-9223372036854775808,9223372036854775807,0,-1,7,10,99,100,18446744073709551615]")
    }

    @Test func doublesRoundTripExactly() throws {
        let parser = JSONParser()
        var rng = SplitMix(state: 7)
        var values: [Double] = [0.1, 312.4, 1e-05, 1.7976931348623157e308, .leastNonzeroMagnitude, 2.2250738585072014e-308, 123456789.125]
        for _ in 0..<2000 {
            values.append(Double(bitPattern: rng.next() & 0x7FEF_FFFF_FFFF_FFFF)) // finite positives
            values.append(Double.random(in: -1e6...1e6, using: &rng))
        }
        var w = JSONWriter()
        w.beginArray()
        for v in values { w.double(v) }
        w.endArray()
        let doc = try parser.parse(w.bytes)
        let back = doc.root.elements.map { $0.double! }
        #expect(back == values)
    }
}
