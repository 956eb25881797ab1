@testable import CanonicalJSON
import FastJSON
@testable import Gateway
import HealthgateCore
@testable import HealthgateTesting
import Pipeline
import Testing

/// A `Record` reads each field from its member of the journal line and writes the line back with
/// only what was changed written anew: for every shape of line, read so, and for lines broken in
/// every way, it must give what the parser reads (or refuse the line), and write what the whole
/// record changed alike encodes to. Sinks and routes see records through it alone.
@Suite struct RecordTests {
    /// Lines as the journal holds them: Syncky's samples of every shape as a receiver makes
    /// them, and the record shapes the transforms' tests use, encoded.
    static func lines() throws -> [[UInt8]] {
        let r = SynckyReceiver(
            name: "phone", path: "/s", maxBodyBytes: 1 << 22, auth: Authenticator(kind: .none),
            hmacSecret: nil, device: nil, parsers: ParserPool(), logger: Logger(component: "t", sink: MemoryLogSink()))
        let req = HTTPRequest(
            method: "POST", path: "/s", headers: [(name: "X-Syncky-Format", value: "native")],
            body: Array(Vectors.syncBody(device: "d_1", samples: SampleShapes.plain + SampleShapes.recorded).utf8))
        guard case .accept(let batch, _) = r.receive(req, context: ReceiveContext(now: Timestamp(seconds: 0))) else {
            Issue.record("not accepted")
            throw CancellationError()
        }
        var out = batch.payload.split(separator: 0x0A).map(Array.init)
        var records = TransformTests.shapes + [CanonicalCodecTests.full]
        var c = CanonicalRecord(
            kind: "category", device: "p", receiver: "r", uuid: "c", type: "sleep_analysis",
            start: Timestamp(seconds: 9), value: .string("asleep_core"))
        c.code = 3
        c.source = RecordSource(app: "a", device: nil)
        records.append(c)
        c.source = RecordSource(app: nil, device: "Watch \"2\"")
        c.unit = "count"
        c.tags = [RecordTag("person", "é \"x\""), RecordTag("b", "")]
        records.append(c)
        var d = c
        d.op = .delete
        records.append(d)
        for (i, v) in [0.30000000000000004, 5.752999999999999, 18.42, 1e21, -1.25e-7, Double.leastNonzeroMagnitude].enumerated() {
            var n = PipelineTests.record("number \(i)")
            n.value = .number(v)
            n.distanceM = -v
            records.append(n)
        }
        for r in records { out.append(CanonicalCodec.encodeLine(r)) }
        return out
    }

    static func parsed(_ line: [UInt8]) -> CanonicalRecord? { try? CanonicalCodec.decodeLine(line[...]) }

    /// Field by field, each asked alone and in any order, a record read from its line is what
    /// the parser reads; unchanged, it writes its line back byte for byte.
    @Test func eachFieldReadFromItsMemberIsWhatTheParserReads() throws {
        let lines = try Self.lines()
        #expect(lines.count > 40)
        for line in lines {
            let text = String(decoding: line, as: UTF8.self)
            let whole = try #require(Self.parsed(line), "\(text)")
            let r = try Record.read(line: line[...])
            #expect(r.hasLine, "\(text)")
            #expect(r.line == line, "\(text)")
            // Each field asked first, on a record of its own: read from its member alone.
            for f in CanonicalRecord.Field.allCases {
                let alone = try Record.read(line: line[...])
                var one = CanonicalRecord.empty
                one.take(f, from: Self.fieldOf(alone, f))
                var expected = CanonicalRecord.empty
                expected.take(f, from: whole)
                #expect(one == expected, "\(f) of \(text)")
            }
            #expect(r.canonical == whole, "\(text)")
        }
    }

    /// The record's field `f`, asked through its own accessor.
    static func fieldOf(_ r: Record, _ f: CanonicalRecord.Field) -> CanonicalRecord {
        var c = CanonicalRecord.empty
        switch f {
        case .op: c.op = r.op
        case .kind: c.kind = r.kind
        case .device: c.device = r.device
        case .receiver: c.receiver = r.receiver
        case .uuid: c.uuid = r.uuid
        case .type: c.type = r.type
        case .part: c.part = r.part
        case .parts: c.parts = r.parts
        case .start: c.start = r.start
        case .end: c.end = r.end
        case .utcOffset: c.utcOffset = r.utcOffset
        case .timeZone: c.timeZone = r.timeZone
        case .value: c.value = r.value
        case .unit: c.unit = r.unit
        case .code: c.code = r.code
        case .activity: c.activity = r.activity
        case .durationS: c.durationS = r.durationS
        case .energyKcal: c.energyKcal = r.energyKcal
        case .distanceM: c.distanceM = r.distanceM
        case .fields: c.fields = r.fields
        case .source: c.source = r.source
        case .tags: c.tags = r.tags
        case .metadata: c.metadata = r.metadata
        case .extra: c.extra = r.extra
        }
        return c
    }

