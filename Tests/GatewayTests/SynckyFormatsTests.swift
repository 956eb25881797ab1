import CanonicalJSON
import FastJSON
@testable import Gateway
import HealthgateCore
@testable import HealthgateTesting
@testable import Pipeline
import SinkKit
import Testing

/// The guide's CSV and line-protocol bodies, and the same facts in every format.
@Suite struct SynckyFormatsTests {
    static let csv =
        "type,uuid,start,end,value,unit,value_name,source,device,user_entered\r\n"
        + "steps,5E1D0000-0000-4000-8000-000000000001,2026-10-14T09:01:00+02:00,2026-10-14T09:01:59+02:00,412,count,,com.apple.Health,Apple Watch,false\r\n"
        + "sleep_analysis,51EE0000-0000-4000-8000-000000000001,2026-10-14T01:10:00+02:00,2026-10-14T02:40:00+02:00,3,,asleep_core,com.apple.Health,Apple Watch,false\r\n"
        + "workout,0B6F0000-0000-4000-8000-000000000001,2026-10-14T07:00:00+02:00,2026-10-14T07:31:10+02:00,1870,s,running,com.apple.Health,Apple Watch,false\r\n"
        + "characteristic,characteristic:blood_type,,,1,,a_positive,,,\r\n"
        + "steps,5E1D0000-0000-4000-8000-000000000099,,,,,deleted,,,\r\n"

    static let influx = #"""
        steps,device=Apple\ Watch,source=com.apple.Health,unit=count value=412 1791961260000000000
        sleep_analysis,device=Apple\ Watch,source=com.apple.Health value=3,value_name="asleep_core" 1791933000000000000
        workout,activity=running,device=Apple\ Watch,source=com.apple.Health duration_s=1870,energy_kcal=312.4,distance_m=5020 1791954000000000000

