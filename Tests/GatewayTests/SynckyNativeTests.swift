import CanonicalJSON
import FastJSON
@testable import Gateway
import HealthgateCore
@testable import HealthgateTesting
@testable import Pipeline
import SinkKit
import Testing

/// Native bodies into canonical records, through the receiver as the gateway calls it.
@Suite struct SynckyNativeTests {
    let logs = MemoryLogSink()

    func receiver(auth: Authenticator = Authenticator(kind: .none), secret: String? = nil) -> SynckyReceiver {
        SynckyReceiver(name: "phone", path: "/syncky", maxBodyBytes: 1_000_000, auth: auth, hmacSecret: secret,
                       device: nil, parsers: ParserPool(), logger: Logger(component: "t", sink: logs))
    }

    func receive(_ body: String, format: String = "native", receiver r: SynckyReceiver? = nil) -> Reception {
        let req = HTTPRequest(method: "POST", path: "/syncky",
                              headers: [(name: "X-Syncky-Format", value: format)], body: Array(body.utf8))
        return (r ?? receiver()).receive(req, context: ReceiveContext(now: Timestamp(seconds: 1_791_961_500)))
    }

    func accepted(_ body: String) throws -> ReceivedBatch {
        guard case .accept(let batch, let reply) = receive(body) else {
            Issue.record("not accepted: \(receive(body))")
            throw CancellationError()
        }
        #expect(reply.status == 200)
        #expect(reply.body.isEmpty)
        return batch
    }

    @Test func mapsAQuantity() throws {
        let b = try accepted(Vectors.syncBody(samples: [Vectors.stepsSample]))
        #expect(b.quarantined.isEmpty)
        let r = try #require(b.records.first)
        #expect(r.op == .upsert)
        #expect(r.kind == "quantity")
        #expect(r.device == "d_zsOZnTQUz_juWFVljuOOBQ")
        #expect(r.receiver == "phone")
        #expect(r.uuid == "5E1D0000-0000-4000-8000-000000000001")
        #expect(r.type == "steps")
        #expect(r.value == .number(412))
        #expect(r.unit == "count")
        #expect(r.start?.rfc3339() == "2026-10-14T07:01:00Z")
        #expect(r.end?.rfc3339() == "2026-10-14T07:01:59Z")
        #expect(r.source == RecordSource(app: "com.apple.Health", device: "Apple Watch"))
        #expect(r.extra.isEmpty)
    }

    @Test func mapsACategoryWithItsHealthKitCode() throws {
        let r = try #require(try accepted(Vectors.syncBody(samples: [Vectors.sleepSample])).records.first)
        #expect(r.kind == "category")
        #expect(r.value == .string("asleep_core"))
        #expect(r.code == 3)
    }

    @Test func mapsAWorkoutKeepingEveryField() throws {
        let r = try #require(try accepted(Vectors.syncBody(samples: [Vectors.workoutSample])).records.first)
        #expect(r.kind == "workout")
        #expect(r.activity == "running")
        #expect(r.durationS == 1870)
        #expect(r.energyKcal == 312.4)
        #expect(r.distanceM == 5020)
        #expect(r.metadata == RawJSON("{}"))
        #expect(r.fields.map(\.name) == ["location", "events", "activities", "statistics"])
        #expect(r.fields[0].value == RawJSON("\"unknown\""))
    }

    /// A body's samples share one answer per type (kept for the next samples): a workout and a
    /// quantity taken in turn are each mapped as their own type says, and workout members on a
    /// quantity are kept in `extra`, as they came.
    @Test func typesTakenInTurnKeepTheirOwnKinds() throws {
        let steps = Vectors.stepsSample.replacingOccurrences(of: "\"unit\": \"count\"",
                                                            with: "\"unit\": \"count\", \"activity\": \"walk\", \"duration_s\": 59")
        let b = try accepted(Vectors.syncBody(samples: [Vectors.workoutSample, steps, Vectors.workoutSample, Vectors.stepsSample]))
        #expect(b.quarantined.isEmpty)
        #expect(b.records.map(\.kind) == ["workout", "quantity", "workout", "quantity"])
        #expect(b.records[0].durationS == 1870 && b.records[2].durationS == 1870)
        #expect(b.records[1].activity == nil && b.records[1].durationS == nil)
        #expect(b.records[1].extra == [RecordField("activity", RawJSON("\"walk\"")), RecordField("duration_s", RawJSON("59"))])
        #expect(b.records[3].extra.isEmpty)
    }

