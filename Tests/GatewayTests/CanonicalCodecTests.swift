import CanonicalJSON
import FastJSON
import Foundation
import HealthgateCore
@testable import HealthgateTesting
@testable import Pipeline
import SinkKit
import Testing

@Suite struct CanonicalCodecTests {
    static let full = CanonicalRecord(
        op: .upsert, kind: "workout", device: "d_1", receiver: "phone", uuid: "U-1", type: "workout",
        part: 0, parts: 2, start: Timestamp(seconds: 1_791_954_000, nanoseconds: 500_000_000),
        end: Timestamp(seconds: 1_791_955_870), utcOffset: 7200, value: .number(0.25), unit: "L", code: 3,
        activity: "running", durationS: 1870, energyKcal: 312.4, distanceM: 5020,
        source: RecordSource(app: "com.apple.Health", device: "Apple \"Watch\"\n\u{1}é"),
        metadata: RawJSON(#"{"HKIndoorWorkout":false}"#),
        fields: [RecordField("events", RawJSON("[]"))],
        extra: [RecordField("x", RawJSON(#"{"a":[1,null]}"#))])

    @Test func encodesTheDocumentedLine() {
        let r = CanonicalRecord(kind: "quantity", device: "d_zsOZnTQUz_juWFVljuOOBQ", receiver: "syncky",
                                uuid: "5E1D0000-0000-4000-8000-000000000001", type: "steps",
                                start: Timestamp.parseRFC3339("2026-10-14T07:01:00Z")!.0,
                                end: Timestamp.parseRFC3339("2026-10-14T07:01:59Z")!.0, value: .number(412), unit: "count",
                                source: RecordSource(app: "com.apple.Health", device: "Apple Watch"))
        // The line the README shows.
        #expect(String(decoding: CanonicalCodec.encodeLine(r), as: UTF8.self) ==
            #"{"op":"upsert","kind":"quantity","device":"d_zsOZnTQUz_juWFVljuOOBQ","receiver":"syncky","uuid":"5E1D0000-0000-4000-8000-000000000001","type":"steps","start":"2026-10-14T07:01:00Z","end":"2026-10-14T07:01:59Z","value":412,"unit":"count","source":{"app":"com.apple.Health","device":"Apple Watch"}}"#)
    }

    @Test func roundTripsEveryField() throws {
        let line = CanonicalCodec.encodeLines([Self.full, Self.full])
        // Valid JSON to a third-party parser, with the escapes in place.
        let first = try #require(String(decoding: line, as: UTF8.self).split(separator: "\n").first)
        let obj = try #require(try JSONSerialization.jsonObject(with: Data(first.utf8)) as? [String: Any])
        #expect((obj["source"] as? [String: Any])?["device"] as? String == "Apple \"Watch\"\n\u{1}é")
        #expect(obj["utc_offset"] as? String == "+02:00")
        #expect(obj["start"] as? String == "2026-10-14T05:00:00.5Z")
        let back = CanonicalCodec.decodeLines(line, parser: JSONParser())
        #expect(back == [Self.full, Self.full])
    }

    /// Every string field made of the bytes that escape longest (`\u0001` is six bytes for
    /// one), and long: the line is written into room worked out beforehand, so this is the
    /// case that would overrun it. Each string is escaped exactly as FastJSON's writer does.
    @Test func theLongestEscapesFitAndMatchTheJSONWriter() throws {
        // Clean bytes first (copied eight at a time), then the escapes.
        let worst = "0123456789abcdef" + String(repeating: "\u{1}\u{1F}\"\\\n", count: 300) + "é日😀\u{7F}"
        var r = CanonicalRecord(
            op: .upsert, kind: worst, device: worst, receiver: worst, uuid: worst, type: worst,
            part: Int.min, parts: Int.max, start: Timestamp(seconds: 253_402_300_799, nanoseconds: 123_456_789),
            end: Timestamp(seconds: -62_135_596_800, nanoseconds: 1), utcOffset: -52_200,
            value: .string(worst), unit: worst, code: Int.min, activity: worst,
            durationS: -1.7976931348623157e308, energyKcal: 2.2250738585072014e-308, distanceM: -0.1,
            source: RecordSource(app: worst, device: worst), metadata: RawJSON(#"{"k":"v"}"#),
            fields: [RecordField(worst, RawJSON.string(worst))], extra: [RecordField(worst, RawJSON("[1]"))])
        r.tags = [RecordTag(worst, worst), RecordTag("b", worst)]
        let line = CanonicalCodec.encodeLine(r)
        var w = JSONWriter()
        w.string(worst)
        let escaped = String(decoding: w.bytes, as: UTF8.self)
        let text = String(decoding: line, as: UTF8.self)
        #expect(text.hasPrefix(#"{"op":"upsert","kind":"# + escaped + #","device":"# + escaped))
        #expect(text.components(separatedBy: escaped).count - 1 == 16)
        #expect(text.contains(#""code":-9223372036854775808"#))
        #expect(text.contains(#""start":"9999-12-31T23:59:59.123456789Z""#))
        #expect(text.contains(#""duration_s":-1.7976931348623157e+308"#))
        let back = CanonicalCodec.decodeLines(line + [0x0A], parser: JSONParser())
        #expect(back == [r])
    }

    /// For every set of fields a route may change, a record read for just those fields (and
    /// their spans, where they make at most two runs) and changed in them is written as the
    /// journal's line with those members written anew: the same line as the whole record,
    /// changed alike, encodes to — whether the sink walks the line or copies around the spans,
    /// whichever fields the line has or lacks, and with the phone's own JSON holding the same
    /// key names.
    @Test func aPatchedLineIsTheChangedRecordsWholeLine() {
        let all = CanonicalRecord.Field.allCases
        var sets: [CanonicalRecord.Fields] = [CanonicalRecord.Fields(.value, .unit), CanonicalRecord.Fields(.tags),
                                              CanonicalRecord.Fields(.value, .unit, .tags), CanonicalRecord.Fields(.source),
                                              CanonicalRecord.Fields(.type, .device), CanonicalRecord.Fields(.op, .tags),
                                              CanonicalRecord.Fields(.unit, .source, .metadata), .all]
        sets += all.map { CanonicalRecord.Fields($0) }
        func change(_ r: inout CanonicalRecord, _ set: CanonicalRecord.Fields) {
            if set.has(.type) { r.type = "renamed" }
            if set.has(.device) { r.device = "alice-iphone" }
            if set.has(.value) { r.value = .number(1.5) }
            if set.has(.unit) { r.unit = "lb" }
            if set.has(.tags) { r.tags = [RecordTag("person", "alice")] }
            if set.has(.source) { r.source = nil }
            if set.has(.metadata) { r.metadata = RawJSON(#"{"m":1}"#) }
            if set.has(.extra) { r.extra = [] }
            if set.has(.fields) { r.fields = [] }
            if set.has(.code) { r.code = 7 }
        }
        var spliced = 0
        for r in TransformTests.shapes {
            let line = CanonicalCodec.encodeLine(r) + [0x0A]
            for set in sets {
                var whole = r
                change(&whole, set)
                let expected = String(decoding: CanonicalCodec.encodeLine(whole) + [0x0A], as: UTF8.self)
                let read = CanonicalCodec.readLines(line, parser: JSONParser(), only: set, patches: set)
                #expect(read.records.count == 1 && read.ranges?.count == 1, "\(r.uuid) \(set)")
                guard var partial = read.records.first else { continue }
                change(&partial, set)
                for spans in [read.spans?.first ?? .none, .none] {
                    if spans.first.rawValue != 0 { spliced += 1 }
                    var out: [UInt8] = []
                    partial.appendNDJSON(to: &out, reusing: .patched(line[...], changed: set, spans: spans))
                    #expect(String(decoding: out, as: UTF8.self) == expected, "\(r.uuid) \(set) \(spans.first.rawValue != 0 ? "spans" : "walked")")
                }
                // Nothing changed: the journal's line as it is.
                var out: [UInt8] = []
                partial.appendNDJSON(to: &out, reusing: .patched(line[...], changed: [], spans: .none))
                #expect(out == line)
            }
        }
        #expect(spliced > 100)
        // The runs of a set of fields.
        let runs = LineSpans.runs(of: CanonicalRecord.Fields(.value, .unit, .tags))
        #expect(runs?.0 == CanonicalRecord.Fields(.value, .unit) && runs?.1 == CanonicalRecord.Fields(.tags))
        #expect(LineSpans.runs(of: CanonicalRecord.Fields(.type, .value, .tags)) == nil)
        #expect(LineSpans.runs(of: .all)?.0 == .all)
    }

    /// A line that is not as the writer writes it — white space, a member out of order or
    /// twice, a string left open, something after the object — does not walk, so nothing of it
    /// is copied: read for patching, its entry has no lines (the sink encodes whole records);
    /// patched anyway, the record is written whole.
    @Test func aLineThatDoesNotWalkIsNotPatched() {
        let good = #"{"op":"upsert","kind":"k","device":"d","receiver":"r","uuid":"u","type":"t","value":1,"unit":"kg"}"#
        #expect(good.utf8.withContiguousStorageIfAvailable { CanonicalLine.walks(UnsafeRawBufferPointer($0)) } == true)
        let bad = [
            #"{"op":"upsert", "kind":"k","device":"d","receiver":"r","uuid":"u","type":"t","value":1}"#,
            #"{"op":"upsert","device":"d","kind":"k","receiver":"r","uuid":"u","type":"t","value":1}"#,
            #"{"op":"upsert","kind":"k","device":"d","receiver":"r","uuid":"u","type":"t","value":1,"value":2}"#,
            #"{"op":"upsert","kind":"k","device":"d","receiver":"r","uuid":"u","type":"t","unit":"kg}"#,
            #"{"op":"upsert","kind":"k","device":"d","receiver":"r","uuid":"u","type":"t","value":1}x"#,
        ]
        for text in bad {
            let line = Array(text.utf8) + [0x0A]
            #expect(line.dropLast().withUnsafeBytes { CanonicalLine.walks($0) } == false, "\(text)")
            let read = CanonicalCodec.readLines(good.utf8 + [0x0A] + line, parser: JSONParser(), only: CanonicalRecord.Fields(.value),
                                                patches: CanonicalRecord.Fields(.value))
            #expect(read.ranges == nil, "\(text)")
        }
        let r = CanonicalRecord(kind: "k", device: "d", receiver: "r", uuid: "u", type: "t", value: .number(2))
        var out: [UInt8] = []
        r.appendNDJSON(to: &out, reusing: .patched(Array((bad[0] + "\n").utf8)[...], changed: CanonicalRecord.Fields(.value), spans: .none))
        #expect(out == CanonicalCodec.encodeLine(r) + [0x0A])
    }

    /// The walk takes a key the writer writes next from its bytes, and reads any other key as a
    /// string: a phone's own field whose name begins as a canonical key's, a key with an escape,
    /// a key out of order, and a line too short for the words compared come out as before.
    @Test func eachMembersFieldIsFoundHoweverItsKeyIsMet() {
        func fields(_ text: String) -> [CanonicalRecord.Field]? {
            Array(text.utf8).withUnsafeBytes { raw in
                var walk = CanonicalLine(raw)
                var out: [CanonicalRecord.Field] = []
                while let m = walk.next() { out.append(m.field) }
                return walk.failed ? nil : out
            }
        }
        let head = #"{"op":"upsert","kind":"quantity","device":"d","receiver":"r","uuid":"u","type":"t","start":"2026-01-01T00:00:00Z""#
        let known: [CanonicalRecord.Field] = [.op, .kind, .device, .receiver, .uuid, .type, .start]
        #expect(fields(head + #","unit":"count","unitx":1,"sourcey":"s","source":{"app":"a"},"tags":{"a":"b"},"extra":{"x":1}}"#)
                == known + [.unit, .fields, .fields, .source, .tags, .extra])
        #expect(fields(head + #","value":1,"utc_offset":0}"#) == nil)   // out of order
        #expect(fields(head + #","u\u006eit":"count"}"#) == known + [.fields])   // an escape: not the canonical key
        #expect(fields(head + #","part":0}"#) == nil)   // `part` goes before `start`
        #expect(fields(head + #","end":"2026-01-01T00:00:01Z","energy_kcal":1,"distance_m":2}"#)
                == known + [.end, .energyKcal, .distanceM])
        #expect(fields(#"{"op":"upsert","kind":"k","device":"d","receiver":"r","uuid":"u","type":"t","part":0,"parts":2,"start":"s","end":"e","utc_offset":0,"value":1,"unit":"u","code":1,"activity":"a","duration_s":1,"energy_kcal":1,"distance_m":2,"source":{},"tags":{},"metadata":{},"extra":{}}"#)
                == CanonicalRecord.Field.allCases.filter { $0 != .fields })
        #expect(fields(#"{"op":"x"}"#) == [.op])   // shorter than the two words compared
        #expect(fields(#"{"op":"x","end":1}"#) == [.op, .end])
        #expect(fields(#"{"kind":"k","op":"upsert"}"#) == nil)
    }

    @Test func reportsABadLineAndKeepsTheOthers() {
        var bytes = CanonicalCodec.encodeLines([Self.full])
        bytes += Array("{\"op\":\"upsert\"}\nnot json\n\n".utf8)
        bytes += CanonicalCodec.encodeLines([Self.full])
        var errors: [Int] = []
        var badLines: [String] = []
        let (records, ranges) = CanonicalCodec.decodeLinesWithRanges(bytes, parser: JSONParser()) { line, _, range in
            errors.append(line)
            badLines.append(String(decoding: bytes[range], as: UTF8.self))
        }
        #expect(records.count == 2)
        #expect(errors == [2, 3])
        #expect(badLines == [#"{"op":"upsert"}"#, "not json"])
        #expect(ranges == nil)
    }

    @Test func givesEachRecordItsLine() throws {
        let a = CanonicalCodec.encodeLines([Self.full])
        let b = CanonicalCodec.encodeLines([PipelineTests.record("z")])
        let (records, ranges) = CanonicalCodec.decodeLinesWithRanges(a + b, parser: JSONParser())
        let r = try #require(ranges)
        #expect(records.count == 2)
        #expect(Array((a + b)[r[0]]) == a)
        #expect(Array((a + b)[r[1]]) == b)
    }

    /// A sink that reads a few fields gets those, the rest left empty and unchecked; one that
    /// reads none gets each line's range with an empty record, the lines not parsed, and blank
    /// lines skipped as a full decode skips them.
    @Test func readsOnlyTheFieldsAsked() throws {
        let lines = CanonicalCodec.encodeLines([Self.full, PipelineTests.record("z")]) + Array(" \r\n\n".utf8)
            + CanonicalCodec.encodeLines([Self.full])
        let (all, allRanges) = CanonicalCodec.decodeLinesWithRanges(lines, parser: JSONParser())
        #expect(all.count == 3 && allRanges?.count == 3)
        let (some, someRanges) = CanonicalCodec.decodeLinesWithRanges(lines, parser: JSONParser(),
                                                                      only: CanonicalRecord.Fields(.device, .start))
        #expect(someRanges == allRanges)
        #expect(some.map(\.device) == all.map(\.device) && some.map(\.start) == all.map(\.start))
        #expect(some[0].op == .upsert && some[0].uuid.isEmpty && some[0].type.isEmpty && some[0].kind.isEmpty)
        #expect(some[0].value == nil && some[0].source == nil && some[0].metadata == nil && some[0].extra.isEmpty
                && some[0].fields.isEmpty && some[0].utcOffset == nil && some[0].end == nil)
        // A field that is not read is not required either; one that is, is.
        let noUUID = Array(#"{"op":"upsert","kind":"k","device":"d","receiver":"r","type":"t"}"#.utf8) + [0x0A]
        let (partial, partialRanges) = CanonicalCodec.decodeLinesWithRanges(noUUID, parser: JSONParser(), only: CanonicalRecord.Fields(.device))
        #expect(partial.count == 1 && partial[0].device == "d" && partialRanges?.count == 1)
        var errors = 0
        _ = CanonicalCodec.decodeLinesWithRanges(noUUID, parser: JSONParser(), only: CanonicalRecord.Fields(.uuid)) { _, _, _ in errors += 1 }
        #expect(errors == 1)
        let (none, noneRanges) = CanonicalCodec.decodeLinesWithRanges(lines, parser: JSONParser(), only: [])
        #expect(noneRanges == allRanges && none.count == 3 && none.allSatisfy { $0.uuid.isEmpty && $0.device.isEmpty })
        // The offset is read from its bytes as from a string.
        for (text, seconds) in [("+02:00", 7200), ("-05:30", -19800), ("Z", 0), ("+0100", 3600), ("+2:00", nil), ("+24:00", nil),
                                ("+02-00", nil), ("", nil)] as [(String, Int?)] {
            #expect(Timestamp.parseOffset(text) == seconds, "\(text)")
        }
    }

    /// The fields of a line read from its walk, without a parser, are what the parser gives,
    /// field for field, for every mix of them — escaped strings, non-ASCII, parts, offsets,
    /// values as numbers and as names, sources, labels, deletes, the phone's own JSON around
    /// them, blank lines, a last line without its line feed — and a bad line is reported the same.
    @Test func theScannedFieldsAreWhatTheParserReads() throws {
        var records: [CanonicalRecord] = [Self.full, PipelineTests.record("plain")]
        var odd = Self.full
        odd.device = "Anna's \"phone\" \\ é \u{1}"   // escapes: the scan leaves these to the parser
        odd.kind = "quantity"
        odd.utcOffset = -(5 * 3600 + 30 * 60)
        records.append(odd)
        records.append(CanonicalRecord(op: .delete, kind: "any", device: "d é ü", receiver: "r", uuid: "gone", type: "any"))
        var noStart = PipelineTests.record("nostart")
        noStart.start = nil
        noStart.end = nil
        records.append(noStart)
        var numbers = PipelineTests.record("numbers")
        numbers.value = .number(-1.25e-7)
        numbers.code = -42
        numbers.durationS = 0.1
        numbers.energyKcal = 1e21
        numbers.distanceM = 123456.789
        numbers.tags = [RecordTag("person", "é \"x\"")]   // an escaped label: parsed
        records.append(numbers)
        // Numbers read with one division, and those left to strtod (17 digits, an exponent).
        for (i, d) in [0.30000000000000004, 5.752999999999999, 0.01842, 18.42, 1.375, 999999999999999, Double.leastNonzeroMagnitude, 72].enumerated() {
            var r = PipelineTests.record("number \(i)")
            r.value = .number(d)
            r.distanceM = -d
            records.append(r)
        }
        var named = PipelineTests.record("named")
        named.value = .string("asleep_core")
        named.activity = "running"
        named.source = RecordSource(app: nil, device: "Watch")
        records.append(named)
        records += TransformTests.shapes
        var bytes = CanonicalCodec.encodeLines(records)
        bytes.insert(contentsOf: Array(" \r\n\n".utf8), at: CanonicalCodec.encodeLines([records[0]]).count)
        bytes += CanonicalCodec.encodeLine(PipelineTests.record("last, no line feed"))
        let scannable = CanonicalCodec.scannedFields
        var masks: [CanonicalRecord.Fields] = [CanonicalRecord.Fields(.device, .start), CanonicalRecord.Fields(.receiver),
                                               CanonicalRecord.Fields(.type, .kind, .uuid), CanonicalRecord.Fields(.part, .parts, .end, .utcOffset),
                                               CanonicalRecord.Fields(.type, .value, .unit, .tags), CanonicalRecord.Fields(.source, .activity),
                                               CanonicalRecord.Fields(.code, .durationS, .energyKcal, .distanceM), scannable]
        masks += CanonicalRecord.Field.allCases.map { CanonicalRecord.Fields($0) }.filter { scannable.isSuperset(of: $0) }
        let count = records.count + 1
        for mask in masks {
            let (scanned, ranges) = CanonicalCodec.decodeLinesWithRanges(bytes, parser: JSONParser(), only: mask)
            let parsed = CanonicalCodec.decodeLines(bytes, parser: JSONParser(), only: mask)
            #expect(scanned == parsed, "mask \(mask.rawValue)")
            #expect(scanned.count == count && ranges == CanonicalCodec.decodeLinesWithRanges(bytes, parser: JSONParser()).1)
            // Read for patching (each line walked to its end, its spans found): the same.
            let read = CanonicalCodec.readLines(bytes, parser: JSONParser(), only: mask, patches: mask)
            #expect(read.records == parsed && read.ranges == ranges && read.spans?.count == count, "mask \(mask.rawValue)")
        }
        #expect(CanonicalCodec.decodeLinesWithRanges(bytes, parser: JSONParser(), only: scannable).0[2].device == odd.device)
        // A line that is not a record: reported with its line number, no ranges.
        var errors: [Int] = []
        let bad = CanonicalCodec.encodeLines([records[1]]) + Array("{\"op\":\"maybe\",\"kind\":\"k\"}\nnot json\n".utf8)
        let (some, none) = CanonicalCodec.decodeLinesWithRanges(bad, parser: JSONParser(), only: CanonicalRecord.Fields(.device)) { line, _, _ in
            errors.append(line)
        }
        #expect(some.count == 1 && none == nil && errors == [2, 3])
    }
}