        """#

    func receive(_ body: String, format: String, query: String = "") -> Reception {
        let r = SynckyReceiver(
            name: "phone", path: "/s", maxBodyBytes: 1 << 20, auth: Authenticator(kind: .none),
            hmacSecret: nil, device: "my-iphone", parsers: ParserPool(),
            logger: Logger(component: "t", sink: MemoryLogSink()))
        let req = HTTPRequest(
            method: "POST", path: "/s", query: query, headers: [(name: "X-Syncky-Format", value: format)],
            body: Array(body.utf8))
        return r.receive(req, context: ReceiveContext(now: Timestamp(seconds: 0)))
    }

    func batch(_ body: String, format: String, query: String = "") throws -> ReceivedBatch {
        guard case .accept(let b, let reply) = receive(body, format: format, query: query) else {
            Issue.record("not accepted: \(receive(body, format: format))")
            throw CancellationError()
        }
        #expect(reply.status / 100 == 2)
        return b
    }

    @Test func readsTheGuidesCSV() throws {
        let b = try batch(Self.csv, format: "csv")
        #expect(b.quarantined.isEmpty, "\(b.quarantined)")
        let r = b.records
        #expect(r.count == 5)
        #expect(r[0].type == "steps" && r[0].kind == "quantity" && r[0].value == .number(412) && r[0].unit == "count")
        #expect(r[0].start?.rfc3339() == "2026-10-14T07:01:00Z" && r[0].end?.rfc3339() == "2026-10-14T07:01:59Z")
        #expect(r[0].utcOffset == 7200)
        #expect(r[0].device == "my-iphone")
        #expect(r[0].source == RecordSource(app: "com.apple.Health", device: "Apple Watch"))
        #expect(r[1].kind == "category" && r[1].value == .string("asleep_core") && r[1].code == 3)
        #expect(r[2].kind == "workout" && r[2].activity == "running" && r[2].durationS == 1870)
        #expect(r[3].kind == "characteristic" && r[3].value == .string("a_positive") && r[3].code == 1)
        #expect(r[3].fields == [RecordField("name", RawJSON("\"blood_type\""))])
        #expect(r[4].op == .delete && r[4].uuid == "5E1D0000-0000-4000-8000-000000000099" && r[4].type == "steps")
    }

    @Test func readsQuotedFieldsAndUndoesTheFormulaGuard() throws {
        let body =
            "type,uuid,start,end,value,unit,value_name,source,device,user_entered\r\n"
            + "steps,u1,2026-10-14T09:01:00+02:00,,5,count,,\"My, \"\"odd\"\"\napp\",'=SUM(A1),true\r\n"
            + "steps,u2,2026-10-14T09:01:00Z,,6,count,,'+plus,'hello,false\r\n"
        let r = try batch(body, format: "csv").records
        #expect(r.count == 2)
        #expect(r[0].source == RecordSource(app: "My, \"odd\"\napp", device: "=SUM(A1)"))
        #expect(r[0].extra == [RecordField("user_entered", RawJSON("true"))])
        // Only the guard before a formula character is removed.
        #expect(r[1].source == RecordSource(app: "+plus", device: "'hello"))
    }

    @Test func theCheckConnectionBodiesStoreNothing() throws {
        #expect(try batch("type,uuid,start,end,value,unit,value_name,source,device,user_entered\r\n", format: "csv").isEmpty)
        #expect(try batch("", format: "influx").isEmpty)
    }

    @Test func refusesCSVWithoutTheHeaderAndSetsAsideBadRows() throws {
        guard case .unreadable(let status, let reason) = receive("a,b\r\n1,2\r\n", format: "csv") else {
            Issue.record("a wrong header must be refused")
            return
        }
        #expect(status == 400)
        #expect(reason.contains("header row"))
        guard case .unreadable = receive("type,uuid\r\n\"open", format: "csv") else {
            Issue.record("an unclosed quote must be refused")
            return
        }
        let b = try batch(
            Self.csv.replacingOccurrences(of: ",412,", with: ",four,")
                + "steps,u9,yesterday,,1,count,,,,\r\nsteps,u10\r\n", format: "csv")
        #expect(b.count == 4)
        // Reasons reach the log: they describe a bad value and never quote it.
        #expect(
            b.quarantined.map(\.reason) == [
                "line 2: value is not a number (a text of 4 characters)",
                "line 7: start is not an RFC 3339 time (a text of 9 characters)",
                "line 8: 2 fields; a row has 10"
            ])
    }

    @Test func readsTheGuidesLineProtocol() throws {
        let b = try batch(Self.influx, format: "influx")
        #expect(b.quarantined.isEmpty)
        let r = b.records
        #expect(r.count == 3)
        #expect(r[0].type == "steps" && r[0].value == .number(412) && r[0].unit == "count")
        #expect(r[0].start?.rfc3339() == "2026-10-14T07:01:00Z")
        #expect(r[0].source == RecordSource(app: "com.apple.Health", device: "Apple Watch"))
        #expect(r[1].kind == "category" && r[1].value == .string("asleep_core") && r[1].code == 3)
        #expect(r[1].start?.rfc3339() == "2026-10-13T23:10:00Z")
        #expect(
            r[2].kind == "workout" && r[2].activity == "running" && r[2].durationS == 1870
                && r[2].energyKcal == 312.4 && r[2].distanceM == 5020)
        #expect(r[2].end?.rfc3339() == "2026-10-14T05:31:10Z")
        // No uuid in line protocol: a key from the point's identity, the same when sent again.
        let again = try batch(Self.influx, format: "influx").records
        #expect(r.map(\.uuid) == again.map(\.uuid))
        #expect(Set(r.map(\.uuid)).count == 3)
    }

    @Test func honoursThePrecisionParameter() throws {
        let r = try batch("steps,unit=count value=1 1791961260\n", format: "influx", query: "precision=s").records
        #expect(r.first?.start?.rfc3339() == "2026-10-14T07:01:00Z")
        // InfluxDB 1.x's minutes and hours are taken and scaled.
        #expect(
            try batch("steps,unit=count value=1 29865960", format: "influx", query: "precision=m").records.first?.start?.rfc3339()
                == "2026-10-14T06:00:00Z")
        #expect(
            try batch("steps,unit=count value=1 497766", format: "influx", query: "precision=h").records.first?.start?.rfc3339()
                == "2026-10-14T06:00:00Z")
        guard case .unreadable = receive("x value=1 1\n", format: "influx", query: "precision=d") else {
            Issue.record("an unknown precision must be refused")
            return
        }
    }

    /// The same four facts sent as native, CSV and line protocol: the same type, value, UTC
    /// start, and kind (line protocol has no end for samples, nor uuids).
    @Test func theSameFactsInEveryFormatGiveTheSameRecords() throws {
        let native = try batch(
            Vectors.syncBody(samples: [Vectors.stepsSample, Vectors.sleepSample, Vectors.workoutSample]),
            format: "native"
        ).records
        let csv = try batch(Self.csv, format: "csv").records.prefix(3)
        let lp = try batch(Self.influx, format: "influx").records
        for (a, b) in zip(native, csv) {
            #expect(
                a.type == b.type && a.kind == b.kind && a.value == b.value && a.start == b.start && a.end == b.end
                    && a.uuid == b.uuid && a.code == b.code && a.durationS == b.durationS && a.activity == b.activity, "\(a.type)")
        }
        for (a, b) in zip(native, lp) {
            #expect(
                a.type == b.type && a.kind == b.kind && a.value == b.value && a.start == b.start && a.code == b.code
                    && a.durationS == b.durationS && a.activity == b.activity, "\(a.type)")
        }
    }
}

@Suite struct LineProtocolTests {
    @Test func readsInfluxDBsEscapes() throws {
        let (points, failures) = LineProtocol.parse(Array(#"comma\,1,equals\==e\,x,two=val2 field\=x="fir\"\n,st\\""#.utf8))
        #expect(failures.isEmpty)
        let p = try #require(points.first)
        #expect(p.measurement == "comma,1")
        #expect(p.tags.map(\.key) == ["equals=", "two"])
        #expect(p.tag("equals=") == "e,x")
        #expect(p.field("field=x") == .string("fir\"\n,st\\"))
        #expect(p.timestamp == nil)
    }

    @Test(arguments: [
        ("m f=1", LineProtocol.FieldValue.float(1)), ("m f=-1.5e3", .float(-1500)), ("m f=.5", .float(0.5)),
        ("m f=12i", .int(12)), ("m f=-9223372036854775808i", .int(.min)), ("m f=18446744073709551615u", .uint(.max)),
        ("m f=t", .bool(true)), ("m f=FALSE", .bool(false)), (#"m f="a b""#, .string("a b"))
    ])
    func readsEveryFieldType(_ line: String, _ value: LineProtocol.FieldValue) {
        let (points, failures) = LineProtocol.parse(Array(line.utf8))
        #expect(failures.isEmpty, "\(failures)")
        #expect(points.first?.field("f") == value)
    }

    @Test(arguments: [
        "m", "m f", "m f=", "m f=Happy", "m f=1 12x", "m f=1 1 2", "m, f=1", "m,t= f=1", ",t=1 f=1",
        #"m f="open"#, "m f=-1u", "m f=NaN", "m,\u{1}=x f=1"
    ])
    func refusesWhatInfluxDBRefuses(_ line: String) {
        let (points, failures) = LineProtocol.parse(Array(line.utf8))
        #expect(points.isEmpty, "\(line) should not parse")
        #expect(failures.count == 1)
    }

    @Test func skipsCommentsAndBlankLinesAndKeepsGoingPastABadLine() {
        let body = "# a comment\n\n  m f=1 1\r\nbad line\nm f=2 2\nm s=\"two\nlines\" 3\n"
        let (points, failures) = LineProtocol.parse(Array(body.utf8))
        #expect(points.map(\.timestamp) == [1, 2, 3])
        #expect(points[2].field("s") == .string("two\nlines"))
        #expect(failures.map(\.line) == [4])
    }
}

/// Health Auto Export's body, as Syncky sends it (and as the app itself does).
@Suite struct HAEFormatTests {
    let base = SynckyFormatsTests()

    static let body = #"""
        {"data":{"metrics":[
          {"name": "heart_rate", "units": "count/min", "data": [{"date": "2026-10-14 09:01:03 +0200", "Min": 64, "Avg": 64, "Max": 64, "source": "Apple Watch"}]},
          {"name": "step_count", "units": "count", "data": [{"date": "2026-10-14 09:01:00 +0200", "qty": 412, "source": "Apple Watch"}]},
          {"name": "blood_oxygen_saturation", "units": "%", "data": [{"date": "2026-10-14 09:05:00 +0200", "qty": 95}]},
          {"name": "weight_body_mass", "units": "lb", "data": [{"date": "2026-10-14 08:00:00 +0200", "qty": 154}]},
          {"name": "blood_pressure", "units": "mmHg", "data": [{"date": "2026-10-14 08:10:00 +0200", "systolic": 120, "diastolic": 80}]},
          {"name": "sleep_analysis", "units": "hr", "data": [{"startDate": "2026-10-14 01:10:00 +0200", "endDate": "2026-10-14 02:40:00 +0200", "qty": 1.5, "value": "InBed", "source": "Apple Watch"}]},
          {"name": "a_metric_nobody_knows", "units": "zz", "data": [{"date": "2026-10-14 08:00:00 +0200", "qty": 7}]}
        ],
        "workouts":[{"id": "0B6F0000-0000-4000-8000-000000000001", "name": "Running", "start": "2026-10-14 07:00:00 +0200", "end": "2026-10-14 07:31:10 +0200", "duration": 1870, "activeEnergyBurned": {"qty": 312.4, "units": "kcal"}, "distance": {"qty": 5.02, "units": "km"}}]}}
        """#

    @Test func readsEveryShape() throws {
        let b = try base.batch(Self.body, format: "hae")
        #expect(b.quarantined.isEmpty, "\(b.quarantined)")
        let r = b.records
        let byType = Dictionary(grouping: r, by: \.type)
        let hr = try #require(byType["heart_rate"]?.first)
        #expect(hr.value == .number(64) && hr.unit == "count/min")
        #expect(hr.start?.rfc3339() == "2026-10-14T07:01:03Z" && hr.utcOffset == 7200)
        #expect(hr.source == RecordSource(app: nil, device: "Apple Watch"))
        #expect(Set(hr.extra.map(\.name)) == ["min", "max"])
        #expect(byType["steps"]?.first?.value == .number(412))
        // Percent ×100 undone; pounds into the canonical kilograms.
        #expect(byType["oxygen_saturation"]?.first?.value == .number(0.95))
        let kg = try #require(byType["body_mass"]?.first?.value?.number)
        #expect(abs(kg - 69.853) < 0.001)
        #expect(byType["body_mass"]?.first?.unit == "kg")
        #expect(byType["blood_pressure_systolic"]?.first?.value == .number(120))
        #expect(byType["blood_pressure_diastolic"]?.first?.value == .number(80))
        let sleep = try #require(byType["sleep_analysis"]?.first)
        #expect(sleep.kind == "category" && sleep.value == .string("in_bed") && sleep.code == 0)
        #expect(sleep.end?.rfc3339() == "2026-10-14T00:40:00Z")
        // An unknown metric is kept as it came, and counted.
        #expect(byType["a_metric_nobody_knows"]?.first?.unit == "zz")
        #expect(b.unknownTypes == 1 && b.unknownUnits == 1)
        let w = try #require(byType["workout"]?.first)
        #expect(w.uuid == "0B6F0000-0000-4000-8000-000000000001" && w.activity == "running")
        #expect(w.durationS == 1870 && w.energyKcal == 312.4 && w.distanceM == 5020)
    }

    @Test func recordsWithoutAnIdGetTheSameKeyWhenSentAgain() throws {
        let first = try base.batch(Self.body, format: "hae").records
        let again = try base.batch(Self.body, format: "hae").records
        #expect(first.map(\.uuid) == again.map(\.uuid))
        #expect(Set(first.map(\.uuid)).count == first.count)
    }

    @Test func theCheckConnectionBodyStoresNothingAndBadBodiesAreRefused() throws {
        #expect(try base.batch(#"{"data":{"metrics":[],"workouts":[]}}"#, format: "hae").isEmpty)
        guard case .unreadable(let status, _) = base.receive(#"{"metrics":[]}"#, format: "hae") else {
            Issue.record("a body without data must be refused")
            return
        }
        #expect(status == 400)
        let b = try base.batch(
            #"{"data":{"metrics":[{"name":"step_count","data":[{"date":"yesterday","qty":1},{"date":"2026-10-14 09:01:00 +0200","qty":2}]}]}}"#,
            format: "hae")
        #expect(b.count == 1)
        #expect(b.quarantined.count == 1)
    }

    /// The guide's facts in HAE come out as in the native format: type, value in the canonical
    /// unit, UTC start, and for the workout its key and figures.
    @Test func theSameFactsAsNative() throws {
        let native = try base.batch(Vectors.syncBody(samples: [Vectors.stepsSample, Vectors.workoutSample]), format: "native").records
        let hae = try base.batch(Self.body, format: "hae").records
        let steps = try #require(hae.first { $0.type == "steps" })
        #expect(steps.value == native[0].value && steps.start == native[0].start && steps.unit == native[0].unit)
        let w = try #require(hae.first { $0.type == "workout" })
        let n = native[1]
        #expect(
            w.uuid == n.uuid && w.start == n.start && w.end == n.end && w.activity == n.activity
                && w.durationS == n.durationS && w.energyKcal == n.energyKcal && w.distanceM == n.distanceM)
    }
}

/// The other shapes Health Auto Export's own automation sends.
@Suite struct HAEShapesTests {
    let base = SynckyFormatsTests()

    /// Health Auto Export as the app really sends it: v1 workouts without `duration`, workout
    /// names in the phone's language, aggregated sleep timed by its night, a night without `date`.
    @Test func takesTheShapesTheAppReallySends() throws {
        let body = #"""
            {"data":{
              "metrics":[{"name":"sleep_analysis","units":"hr","data":[
                {"date":"2026-10-14 07:12:00 +0200","totalSleep":7.1,"core":4,"deep":1.2,"rem":1.9,"awake":0.3,"sleepStart":"2026-10-13 23:10:00 +0200","sleepEnd":"2026-10-14 06:40:00 +0200","inBed":7.5,"inBedStart":"2026-10-13 23:00:00 +0200","inBedEnd":"2026-10-14 06:45:00 +0200"},
                {"asleep":6.5,"inBed":7,"inBedStart":"2026-10-14 22:50:00 +0200","inBedEnd":"2026-10-15 05:50:00 +0200","inBedSource":"Phone"}]}],
              "workouts":[
                {"name":"Entraînement de Force Fonctionnelle","start":"2026-10-14 18:00:00 +0200","end":"2026-10-14 18:45:30 +0200"},
                {"name":"Outdoor Walk","start":"2026-10-14 19:00:00 +0200","end":"2026-10-14 19:30:00 +0200","duration":1700}]
            }}
            """#
        let b = try base.batch(body, format: "hae")
        #expect(b.quarantined.isEmpty, "\(b.quarantined)")
        let nights = b.records.filter { $0.kind == "summary" && $0.type == "sleep_analysis" }
        #expect(nights.count == 2)
        // Timed by the sleep window, in UTC; the window's local strings are UTC times too.
        #expect(nights.first?.start?.rfc3339() == "2026-10-13T21:10:00Z" && nights.first?.end?.rfc3339() == "2026-10-14T04:40:00Z")
        #expect(nights.first?.utcOffset == 7200)
        #expect(nights.first?.fields.first { $0.name == "sleepStart" }?.value == RawJSON(#""2026-10-13T21:10:00Z""#))
        // Without `date` and without a sleep window: timed by the time in bed, and kept.
        #expect(nights.last?.start?.rfc3339() == "2026-10-14T20:50:00Z" && nights.last?.end?.rfc3339() == "2026-10-15T03:50:00Z")
        let workouts = b.records.filter { $0.type == "workout" }
        #expect(workouts.count == 2)
        #expect(workouts[0].durationS == 2730, "v1 workouts have no duration: end − start")
        #expect(workouts[0].activity == "functional_strength_training", "a name in the phone's language that we know")
        #expect(HealthTypes.workout(haeName: "Laufen")?.name == "running" && HealthTypes.workout(haeName: "Natación")?.name == "swimming")
        #expect(workouts[0].extra.contains { $0.name == "name" && $0.value == .string("Entraînement de Force Fonctionnelle") })
        #expect(workouts[1].durationS == 1700 && workouts[1].extra.contains { $0.name == "name" && $0.value == .string("Outdoor Walk") })
    }

    @Test func keepsEveryShape() throws {
        let body = #"""
            {"data":{
              "metrics":[
                {"name":"blood_glucose","units":"mmol/L","data":[{"date":"2026-10-14 08:00:00 +0200","qty":5.5,"mealTime":"Before Meal"}]},
                {"name":"sleep_analysis","units":"hr","data":[
                  {"date":"2026-10-14 00:00:00 +0200","totalSleep":7.1,"asleep":0,"core":4,"deep":1.2,"rem":1.9,"awake":0.3,"sleepStart":"2026-10-13 23:10:00 +0200","sleepEnd":"2026-10-14 06:40:00 +0200","inBed":7.5,"inBedStart":"2026-10-13 23:00:00 +0200","inBedEnd":"2026-10-14 06:45:00 +0200"},
                  {"date":"2026-10-15","asleep":6.5,"sleepStart":"2026-10-14 23:00:00 +0200","sleepEnd":"2026-10-15 05:30:00 +0200","sleepSource":"Watch","inBed":7,"inBedStart":"2026-10-14 22:50:00 +0200","inBedEnd":"2026-10-15 05:50:00 +0200","inBedSource":"Phone"},
                  {"startDate":"2026-10-14 01:10:00 +0200","endDate":"2026-10-14 02:40:00 +0200","qty":1.5,"value":"In Bed"}]}
              ],
              "workouts":[{"name":"Outdoor Walk","start":"2026-10-14 18:00:00 +0200","end":"2026-10-14 18:30:00 +0200",
                           "heartRateData":[{"date":"2026-10-14 18:01:00 +0200","qty":98,"units":"bpm"}],
                           "route":[{"lat":47.5,"lon":19.04,"altitude":110,"timestamp":"2026-10-14 18:01:00 +0200"}],
                           "distance":{"qty":1.9,"units":"mi"}}],
              "stateOfMind":[{"id":"SOM-1","start":"2026-10-14 12:00:00 +0200","end":"2026-10-14 12:00:00 +0200","kind":"momentaryEmotion","labels":["happy"],"valence":0.6}],
              "symptoms":[{"start":"2026-10-14 09:00:00 +0200","end":"2026-10-14 10:00:00 +0200","name":"Headache","severity":"Mild","userEntered":true,"source":"Health"}],
              "medications":[{"displayText":"Ibuprofen","start":"2026-10-14 09:05:00 +0200","status":"taken"}],
              "ecg":[{"start":"2026-10-14 11:00:00 +0200","end":"2026-10-14 11:00:30 +0200","classification":"Sinus Rhythm","averageHeartRate":64}],
              "heartRateNotifications":[{"start":"2026-10-14 03:00:00 +0200","end":"2026-10-14 03:10:00 +0200","threshold":120}]
            }}
            """#
        let b = try base.batch(body, format: "hae")
        #expect(b.quarantined.isEmpty, "\(b.quarantined)")
        let r = b.records
        let glucose = try #require(r.first { $0.type == "blood_glucose" })
        #expect(abs((glucose.value?.number ?? 0) - 99.09) < 0.01 && glucose.unit == "mg/dL")
        #expect(glucose.extra.contains { $0.name == "mealTime" })
        let summaries = r.filter { $0.kind == "summary" }
        #expect(summaries.count == 2) // the aggregated and the pre-6.6.2 forms, kept whole
        #expect(summaries[0].fields.contains { $0.name == "totalSleep" })
        #expect(r.contains { $0.type == "sleep_analysis" && $0.value == .string("in_bed") })
        let walk = try #require(r.first { $0.type == "workout" })
        #expect(walk.activity == "outdoor_walk" || walk.activity == "walking")
        #expect(abs((walk.distanceM ?? 0) - 3057.746) < 0.01)
        #expect(walk.fields.map(\.name).contains("route") && walk.fields.map(\.name).contains("heartRateData"))
        #expect(r.contains { $0.kind == "state_of_mind" && $0.uuid == "SOM-1" && $0.fields.contains { $0.name == "valence" } })
        let headache = try #require(r.first { $0.type == "headache" })
        #expect(headache.kind == "category" && headache.value == .string("mild") && headache.code == 2)
        #expect(r.contains { $0.kind == "medications" })
        #expect(r.contains { $0.kind == "ecg" })
        #expect(r.contains { $0.kind == "heart_rate_notification" })
    }
}

extension LineProtocol {
    /// Every point of a body, and the lines that are no points.
    static func parse(_ body: [UInt8]) -> (points: [Point], failures: [Failure]) {
        var points: [Point] = []
        var failures: [Failure] = []
        forEachLine(body) { result in
            switch result {
            case .success(let p): points.append(p)
            case .failure(let f): failures.append(f)
            }
        }
        return (points, failures)
    }
}