    @Test func mapsACharacteristicAndAPartedSeries() throws {
        let b = try accepted(Vectors.syncBody(samples: [Vectors.characteristicSample, Vectors.heartbeatSample]))
        #expect(b.quarantined.isEmpty)
        let c = b.records[0]
        #expect(c.kind == "characteristic")
        #expect(c.uuid == "characteristic:blood_type")
        #expect(c.value == .string("a_positive"))
        #expect(c.code == 1)
        #expect(c.fields == [RecordField("name", RawJSON("\"blood_type\""))])
        let h = b.records[1]
        #expect(h.kind == "heartbeat_series")
        #expect(h.part == 0 && h.parts == 1)
        #expect(h.fields.map(\.name) == ["count", "beats"])
        #expect(h.fields[1].value == RawJSON("[[0,0],[842,0],[1677,0],[2519,1],[3350,0],[4188,0]]"))
    }

    @Test func mapsDeletions() throws {
        let b = try accepted(Vectors.syncBody(samples: [], deleted: [Vectors.deletion]))
        let d = try #require(b.records.first)
        #expect(d.op == .delete)
        #expect(d.uuid == "5E1D0000-0000-4000-8000-000000000099")
        #expect(d.type == "steps")
        #expect(d.kind == "quantity")
    }

    @Test func keepsUnknownFieldsAndUnknownTypes() throws {
        let s = #"{"uuid":"u1","type":"brand_new_type","value":1.5,"unit":"zz","start":"2026-10-14T07:01:00Z","end":"2026-10-14T07:01:00Z","shiny":{"a":[1,"x",null]},"n":-0.25}"#
        let r = try #require(try accepted(Vectors.syncBody(samples: [s])).records.first)
        #expect(r.type == "brand_new_type")
        #expect(r.unit == "zz")
        #expect(r.extra == [RecordField("shiny", RawJSON(#"{"a":[1,"x",null]}"#)), RecordField("n", RawJSON("-0.25"))])
    }

    @Test func quarantinesBadRecordsBesideGoodOnes() throws {
        let bad = [
            #"{"type":"steps","value":1,"start":"2026-10-14T07:01:00Z"}"#,
            #"{"uuid":"u2","type":"steps","value":true,"start":"2026-10-14T07:01:00Z"}"#,
            #"{"uuid":"u3","type":"steps","value":1,"start":"yesterday"}"#,
            #"{"uuid":"u4","type":"steps","value":1,"start":"2026-10-14T07:01:00Z","end":"2026-10-14T07:00:00Z"}"#,
            #"{"uuid":"u5","type":"steps","value":1}"#,
            #"{"uuid":"u6","type":"steps","start":"2026-10-14T07:01:00Z"}"#,
            #"[1,2]"#,
            #"{"uuid":"u7","type":"steps","value":"many","start":"2026-10-14T07:01:00Z"}"#,
            #"{"uuid":"u8","type":"sleep_analysis","value":3,"start":"2026-10-14T07:01:00Z"}"#,
        ]
        let b = try accepted(Vectors.syncBody(samples: [Vectors.stepsSample] + bad + [Vectors.sleepSample]))
        #expect(b.records.map(\.type) == ["steps", "sleep_analysis"])
        #expect(b.quarantined.count == bad.count)
        #expect(b.quarantined[0].reason == "the sample has no uuid")
        #expect(b.quarantined[2].reason.contains("start"))
        #expect(b.quarantined[3].reason == "\"end\" is before \"start\"")
        #expect(b.quarantined[6].raw == RawJSON("[1,2]"))
        #expect(b.quarantined[7].reason == "steps takes a number in count, not a name")
        #expect(b.quarantined[8].reason == "sleep_analysis takes the name of one of its values, not a number")
    }

    @Test func theCheckConnectionRequestStoresNothing() {
        guard case .answer(let r) = receive(Vectors.checkBody) else {
            Issue.record("a check request must be answered without storing")
            return
        }
        #expect(r.status == 200)
    }

