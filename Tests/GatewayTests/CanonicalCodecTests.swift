@testable import CanonicalJSON
import FastJSON
import Foundation
import HealthgateCore
@testable import HealthgateTesting
@testable import Pipeline
import SinkKit
import Testing

@Suite struct CanonicalCodecTests {
    @Test func aRecordsOffsetIsWrittenInItsCanonicalLine() {
        for (offset, text) in [(7200, "+02:00"), (-19800, "-05:30"), (0, "+00:00"), (-45, "-00:00")] {
            var r = CanonicalRecord(
                kind: "quantity", device: "d", receiver: "r", uuid: "u", type: "HeartRate",
                start: Timestamp(seconds: 1_791_961_260), utcOffset: offset)
            r.value = .number(61)
            var line: [UInt8] = []
            r.appendNDJSON(to: &line)
            #expect(String(decoding: line, as: UTF8.self).contains(#""utc_offset":"\#(text)""#))
        }
    }

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
        let r = CanonicalRecord(
            kind: "quantity", device: "d_zsOZnTQUz_juWFVljuOOBQ", receiver: "syncky",
            uuid: "5E1D0000-0000-4000-8000-000000000001", type: "steps",
            start: Timestamp.parseRFC3339("2026-10-14T07:01:00Z")!.0,
            end: Timestamp.parseRFC3339("2026-10-14T07:01:59Z")!.0, value: .number(412), unit: "count",
            source: RecordSource(app: "com.apple.Health", device: "Apple Watch"))
        // The line the README shows.
        #expect(
            String(decoding: CanonicalCodec.encodeLine(r), as: UTF8.self)
                == #"{"op":"upsert","kind":"quantity","device":"d_zsOZnTQUz_juWFVljuOOBQ","receiver":"syncky","uuid":"5E1D0000-0000-4000-8000-000000000001","type":"steps","start":"2026-10-14T07:01:00Z","end":"2026-10-14T07:01:59Z","value":412,"unit":"count","source":{"app":"com.apple.Health","device":"Apple Watch"}}"#
        )
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

    /// The walk takes a key the writer writes next from its bytes, and reads any other key as a
    /// string: a phone's own field whose name begins as a canonical key's, a key with an escape,
    /// a key out of order, and a line too short for the words compared come out as before.
    @Test func eachMembersFieldIsFoundHoweverItsKeyIsMet() {
        func fields(_ text: String) -> [CanonicalRecord.Field]? {
            let r = try? Record.read(line: Array(text.utf8)[...])
            return r.flatMap { r in r.hasLine && r.walksWhole ? CanonicalRecord.Field.allCases.filter { r.hasMember($0) } : nil }
        }
        let head = #"{"op":"upsert","kind":"quantity","device":"d","receiver":"r","uuid":"u","type":"t","start":"2026-01-01T00:00:00Z""#
        let known: [CanonicalRecord.Field] = [.op, .kind, .device, .receiver, .uuid, .type, .start]
        #expect(
            fields(head + #","unit":"count","unitx":1,"sourcey":"s","source":{"app":"a"},"tags":{"a":"b"},"extra":{"x":1}}"#)
                == known + [.unit, .fields, .source, .tags, .extra])
        #expect(fields(head + #","value":1,"utc_offset":"+01:00"}"#) == nil) // out of order: read by the parser
        #expect(fields(head + #","u\u006eit":"count"}"#) == known + [.fields]) // an escape: not the canonical key
        #expect(
            fields(head + #","end":"2026-01-01T00:00:01Z","energy_kcal":1,"distance_m":2}"#)
                == known + [.end, .energyKcal, .distanceM])
        #expect(fields(#"{"kind":"k","op":"upsert"}"#) == nil)
    }

    @Test func reportsABadLineAndKeepsTheOthers() {
        var bytes = CanonicalCodec.encodeLines([Self.full])
        bytes += Array("{\"op\":\"upsert\"}\nnot json\n\n".utf8)
        bytes += CanonicalCodec.encodeLines([Self.full])
        var errors: [Int] = []
        var badLines: [String] = []
        let records = CanonicalCodec.decodeLines(bytes, parser: JSONParser()) { line, _, range in
            errors.append(line)
            badLines.append(String(decoding: bytes[range], as: UTF8.self))
        }
        #expect(records.count == 2)
        #expect(errors == [2, 3])
        #expect(badLines == [#"{"op":"upsert"}"#, "not json"])
        // Read as records: the same two, the bad lines reported with their places.
        var bad: [Int] = []
        let read = Record.records(in: bytes) { index, _, _ in bad.append(index) }
        #expect(read.map(\.0.canonical) == records && read.map(\.1) == [0, 3] && bad == [1, 2])
    }
}
