@testable import CanonicalJSON
@testable import Gateway
import HealthgateCore
@testable import HealthgateTesting
import Pipeline
import Testing

/// `CanonicalView.read` reads a plain sample's line with each key where it must be
/// (`readPlain`) and walks any other (`readWalking`): for every line, and for lines broken in
/// every way, the two must give the same view or both none — the InfluxDB sink writes each point
/// from it, and a line read wrongly would be a wrong point in InfluxDB.
@Suite struct CanonicalViewPlainTests {
    /// Every field of a view, as text (a view holds pointers into the line).
    static func describe(_ v: CanonicalView) -> String {
        func s(_ p: UnsafeRawBufferPointer?) -> String { p.map { "<" + String(decoding: $0, as: UTF8.self) + ">" } ?? "nil" }
        var value = "nil"
        switch v.value {
        case .number(let d)?: value = "n\(d.bitPattern)"
        case .string(let t)?: value = s(t)
        case nil: break
        }
        return [v.op == .upsert ? "upsert" : "delete", s(v.kind), s(v.device), s(v.receiver), s(v.uuid), s(v.type),
                "\(v.part as Int?)", "\(v.code as Int?)", "\(v.start.map { $0.unixNanoseconds } as Int64?)", value, s(v.unit),
                s(v.activity), "\(v.durationS as Double?)", "\(v.energyKcal as Double?)", "\(v.distanceM as Double?)",
                s(v.sourceApp), s(v.sourceDevice), s(v.labels)].joined(separator: "|")
    }

    /// What `read` makes of `line`, and what the walk alone makes of it.
    static func both(_ line: [UInt8]) -> (read: String?, walked: String?, plain: Bool) {
        line.withUnsafeBytes { b in
            var recent = Timestamp.RecentDay(), v = CanonicalView()
            let read = CanonicalView.read(b, recent: &recent, into: &v) ? describe(v) : nil
            var recent2 = Timestamp.RecentDay(), w = CanonicalView()
            let walked = CanonicalView.readWalking(b, recent: &recent2, into: &w) ? describe(w) : nil
            var recent3 = Timestamp.RecentDay(), p = CanonicalView()
            let plain = CanonicalView.readPlain(b, recent: &recent3, into: &p)
            if plain { #expect(describe(p) == read) }
            return (read, walked, plain)
        }
    }

    /// Lines as the journal holds them: Syncky's samples written straight (and through records),
    /// and the record shapes the transforms' tests use, encoded.
    static func lines() throws -> [[UInt8]] {
        let r = SynckyReceiver(name: "phone", path: "/s", maxBodyBytes: 1 << 22, auth: Authenticator(kind: .none),
                               hmacSecret: nil, device: nil, parsers: ParserPool(), logger: Logger(component: "t", sink: MemoryLogSink()))
        let samples = SynckyNativeStraightLineTests.plain + SynckyNativeStraightLineTests.recorded
        var out: [[UInt8]] = []
        for keep in [false, true] {
            let req = HTTPRequest(method: "POST", path: "/s", headers: [(name: "X-Syncky-Format", value: "native")],
                                  body: Array(Vectors.syncBody(device: "d_1", samples: samples).utf8))
            guard case .accept(let batch, _) = r.receive(req, context: ReceiveContext(now: Timestamp(seconds: 0), keepRecords: keep ? 1_000 : 0)) else {
                Issue.record("not accepted")
                throw CancellationError()
            }
            out += batch.payload.split(separator: 0x0A).map(Array.init)
        }
        var records = TransformTests.shapes
        var c = CanonicalRecord(kind: "category", device: "p", receiver: "r", uuid: "c", type: "sleep_analysis",
                                start: Timestamp(seconds: 9), value: .string("asleep_core"))
        c.code = 3
        c.source = RecordSource(app: "a", device: nil)
        records.append(c)
        c.source = RecordSource(app: nil, device: "Watch")
        c.unit = "count"
        records.append(c)
        var d = c
        d.op = .delete
        records.append(d)
        for r in records {
            var line = CanonicalCodec.encodeLine(r)
            if line.last == 0x0A { line.removeLast() }
            out.append(line)
        }
        return out
    }

    @Test func plainLinesAreReadAsTheWalkReadsThem() throws {
        var plain = 0
        for line in try Self.lines() {
            let (read, walked, isPlain) = Self.both(line)
            #expect(read == walked, "\(String(decoding: line, as: UTF8.self))")
            if isPlain { plain += 1 }
        }
        // Most of Syncky's samples are plain; the test must not pass by reading none plainly.
        #expect(plain >= 30, "\(plain) lines read plainly")
    }

    @Test func brokenLinesAreReadAsTheWalkReadsThemOrNotAtAll() throws {
        var broken = 0, readPlainly = 0
        for line in try Self.lines() where Self.both(line).plain {
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
            for (from, to) in [("}", ",}"), ("\"app\"", "\"version\""), ("\"device\":\"", "\"device\":7,\"x\":\""),
                               ("upsert", "delete"), ("\"end\"", "\"utc_offset\""), ("\"unit\"", "\"metadata\""),
                               ("\"source\":{", "\"source\":{\"app\":\"a\","), ("\"value\":", "\"value\":null,\"unit\":"),
                               ("\"code\":", "\"code\":-"), ("Z\"", "+99:99\"")] {
                if let range = text.range(of: from, options: .backwards) {
                    variants.append(Array(text.replacingCharacters(in: range, with: to).utf8))
                }
            }
            variants.append(Array((text.dropLast() + ",\"tags\":{\"person\":\"me\"}}").utf8))
            for v in variants {
                let (read, walked, isPlain) = Self.both(v)
                #expect(read == walked, "\(String(decoding: v, as: UTF8.self))")
                broken += 1
                if isPlain { readPlainly += 1 }
            }
        }
        #expect(broken > 1_000)
        #expect(readPlainly > 0, "some broken lines are still plain ones (a digit changed, a string cut shorter)")
    }
}