    @Test(arguments: [
        ("{", "not valid JSON"), ("[]", "JSON object"), (#"{"v":1,"type":"other"}"#, "\"type\""),
        (#"{"v":2,"type":"sync"}"#, "\"v\" must be 1"), (#"{"v":1,"type":"sync","samples":{}}"#, "\"samples\""),
        ("", "not valid JSON"), (String(repeating: "[", count: 100_000), "not valid JSON"),
    ])
    func refusesUnreadableBodies(_ body: String, _ reason: String) {
        guard case .unreadable(let status, let why) = receive(body) else {
            Issue.record("\(body.prefix(40)) should be unreadable")
            return
        }
        #expect(status == 400)
        #expect(why.contains(reason), "\(why)")
    }

    @Test func refusesUnknownFormatsAndNamesTheOnesItKnows() {
        guard case .unreadable(_, let why) = receive("{}", format: "xml") else {
            Issue.record("xml must be refused")
            return
        }
        #expect(why.contains("native"))
    }

    @Test func checksAuthBeforeReadingTheBody() {
        let r = receiver(auth: Authenticator(kind: .bearer, token: "t"))
        guard case .answer(let resp) = receive("{not json", receiver: r) else {
            Issue.record("expected a 401")
            return
        }
        #expect(resp.status == 401)
    }

    @Test func requiresSignaturesWhenASecretIsSet() {
        let r = receiver(secret: Vectors.secret)
        guard case .refused(let resp, _) = receive(Vectors.checkBody, receiver: r) else {
            Issue.record("expected a 401")
            return
        }
        #expect(resp.status == 401)
        #expect(resp.bodyText.contains("X-Syncky-Signature"))
    }
}

extension ReceivedBatch {
    /// The accepted records, read back from the payload the journal would get.
    var records: [CanonicalRecord] {
        CanonicalCodec.decodeLines(payload, parser: JSONParser()) { line, error, _ in
            Issue.record("payload line \(line) does not decode: \(error)")
        }
    }
}

@Suite struct SynckyNativeFieldNameTests {
    /// A sender's field named like a canonical one must not change the record or break it
    /// downstream: it is kept under `extra`.
    @Test func fieldsWithCanonicalNamesGoUnderExtra() throws {
        let s = #"{"uuid":"m1","type":"state_of_mind","start":"2026-10-14T07:00:00Z","kind":"daily_mood","code":{"x":1},"op":"delete","valence":0.4,"activity":7}"#
        let logs = MemoryLogSink()
        let r = SynckyReceiver(name: "phone", path: "/s", maxBodyBytes: 1 << 20, auth: Authenticator(kind: .none),
                               hmacSecret: nil, device: nil, parsers: ParserPool(), logger: Logger(component: "t", sink: logs))
        let req = HTTPRequest(method: "POST", path: "/s", headers: [(name: "X-Syncky-Format", value: "native")],
                              body: Array(Vectors.syncBody(samples: [s]).utf8))
        guard case .accept(let batch, _) = r.receive(req, context: ReceiveContext(now: Timestamp(seconds: 0))) else {
            Issue.record("not accepted")
            return
        }
        let rec = try #require(batch.records.first)
        #expect(rec.kind == "state_of_mind")
        #expect(rec.op == .upsert)
        #expect(rec.fields.map(\.name) == ["valence"])
        #expect(Set(rec.extra.map(\.name)) == ["kind", "code", "op", "activity"])
    }
}

/// A plain sample's line is written straight from the body (`SynckyNative.writeLine`), every
/// other's from its record: both must give the journal the same bytes, or a sink would see a
/// sample differently depending on which way it came in.
@Suite struct SynckyNativeStraightLineTests {
    static let t = #""start":"2026-10-14T07:01:00Z","end":"2026-10-14T07:01:59Z""#
    static let src = #""source":{"app":"com.apple.Health","device":"Apple Watch"}"#

    /// Samples whose lines are written straight.
    static let plain: [String] = [
        #"{"uuid":"5E1D0000-0000-4000-8000-000000000001","type":"steps","value":412,"unit":"count",\#(t),\#(src)}"#,
        #"{"uuid":"h1","type":"heart_rate","value":72.5,"unit":"count/min","start":"2026-10-14T07:01:00.250Z","end":"2026-10-14T07:01:00.5Z"}"#,
        // Times not in the canonical text: offsets, t/z/space, a leap second, trailing zeros, more than nine digits.
        #"{"uuid":"o1","type":"steps","value":1,"start":"2026-10-14T09:01:00+02:00","end":"2026-10-14T01:31:00-05:30"}"#,
        #"{"uuid":"o2","type":"steps","value":2,"start":"2026-10-14t07:01:00z","end":"2026-10-14 07:01:59Z"}"#,
        #"{"uuid":"o3","type":"steps","value":3,"start":"2026-12-31T23:59:60Z","end":"2027-01-01T00:00:00.500Z"}"#,
        #"{"uuid":"o4","type":"steps","value":4,"start":"2026-10-14T07:01:00.000Z","end":"2026-10-14T07:01:00.123456789123Z"}"#,
        #"{"uuid":"o5","type":"steps","value":5,"start":"2026-10-14T07:01:00.000000001Z","end":"2026-10-14T07:01:00.1Z"}"#,
        // An instant: no end, it ends when it starts.
        #"{"uuid":"i1","type":"heart_rate","value":61,"unit":"count/min","start":"2026-10-14T07:01:00+01:00"}"#,
        #"{"uuid":"i2","type":"heart_rate","value":62,"start":"2026-10-14T07:01:00.25Z","end":null}"#,
        // Hostile text wherever a string goes, an unknown type and unit.
        #"{"uuid":"q\"uo\\te\u0001\n\t é 🫀 \u2028","type":"my \"custom\"\\type\u001f","value":-0.0,"unit":"furlongs/fortnight é",\#(t),"source":{"app":"a\"p\\p\u0000","device":"Ø \u007f"}}"#,
        #"{"uuid":"s1","type":"steps","value":1,\#(t),"source":{}}"#,
        #"{"uuid":"s2","type":"steps","value":1,\#(t),"source":{"app":"only"}}"#,
        #"{"uuid":"s3","type":"steps","value":1,\#(t),"source":{"device":"only"}}"#,
        #"{"uuid":"s4","type":"steps","value":1,\#(t),"source":{"app":7,"device":"Watch"}}"#,
        #"{"uuid":"s5","type":"steps","value":1,\#(t),"source":null,"metadata":null,"unit":null}"#,
        #"{"uuid":"m1","type":"steps","value":1,\#(t),"metadata":{"HKWasUserEntered":true,"n":[1e300,-0.0,0.1,12345678901234567890,-3],"s":"é\"\\\u0002","o":{}}}"#,
        #"{"uuid":"m2","type":"steps","value":1,\#(t),"metadata":["a",{"b":null}]}"#,
        #"{"uuid":"m3","type":"steps","value":1,\#(t),"metadata":"text"}"#,
        #"{"uuid":"c1","type":"sleep_analysis","value":"asleep_core",\#(t),\#(src)}"#,
        #"{"uuid":"c2","type":"sleep_analysis","value":"napping \"é\"",\#(t)}"#,
        #"{"uuid":"c3","type":"my_category","value":"x","unit":"count",\#(t)}"#,
        #"{"uuid":"p1","type":"steps","value":1,\#(t),"part":0,"parts":3}"#,
        #"{"uuid":"n1","type":"steps","value":1e308,\#(t)}"#,
        #"{"uuid":"n2","type":"steps","value":12345678901234567890,\#(t)}"#,
        #"{"uuid":"n3","type":"steps","value":9007199254740993,\#(t)}"#,
        #"{"uuid":"n4","type":"active_energy_burned","value":0.1,"unit":"kcal",\#(t)}"#,
        #"{"uuid":"n5","type":"body_mass","value":72.5,"unit":"kg",\#(t)}"#,
        #"{"uuid":"n6","type":"steps","value":-5e-324,\#(t)}"#,
    ]

    /// Samples that are made into records first.
    static let recorded: [String] = [
        #"{"uuid":"r1","type":"body_mass","value":160,"unit":"lb",\#(t)}"#,   // converted to kg
        #"{"uuid":"r2","type":"steps","value":1,\#(t),"foo":{"bar":1}}"#,   // kept under extra
        #"{"uuid":"r3","type":"steps","value":1,\#(t),"source":{"app":"a","version":"17.1"}}"#,
        #"{"uuid":"r4","type":"steps","value":1,\#(t),"source":"Apple Watch"}"#,
        #"{"uuid":"r5","type":"steps","value":1,\#(t),"activity":"walk","duration_s":59}"#,
        #"{"uuid":"r6","type":"workout","activity":"running",\#(t),"duration_s":1870,"energy_kcal":312.4,"distance_m":5020,"metadata":{}}"#,
        #"{"uuid":"r7","type":"state_of_mind","start":"2026-10-14T07:00:00Z","kind":"daily_mood","valence":0.4}"#,
        #"{"uuid":"characteristic:blood_type","type":"characteristic","name":"blood_type","value":"a_positive"}"#,
    ]

    /// The batch the receiver makes of `samples`, keeping its records (so every line comes
    /// from a record) or not.
    func received(_ samples: [String], keepingRecords: Bool) throws -> ReceivedBatch {
        let r = SynckyReceiver(name: "ph\"one", path: "/s", maxBodyBytes: 1 << 22, auth: Authenticator(kind: .none),
                               hmacSecret: nil, device: nil, parsers: ParserPool(), logger: Logger(component: "t", sink: MemoryLogSink()))
        let req = HTTPRequest(method: "POST", path: "/s", headers: [(name: "X-Syncky-Format", value: "native")],
                              body: Array(Vectors.syncBody(device: "d_\\\"é", samples: samples).utf8))
        guard case .accept(let batch, _) = r.receive(req, context: ReceiveContext(now: Timestamp(seconds: 0),
                                                                                   keepRecords: keepingRecords ? 1_000_000 : 0)) else {
            Issue.record("not accepted")
            throw CancellationError()
        }
        #expect(batch.keepsRecords == keepingRecords)
        return batch
    }

    @Test func aBodysLinesAreTheSameWrittenStraightOrFromRecords() throws {
        let samples = Self.plain + Self.recorded + Self.plain.reversed()
        let straight = try received(samples, keepingRecords: false)
        let fromRecords = try received(samples, keepingRecords: true)
        #expect(straight.count == samples.count)
        #expect(straight.quarantined.isEmpty)
        let a = straight.payload.split(separator: 0x0A), b = fromRecords.payload.split(separator: 0x0A)
        #expect(a.count == b.count)
        for (i, (x, y)) in zip(a, b).enumerated() where x != y {
            Issue.record("line \(i): \(String(decoding: x, as: UTF8.self))\nfrom its record: \(String(decoding: y, as: UTF8.self))")
        }
        let samePayload = straight.payload == fromRecords.payload   // (a Bool: the arrays would fill the log)
        #expect(samePayload)
        #expect(straight.count == fromRecords.count)
        #expect(straight.unknownTypes == fromRecords.unknownTypes && straight.unknownTypes > 0)
        #expect(straight.unknownUnits == fromRecords.unknownUnits && straight.unknownUnits > 0)
        #expect(straight.device == fromRecords.device)
        #expect(straight.cuts.parts(total: straight.payload.count).map(\.count)
                == fromRecords.cuts.parts(total: fromRecords.payload.count).map(\.count))
        // The lines read back as the records they came from.
        let kept = fromRecords.kept.flatMap(\.records)
        #expect(straight.records == kept)
    }

    /// Which samples go which way: a plain one straight (or the test above would compare
    /// records with records), any other through its record.
    @Test func plainSamplesAreWrittenStraightAndOthersFromTheirRecords() throws {
        let parser = JSONParser()
        for (samples, expected) in [(Self.plain, true), (Self.recorded, false)] {
            for s in samples {
                let doc = try parser.parse(s)
                var reuse = SynckyNative.SampleCache(device: "d", receiver: "r")
                var why = ""
                guard let c = SynckyNative.check(doc.root, reuse: &reuse, refusal: &why) else {
                    Issue.record("refused: \(why): \(s)")
                    continue
                }
                var batch = ReceivedBatch()
                let wrote = SynckyNative.writeLine(c, receiver: "r", device: "d", reuse: &reuse, into: &batch)
                #expect(wrote == expected, "\(s)")
                #expect(batch.count == (wrote ? 1 : 0))
            }
        }
    }

    /// A body longer than one journal entry is cut at the same lines both ways.
    @Test func aLongBodyIsCutAtTheSameLines() throws {
        let samples = (0..<5_000).map { i in
            #"{"uuid":"u-\#(i)","type":"heart_rate","value":\#(60 + i % 40),"unit":"count/min",\#(Self.t),\#(Self.src)}"#
        }
        let straight = try received(samples, keepingRecords: false)
        let fromRecords = try received(samples, keepingRecords: true)
        let samePayload = straight.payload == fromRecords.payload
        #expect(samePayload)
        let parts = straight.cuts.parts(total: straight.payload.count)
        #expect(parts.count > 1)
        #expect(parts.map(\.range) == fromRecords.cuts.parts(total: fromRecords.payload.count).map(\.range))
    }
}

/// `ByteWriter.str` copies a string eight bytes at a time while none needs an escape: every
/// length, with a byte to escape at every place, escapes as `JSONWriter` does.
@Suite struct JSONStringEscapeTests {
    @Test func everyLengthAndPlaceOfAnEscapeIsWrittenAsJSONWriterWrites() {
        for length in 0...40 {
            for escapeAt in -1..<length {
                for special: UInt8 in [0x22, 0x5C, 0x0A, 0x01, 0x1F] where escapeAt >= 0 || special == 0x22 {
                    var bytes = (0..<length).map { UInt8(0x61 + $0 % 26) }
                    if escapeAt >= 0 { bytes[escapeAt] = special }
                    let text = String(decoding: bytes, as: UTF8.self)
                    let ours = ByteWriter.bytes(atMost: ByteWriter.bound(text)) { $0.str(text) }
                    var theirs = JSONWriter(capacity: 64)
                    theirs.string(text)
                    #expect(ours == theirs.bytes, "length \(length), escape at \(escapeAt)")
                }
            }
        }
    }
}
