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
        SynckyReceiver(
            name: "phone", path: "/syncky", maxBodyBytes: 1_000_000, auth: auth, hmacSecret: secret,
            device: nil, parsers: ParserPool(), logger: Logger(component: "t", sink: logs))
    }

    func receive(_ body: String, format: String = "native", receiver r: SynckyReceiver? = nil) -> Reception {
        let req = HTTPRequest(
            method: "POST", path: "/syncky",
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
        let steps = Vectors.stepsSample.replacingOccurrences(
            of: "\"unit\": \"count\"",
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
        let s =
            #"{"uuid":"u1","type":"brand_new_type","value":1.5,"unit":"zz","start":"2026-10-14T07:01:00Z","end":"2026-10-14T07:01:00Z","shiny":{"a":[1,"x",null]},"n":-0.25}"#
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
            #"{"uuid":"u8","type":"sleep_analysis","value":3,"start":"2026-10-14T07:01:00Z"}"#
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
        ("", "not valid JSON"), (String(repeating: "[", count: 100_000), "not valid JSON")
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
        let s =
            #"{"uuid":"m1","type":"state_of_mind","start":"2026-10-14T07:00:00Z","kind":"daily_mood","code":{"x":1},"op":"delete","valence":0.4,"activity":7}"#
        let logs = MemoryLogSink()
        let r = SynckyReceiver(
            name: "phone", path: "/s", maxBodyBytes: 1 << 20, auth: Authenticator(kind: .none),
            hmacSecret: nil, device: nil, parsers: ParserPool(), logger: Logger(component: "t", sink: logs))
        let req = HTTPRequest(
            method: "POST", path: "/s", headers: [(name: "X-Syncky-Format", value: "native")],
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
