import FastJSON
import Testing

/// Structural equality of two values (possibly from different parsers), including number kinds.
func sameTree(_ a: JSONRef, _ b: JSONRef) -> Bool {
    guard a.kind == b.kind else { return false }
    switch a.kind {
    case .object:
        let am = Array(a.members), bm = Array(b.members)
        guard am.count == bm.count else { return false }
        for (x, y) in zip(am, bm) where x.key.string != y.key.string || !sameTree(x.value, y.value) {
            return false
        }
        return true
    case .array:
        let ae = Array(a.elements), be = Array(b.elements)
        return ae.count == be.count && zip(ae, be).allSatisfy { sameTree($0, $1) }
    case .string: return a.string == b.string
    case .int: return a.int64 == b.int64
    case .uint: return a.uint64 == b.uint64
    case .double:
        let x = a.double!, y = b.double!
        return x == y && x.sign == y.sign
    case .bool: return a.bool == b.bool
    case .null: return true
    }
}

let variedDocument = #"""
    {
      "v": 1, "type": "sync", "device": "d_zsOZnTQUz_juWFVljuOOBQ",
      "samples": [
        {"uuid": "5E1D0000-0000-4000-8000-000000000001", "type": "steps", "value": 412, "unit": "count",
         "start": "2026-10-14T07:01:00Z", "end": "2026-10-14T07:01:59Z",
         "source": {"app": "com.apple.Health", "device": "Apple Watch"}},
        {"uuid": "5E1D0000-0000-4000-8000-000000000002", "type": "heart_rate", "value": 72.5, "unit": "count/min",
         "metadata": {"HKMetadataKeyHeartRateMotionContext": 1, "nested": [[], {}, [[null]]]}}
      ],
      "numbers": [0, -0, -0.0, 1.0, 412.0, 1e300, -1e-300, 5e-324, 9223372036854775807, -9223372036854775808,
                  18446744073709551615, 9007199254740993, 0.1, 1E+2, 6.02e23],
      "strings": ["", "plain", "quote\" backslash\\ slash\/", "ctl\u0000\u001f\n\t", "é日😀", "\ud83d\ude00",
                  "long ................................................................................................................................ \n end"],
      "bools": [true, false], "null": null, "empty_object": {}, "empty_array": [],
      "unicode key é": "v", "": "empty key", "dup": 1, "dup": 2,
      "deleted": [], "acks": [], "more": false,
      "delivery": {"destination": "wh_hmf4Hk2wv-D-TUbXkl-UCA", "id": "01a1393a-8960-7b26-8ec7-5d0493cc3337",
                   "index": 0, "count": 1, "sent_at": "2026-10-14T07:05:00Z"}
    }
    """#

@Suite("Round trip and document lifetime")
struct RoundTripTests {
    @Test func parseWriteParseGivesTheSameTree() throws {
        let p1 = JSONParser(), p2 = JSONParser(), p3 = JSONParser()
        let original = try p1.parse(variedDocument)
        var w = JSONWriter()
        original.root.write(to: &w)
        let first = w.bytes
        let again = try p2.parse(first)
        #expect(sameTree(original.root, again.root))

        // Writing the re-parsed tree gives the very same bytes (a fixed point).
        var w2 = JSONWriter()
        again.root.write(to: &w2)
        #expect(w2.bytes == first)
        #expect(sameTree(try p3.parse(w2.bytes).root, original.root))

        // Doubles stay doubles, integers stay integers.
        let numbers = again.root["numbers"]!
        #expect(numbers[3]?.kind == .double)
        #expect(numbers[4]?.kind == .double)
        #expect(numbers[1]?.kind == .int)
        #expect(numbers[10]?.kind == .uint)
        #expect(numbers[11]?.int64 == 9_007_199_254_740_993)
        #expect(numbers[2]?.double?.sign == .minus)
        #expect(again.root["dup"]?.int64 == 1)
        #expect(again.root.members.filter { $0.key == "dup" }.count == 2)
    }

    @Test func subtreesKeepUnknownFields() throws {
        let parser = JSONParser()
        let doc = try parser.parse(variedDocument)
        var w = JSONWriter()
        w.beginObject()
        w.key("known"); w.string("x")
        for (key, value) in doc.root.members where key != "samples" && key != "numbers" {
            key.withBytes { w.key(utf8: $0) }
            value.write(to: &w)
        }
        w.key("first_metadata")
        doc.root["samples"]![1]!["metadata"]!.write(to: &w)
        w.endObject()
        #expect(w.isComplete)
        let other = JSONParser()
        let back = try other.parse(w.bytes)
        #expect(back.root["known"]?.string == "x")
        #expect(sameTree(back.root["strings"]!, doc.root["strings"]!))
        #expect(sameTree(back.root["delivery"]!, doc.root["delivery"]!))
        #expect(back.root["first_metadata"]?.description == #"{"HKMetadataKeyHeartRateMotionContext":1,"nested":[[],{},[[null]]]}"#)
        #expect(back.root["samples"] == nil)
    }

    @Test func parserReusedForManyDocuments() throws {
        let parser = JSONParser()
        for i in 0..<2_000 {
            let size = i % 50
            var text = #"{"i":\#(i),"items":["#
            for j in 0..<size { text += (j > 0 ? "," : "") + #"{"j":\#(j),"s":"\#(String(repeating: "x", count: j))"}"# }
            text += "]}"
            let doc = try parser.parse(text)
            #expect(doc.root["i"]?.int64 == Int64(i))
            let items = doc.root["items"]!
            #expect(items.count == size)
            if size > 0 {
                #expect(items[size - 1]?["s"]?.string == String(repeating: "x", count: size - 1))
            }
        }
        // A big document, then a small one, then a big one again (buffers shrink and grow correctly).
        let big = "[" + (0..<50_000).map { "\($0)" }.joined(separator: ",") + "]"
        #expect(try parser.parse(big).root.count == 50_000)
        #expect(try parser.parse("[1]").root.count == 1)
        #expect(try parser.parse(big).root[49_999]?.int64 == 49_999)
    }

    @Test func refsFromAnOldDocumentAreInvalidAfterReparse() throws {
        let parser = JSONParser()
        let first = try parser.parse(#"{"a":"first"}"#)
        let a = first.root["a"]!
        #expect(first.isValid && a.isValid)
        #expect(a.string == "first")

        let second = try parser.parse(#"{"a":"second"}"#)
        #expect(!first.isValid)
        #expect(!a.isValid)
        #expect(!first.root.isValid)
        #expect(second.isValid)
        #expect(second.root["a"]?.string == "second")

        // A failed parse invalidates too.
        #expect(throws: JSONError.self) { try parser.parse("{") }
        #expect(!second.isValid)

        // Another parser's documents are unaffected.
        let other = JSONParser()
        let kept = try other.parse("[1]")
        _ = try parser.parse("[2]")
        #expect(kept.isValid && kept.root[0]?.int64 == 1)
    }

    @Test func refsAreInvalidOnceTheParserIsGone() throws {
        var ref: JSONRef?
        do {
            let parser = JSONParser()
            let doc = try parser.parse(#"{"a":1}"#)
            ref = doc.root["a"]
            #expect(ref?.int64 == 1)
        }
        #expect(ref?.isValid == false)
        // A document keeps its parser alive.
        let doc = try JSONParser().parse("[true]")
        #expect(doc.isValid)
        #expect(doc.root[0]?.bool == true)
    }

    @Test func mutatedInputNeverCrashesAndValidResultsRoundTrip() throws {
        let seed = Array(variedDocument.utf8)
        let parser = JSONParser(), other = JSONParser()
        var rng = SplitMix(state: 2026)
        let interesting: [UInt8] = Array(#"{}[]":,\-+.eE0119tfnu "#.utf8) + [0x00, 0x1F, 0x80, 0xC3, 0xE2, 0xFF]
        var parsed = 0, rejected = 0
        for _ in 0..<3000 {
            var bytes = seed
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                let at = Int.random(in: 0..<bytes.count, using: &rng)
                switch Int.random(in: 0..<4, using: &rng) {
                case 0: bytes[at] = interesting[Int.random(in: 0..<interesting.count, using: &rng)]
                case 1: bytes.remove(at: at)
                case 2: bytes.insert(interesting[Int.random(in: 0..<interesting.count, using: &rng)], at: at)
                default: bytes.removeSubrange(at..<bytes.count) // truncate
                }
                if bytes.isEmpty { break }
            }
            do throws(JSONError) {
                let doc = try parser.parse(bytes)
                parsed += 1
                var w = JSONWriter()
                doc.root.write(to: &w)
                let back = try other.parse(w.bytes)
                #expect(sameTree(doc.root, back.root))
            } catch {
                rejected += 1
                #expect(!error.message.isEmpty)
            }
        }
        #expect(parsed + rejected == 3000)
        #expect(rejected > 1000)
    }

    @Test func invalidMaxDepthStopsTheProgram() async {
        await #expect(processExitsWith: .failure) {
            _ = JSONParser(maxDepth: 0)
        }
    }

    @Test func usingAStaleRefStopsTheProgram() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let parser = JSONParser()
            let old = try parser.parse(#"{"a":1}"#).root
            _ = try parser.parse("[]")
            _ = old["a"] // stale: must trap, not read the new document
        }
        let stderr = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(stderr.contains("FastJSON: a JSONRef was used after its parser parsed another document"))
    }

    @Test func writerMisuseStopsTheProgram() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            var w = JSONWriter()
            w.beginObject()
            w.int(1) // a value without a key
        }
        let stderr = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(stderr.contains("JSONWriter: a value inside an object needs key(_:) first"))
        await #expect(processExitsWith: .failure) {
            var w = JSONWriter()
            w.int(1)
            w.int(2) // a second top-level value without newline()
        }
        await #expect(processExitsWith: .failure) {
            var w = JSONWriter()
            w.beginArray()
            w.endObject() // mismatched end
        }
    }
}