    /// For every field and some sets of them, a record changed in those is written as its line
    /// with those members anew — the line the whole record changed alike encodes to, whichever
    /// fields the line has or lacks — and a copy taken before the change keeps the old line.
    @Test func aChangedRecordWritesWhatTheWholeChangedRecordEncodesTo() throws {
        var sets: [[CanonicalRecord.Field]] = CanonicalRecord.Field.allCases.map { [$0] }
        sets += [
            [.value, .unit], [.value, .unit, .tags], [.type, .device], [.op, .tags], [.unit, .source, .metadata],
            CanonicalRecord.Field.allCases
        ]
        func change(_ r: inout Record, _ fields: [CanonicalRecord.Field]) {
            for f in fields {
                switch f {
                case .op: r.op = r.op == .upsert ? .delete : .upsert
                case .kind: r.kind = "k2"
                case .device: r.device = "alice-iphone"
                case .receiver: r.receiver = "elsewhere"
                case .uuid: r.uuid = "U-\"2\""
                case .type: r.type = "renamed"
                case .part: r.part = r.part == nil ? 1 : nil
                case .parts: r.parts = 9
                case .start: r.start = Timestamp(seconds: 5)
                case .end: r.end = nil
                case .utcOffset: r.utcOffset = -3600
                case .timeZone: r.timeZone = r.timeZone == nil ? "Europe/Budapest" : nil
                case .value: r.value = .number(1.5)
                case .unit: r.unit = "lb"
                case .code: r.code = 7
                case .activity: r.activity = "swimming"
                case .durationS: r.durationS = 2
                case .energyKcal: r.energyKcal = nil
                case .distanceM: r.distanceM = 3.25
                case .fields: r.fields = r.fields.isEmpty ? [RecordField("beats", RawJSON("[1,2]"))] : []
                case .source: r.source = r.source == nil ? RecordSource(app: "x", device: nil) : nil
                case .tags: r.tags = r.tags + [RecordTag("person", "alice")]
                case .metadata: r.metadata = RawJSON(#"{"m":1}"#)
                case .extra: r.extra = []
                }
            }
        }
        for line in try Self.lines() {
            for set in sets {
                var r = try Record.read(line: line[...])
                let before = r
                change(&r, set)
                var whole = Record(try #require(Self.parsed(line)))
                change(&whole, set)
                #expect(r.line == CanonicalCodec.encodeLine(whole.canonical), "\(set) of \(String(decoding: line, as: UTF8.self))")
                #expect(r.isChanged && !before.isChanged && before.line == line)
            }
        }
    }

    /// A line not as the writer writes it — white space, members out of order or twice, a string
    /// left open, a value of the wrong kind, bytes after the object, cut anywhere — is read by the
    /// parser or refused, never read wrongly: what a record gives is what the parser gives.
    @Test func brokenLinesAreReadAsTheParserReadsThemOrRefused() throws {
        var broken = 0, refused = 0
        for line in try Self.lines() {
            var variants: [[UInt8]] = []
            for i in stride(from: 0, to: line.count, by: 3) {
                var cut = line
                cut.remove(at: i)
                variants.append(cut)
                variants.append(Array(line[..<i]))
                var changed = line
                changed[i] = changed[i] == 0x22 ? 0x5C : (changed[i] == 0x2C ? 0x7D : 0x2C)
                variants.append(changed)
            }
            let text = String(decoding: line, as: UTF8.self)
            for (from, to) in [
                ("}", ",}"), ("\"app\"", "\"version\""), ("\"device\":\"", "\"device\":7,\"x\":\""),
                ("upsert", "delete"), ("\"end\"", "\"utc_offset\""), ("\"unit\"", "\"metadata\""),
                ("\"source\":{", "\"source\":{\"app\":\"a\","), ("\"value\":", "\"value\":null,\"unit\":"),
                ("\"code\":", "\"code\":-"), ("Z\"", "+99:99\""), (",", ", "), ("\"type\"", "\"kind\"")
            ] {
                if let range = text.range(of: from, options: .backwards) {
                    variants.append(Array(text.replacingCharacters(in: range, with: to).utf8))
                }
            }
            for v in variants {
                broken += 1
                let parsed = Self.parsed(v)
                guard let r = try? Record.read(line: v[...]) else {
                    refused += 1
                    #expect(parsed == nil, "refused, yet the parser reads: \(String(decoding: v, as: UTF8.self))")
                    continue
                }
                if let parsed {
                    // The metadata is the line's JSON as it stands (a broken line's may be spaced
                    // or spelled otherwise than the writer writes it): the same JSON.
                    var read = r.canonical
                    read.metadata = read.metadata.flatMap { m in (try? JSONParser().parse(m.bytes)).map { CanonicalCodec.raw($0.root) } }
                    #expect(read == parsed, "\(String(decoding: v, as: UTF8.self))")
                } else {
                    // Walked, but a value the parser refuses (a bad time, say): what reads is
                    // read, and the rest is left empty rather than made up.
                    _ = r.canonical
                }
            }
        }
        #expect(broken > 1_000 && refused > 100)
    }
}
