import FastJSON
import Foundation
import HealthgateCore
@testable import HealthgateTesting
import CanonicalJSON
import Pipeline
import Posix
import SinkKit
import Testing
@testable import Transforms
import YAMLConfig

/// The stateless transforms — filter, rename, convert, drop — each against records a phone
/// sends, and against the mistakes a config can hold; each one's documented example decodes.
@Suite struct TransformTests {
    static let noon = Timestamp(seconds: 1_796_126_400) // 2026-12-01T12:00:00Z

    static func q(
        _ uuid: String, _ type: String, _ value: Double, _ unit: String?, device: String = "phone-1",
        receiver: String = "phone", app: String? = "com.apple.Health", at t: Timestamp = noon
    ) -> CanonicalRecord {
        CanonicalRecord(
            kind: "quantity", device: device, receiver: receiver, uuid: uuid, type: type, start: t, end: t,
            value: .number(value), unit: unit ?? HealthTypes.named(type)?.unit,
            source: app.map { RecordSource(app: $0, device: "Apple Watch") })
    }

    static func deletion(_ uuid: String, type: String = "steps", device: String = "phone-1") -> CanonicalRecord {
        CanonicalRecord(op: .delete, kind: "quantity", device: device, receiver: "phone", uuid: uuid, type: type)
    }

    func build(_ name: String, _ yaml: String) throws -> any TransformSpec {
        let node = try parseYAML(yaml, file: "t", environment: [:])
        let builder = try #require(TransformRegistry.builder(named: name))
        return try builder(node, "routes[0].transforms[0].\(name)")
    }

    func problems(_ name: String, _ yaml: String) -> String {
        do {
            _ = try build(name, yaml)
            return ""
        } catch {
            return "\(error)"
        }
    }

    func instance(_ spec: any TransformSpec, clock: any Clock = FixedClock(noon)) -> any Transform {
        spec.instantiate(
            TransformContext(
                route: "r", sink: "s", clock: clock, timeZones: SystemTimeZones(),
                logger: Logger(component: "t", sink: MemoryLogSink())))
    }

    func run(_ spec: any TransformSpec, _ records: [CanonicalRecord], clock: any Clock = FixedClock(noon)) -> [CanonicalRecord] {
        let t = instance(spec, clock: clock)
        var out: [CanonicalRecord] = []
        for r in records { t.process(r) { out.append($0) } }
        return out
    }

    // MARK: filter

    @Test func filterByEveryRuleAndItsExclusion() throws {
        let f = try build(
            "filter",
            """
            types: [steps, "heart_*"]
            exclude_types: [heart_rate_variability_sdnn]
            devices: ["phone-*"]
            exclude_devices: [phone-9]
            receivers: [phone]
            exclude_sources: ["com.example.*"]
            values: {heart_rate: {min: 25, max: 250}}
            """)
        let kept = run(
            f,
            [
                Self.q("a", "steps", 10, nil), Self.q("b", "heart_rate", 61, nil), Self.q("c", "body_mass", 70, nil),
                Self.q("d", "heart_rate_variability_sdnn", 40, nil), Self.q("e", "steps", 5, nil, device: "phone-9"),
                Self.q("f", "steps", 5, nil, receiver: "other"), Self.q("g", "steps", 5, nil, app: "com.example.fake"),
                Self.q("h", "heart_rate", 400, nil), Self.q("i", "heart_rate", 20, nil), Self.q("j", "steps", 1, nil, app: nil),
                Self.deletion("k")
            ])
        #expect(kept.map(\.uuid) == ["a", "b", "j", "k"])
    }

    @Test func filterByTimeAndKind() throws {
        let f = try build("filter", "since: 2026-11-01\nmax_age: 7d\nexclude_kinds: [workout_route]")
        var route = Self.q("r", "workout_route", 0, nil)
        route.kind = "workout_route"
        let kept = run(
            f,
            [
                Self.q("new", "steps", 1, nil), Self.q("week", "steps", 1, nil, at: Timestamp(seconds: Self.noon.seconds - 8 * 86_400)),
                Self.q("old", "steps", 1, nil, at: Timestamp(seconds: 1_790_000_000)), route, Self.deletion("gone")
            ])
        // The deletion of an old sample still passes: a sink may hold it.
        #expect(kept.map(\.uuid) == ["new", "gone"])
    }

    @Test func filterMistakes() {
        #expect(problems("filter", "since: yesterday").contains("is not a date"))
        #expect(problems("filter", "max_age: 0s").contains("more than 0"))
        #expect(problems("filter", "values: {heart_rate: {min: 300, max: 20}}").contains("min 300.0 is above max 20.0"))
        #expect(problems("filter", "values: {sleep_analysis: {min: 1}}").contains("is a category"))
        #expect(problems("filter", "values: {heart_rate: {}}").contains("give min, max or both"))
        #expect(problems("filter", "typse: [steps]").contains("typse"))
    }

    // MARK: rename

    @Test func renameTypesAndDevicesDeletionsToo() throws {
        let r = try build("rename", "types: {apple_exercise_time: exercise_minutes}\ndevices: {d_zsOZnTQUz_juWFVljuOOBQ: alice-iphone}")
        let out = run(
            r,
            [
                Self.q("a", "apple_exercise_time", 30, nil, device: "d_zsOZnTQUz_juWFVljuOOBQ"),
                Self.deletion("b", device: "d_zsOZnTQUz_juWFVljuOOBQ"), Self.q("c", "steps", 1, nil)
            ])
        #expect(out.map(\.type) == ["exercise_minutes", "steps", "steps"])
        #expect(out.map(\.device) == ["alice-iphone", "alice-iphone", "phone-1"])
        #expect(out[0].value == .number(30))
    }

    @Test func renameMistakes() {
        #expect(problems("rename", "{}").contains("rename needs types, devices or both"))
        #expect(problems("rename", "types: {steps: \"Steps Today\"}").contains("a type name is lower-case"))
        #expect(problems("rename", "devices: {a: \"\"}").contains("1 to 128 characters"))
    }

    // MARK: convert

    @Test func convertByTypeAndByFamilyWithExactFactors() throws {
        let c = try build("convert", "{body_mass: lb, distance: km, temperature: degF}")
        let out = run(
            c,
            [
                Self.q("m", "body_mass", 70, "kg"), Self.q("d", "distance_walking_running", 1500, "m"),
                Self.q("t", "body_temperature", 37, "degC"), Self.q("h", "heart_rate", 61, nil),
                Self.q("odd", "steps", 3, "widgets"), Self.deletion("x")
            ])
        #expect(out[0].unit == "lb" && abs((out[0].value?.number ?? 0) - 70 / 0.45359237) < 1e-9)
        #expect(out[1].unit == "km" && out[1].value == .number(1.5))
        #expect(out[2].unit == "degF" && abs((out[2].value?.number ?? 0) - 98.6) < 1e-9)
        #expect(out[3].value == .number(61) && out[4].unit == "widgets" && out[5].op == .delete)
        // A type's own entry wins over its family's.
        let both = try build("convert", "{mass: g, body_mass: lb}")
        #expect(run(both, [Self.q("m", "body_mass", 1, "kg"), Self.q("l", "lean_body_mass", 1, "kg")]).map(\.unit) == ["lb", "g"])
    }

    @Test func convertMistakes() {
        #expect(problems("convert", "{body_mass: km}").contains("cannot be shown in \"km\""))
        #expect(problems("convert", "{sleep_analysis: h}").contains("is a category"))
        #expect(problems("convert", "{mass: km}").contains("is not a unit of mass"))
        #expect(problems("convert", "{wieght: lb}").contains("neither a type the registry knows nor a unit family"))
        #expect(problems("convert", "{}").contains("at least one"))
    }

    // MARK: drop

    @Test func dropFieldsKindsAndLocationPrecision() throws {
        let d = try build("drop", "fields: [metadata, source]\nkinds: [heartbeat_series]\ncoarsen_location: 3")
        var route = CanonicalRecord(
            kind: "workout_route", device: "p", receiver: "r", uuid: "w", type: "workout_route", part: 0, parts: 1,
            start: Self.noon, end: Self.noon)
        route.fields = [
            RecordField(
                "points", RawJSON(#"[{"lat":47.497912,"lon":19.040235,"altitude":120.5},{"latitude":-33.868820,"longitude":151.209296}]"#))
        ]
        route.extra = [RecordField("start", RawJSON(#"{"lat":47.4979,"lng":19.0402,"name":"home lat"}"#))]
        route.metadata = RawJSON(#"{"HKWeatherTemperature":"20 degC"}"#)
        var beats = Self.q("b", "heartbeat_series", 0, nil)
        beats.kind = "heartbeat_series"
        var beatsGone = Self.deletion("b2")
        beatsGone.kind = "heartbeat_series"
        let out = run(d, [route, beats, beatsGone, Self.q("s", "steps", 1, nil)])
        #expect(out.map(\.uuid) == ["w", "b2", "s"])
        #expect(out[0].metadata == nil && out[0].source == nil && out[2].source == nil)
        #expect(
            out[0].fields[0].value.description == #"[{"lat":47.498,"lon":19.04,"altitude":120.5},{"latitude":-33.869,"longitude":151.209}]"#
        )
        #expect(out[0].extra[0].value.description == #"{"lat":47.498,"lng":19.04,"name":"home lat"}"#)
        // Nothing to coarsen: the same bytes.
        #expect(
            DropTransform.coarsen(RawJSON(#"{"steps":[1,2,3]}"#), decimals: 2, parser: JSONParser()).description == #"{"steps":[1,2,3]}"#)
    }

    @Test func dropMistakes() {
        #expect(problems("drop", "fields: [metdata]").contains("is not a field drop can take out"))
        #expect(problems("drop", "coarsen_location: 12").contains("0 to 8 decimals"))
        #expect(problems("drop", "{}").contains("drop needs fields, kinds or coarsen_location"))
    }

    // MARK: tag

    @Test func tagLabelsEveryRecordAndTheLabelsTravel() throws {
        let t = try build("tag", "{person: alice, household: home}")
        var tagged = Self.q("a", "steps", 1, nil)
        tagged.tags = [RecordTag("household", "old"), RecordTag("room", "kitchen")]
        let out = run(t, [Self.q("b", "steps", 2, nil), tagged, Self.deletion("c")])
        #expect(out[0].tags == [RecordTag("person", "alice"), RecordTag("household", "home")])
        #expect(out[1].tags == [RecordTag("household", "home"), RecordTag("room", "kitchen"), RecordTag("person", "alice")])
        #expect(out[2].tags.count == 2)
        // In the canonical JSON (the journal, files, webhooks, MQTT records), and back.
        let line = CanonicalCodec.encodeLine(out[0])
        #expect(String(decoding: line, as: UTF8.self).contains(#""tags":{"person":"alice","household":"home"}"#))
        let parser = JSONParser()
        let doc = try parser.parse(line)
        #expect(try CanonicalCodec.decode(doc.root) == out[0])
        // A sender's own field called "tags" that is not labels stays what it was.
        let oldDoc = try parser.parse(
            #"{"op":"upsert","kind":"workout","device":"d","receiver":"r","uuid":"u","type":"workout","tags":["run",3]}"#)
        let old = try CanonicalCodec.decode(oldDoc.root)
        #expect(old.tags.isEmpty && old.fields.first?.name == "tags")
    }

    @Test func tagMistakes() {
        #expect(problems("tag", "{Person: alice}").contains("is not a label name"))
        #expect(problems("tag", "{person: \"\"}").contains("1 to 256 bytes"))
        #expect(problems("tag", "[person]").contains("a mapping"))
        #expect(problems("tag", "{}").contains("at least one label"))
    }

    // MARK: dedupe

    @Test func dedupeLetsEachRecordThroughOnceUntilItChangesOrIsDeleted() throws {
        let spec = try build("dedupe", "{ttl: 1h, max_keys: 1000}")
        let clock = FakeClock(Self.noon)
        let t = instance(spec, clock: clock)
        func pass(_ records: [CanonicalRecord]) -> [String] {
            var out: [String] = []
            for r in records { t.process(r) { out.append($0.uuid + ($0.part.map { "#\($0)" } ?? "")) } }
            return out
        }
        func part(_ uuid: String, _ p: Int) -> CanonicalRecord {
            var r = Self.q(uuid, "workout_route", 0, nil)
            r.kind = "workout_route"; r.part = p; r.parts = 2
            return r
        }
        #expect(pass([Self.q("a", "steps", 1, nil), Self.q("b", "steps", 2, nil), part("w", 0), part("w", 1)]) == ["a", "b", "w#0", "w#1"])
        // The same chunk again: nothing passes; a corrected sample does.
        #expect(pass([Self.q("a", "steps", 1, nil), Self.q("b", "steps", 3, nil), part("w", 1)]) == ["b"])
        // A deletion passes and forgets every part: the route may come back.
        #expect(pass([Self.deletion("w"), part("w", 0), part("w", 1), Self.q("a", "steps", 1, nil)]) == ["w", "w#0", "w#1"])
        // After the ttl, a repeat passes again.
        clock.advance(3601)
        #expect(pass([Self.q("a", "steps", 1, nil)]) == ["a"])
        // The state comes back whole after a restart.
        let again = instance(spec, clock: clock)
        try again.restoreState(try #require(t.saveState()))
        var out: [String] = []
        for r in [Self.q("a", "steps", 1, nil), Self.q("b", "steps", 3, nil), Self.q("c", "steps", 1, nil)] {
            again.process(r) { out.append($0.uuid) }
        }
        #expect(out == ["b", "c"]) // a: remembered across the restart; b: last passed over an hour ago
        #expect(throws: TransformStateError.self) { try again.restoreState(Array("5:abcde0:".utf8)) }
    }

    @Test func dedupeForgetsTheOldestPastMaxKeys() throws {
        let spec = try build("dedupe", "{max_keys: 100}")
        let clock = FakeClock(Self.noon)
        let t = instance(spec, clock: clock)
        for i in 0..<150 {
            clock.advance(1)
            t.process(Self.q("k\(i)", "steps", 1, nil)) { _ in }
        }
        var passed: [String] = []
        for i in [0, 149] { t.process(Self.q("k\(i)", "steps", 1, nil)) { passed.append($0.uuid) } }
        #expect(passed == ["k0"]) // the oldest was forgotten, the newest is remembered
        #expect((t.saveState()?.count ?? 0) <= 100 * 24 + 32)
    }

    @Test func dedupeMistakes() {
        #expect(problems("dedupe", "{ttl: 0s}").contains("at least 1s"))
        #expect(problems("dedupe", "{max_keys: 0}").contains("1 to 50,000,000"))
        #expect(problems("dedupe", "{tll: 7d}").contains("tll"))
    }

    // MARK: aggregate

    /// One batch through a transform, its flush included.
    func batch(_ t: any Transform, _ records: [CanonicalRecord]) -> [CanonicalRecord] {
        var out: [CanonicalRecord] = []
        for r in records { t.process(r) { out.append($0) } }
        t.flush { out.append($0) }
        return out
    }

    @Test func aggregateHourlySumsStayRightThroughResendsLateSamplesAndDeletions() throws {
        let t = instance(try build("aggregate", "{types: [steps], every: 1h, how: sum, keep_source: false}"))
        let h = Self.noon.seconds
        func at(_ s: Int64) -> Timestamp { Timestamp(seconds: h + s) }
        var out = batch(
            t,
            [
                Self.q("a", "steps", 100, nil, at: at(60)), Self.q("b", "steps", 50, nil, at: at(1800)),
                Self.q("c", "steps", 7, nil, at: at(3600 + 5)), Self.q("hr", "heart_rate", 61, nil)
            ])
        // The heart rate is not aggregated and passes; the steps are absorbed into two buckets.
        #expect(out.map(\.uuid) == ["hr", "aggregate:sum:1h:steps:2026-12-01T12:00:00", "aggregate:sum:1h:steps:2026-12-01T13:00:00"])
        #expect(out[1].value == .number(150) && out[1].start == Self.noon && out[1].end == at(3599))
        #expect(out[1].tags == [RecordTag("aggregate", "sum"), RecordTag("interval", "1h")] && out[1].unit == "count")
        #expect(out[1].fields == [RecordField("samples", .integer(2))])
        // The same chunk again: nothing to say.
        #expect(batch(t, [Self.q("a", "steps", 100, nil, at: at(60))]).isEmpty)
        // A late sample and a correction: one update for the bucket.
        out = batch(t, [Self.q("late", "steps", 10, nil, at: at(900)), Self.q("b", "steps", 40, nil, at: at(1800))])
        #expect(out.count == 1 && out[0].value == .number(150))
        // A deletion takes its sample out; a bucket left empty is deleted.
        out = batch(t, [Self.deletion("a"), Self.deletion("c")])
        #expect(out.map(\.op) == [.delete, .delete, .upsert, .delete])
        #expect(out[2].value == .number(50) && out[3].uuid == "aggregate:sum:1h:steps:2026-12-01T13:00:00")
        // Its state comes back whole.
        let again = instance(try build("aggregate", "{types: [steps], every: 1h, how: sum, keep_source: false}"))
        try again.restoreState(try #require(t.saveState()))
        #expect(again.saveState() == t.saveState())
        #expect(batch(again, [Self.q("z", "steps", 5, nil, at: at(100))]).first?.value == .number(55))
    }

    @Test func aggregateByThePhonesLocalDayAndEveryHow() throws {
        // Budapest (UTC+1): 23:30Z on 30 November is 00:30 on 1 December there.
        let day = try build("aggregate", "{types: [\"heart_*\"], every: day, how: max, time_zone: Europe/Budapest}")
        let t = instance(day)
        let out = batch(
            t,
            [
                Self.q("x", "heart_rate", 70, nil, at: Timestamp(seconds: Self.noon.seconds - 12 * 3600 - 1800)),
                Self.q("y", "heart_rate", 90, nil, at: Self.noon),
                Self.q(
                    "w", "heart_rate", 120, nil,
                    at: Timestamp(seconds: Self.noon.seconds - 14 * 3600))
            ])
        let derived = out.filter { $0.uuid.hasPrefix("aggregate") }
        // keep_source defaults to true: the samples pass too.
        #expect(out.filter { !$0.uuid.hasPrefix("aggregate") }.count == 3)
        #expect(
            Set(derived.map(\.uuid)) == [
                "aggregate:max:day:heart_rate:2026-12-01T00:00:00", "aggregate:max:day:heart_rate:2026-11-30T00:00:00"
            ])
        #expect(derived.first { $0.uuid.hasSuffix("2026-12-01T00:00:00") }?.value == .number(90))
        #expect(derived.first { $0.uuid.hasSuffix("2026-12-01T00:00:00") }?.start == Timestamp(seconds: Self.noon.seconds - 13 * 3600))
        for (how, expected) in [("mean", 80.0), ("min", 70), ("count", 2), ("last", 90)] {
            let i = instance(try build("aggregate", "{types: [heart_rate], every: day, how: \(how), keep_source: false}"))
            let v = batch(
                i,
                [
                    Self.q("a", "heart_rate", 70, nil, at: Timestamp(seconds: Self.noon.seconds - 60)),
                    Self.q("b", "heart_rate", 90, nil, at: Self.noon)
                ]
            ).first?.value
            #expect(v == .number(expected), "\(how)")
        }
    }

    @Test func aggregateMistakes() {
        #expect(problems("aggregate", "{types: []}").contains("needs the types"))
        #expect(problems("aggregate", "{types: [steps], every: 7m}").contains("divides a day"))
        #expect(problems("aggregate", "{types: [steps], every: 90s}").contains("divides a day"))
        #expect(problems("aggregate", "{types: [steps], how: median}").contains("how is one of"))
        #expect(problems("aggregate", "{types: [sleep_analysis]}").contains("is a category"))
        #expect(problems("aggregate", "{types: [steps], time_zone: Moon/Base}").contains("not a time zone"))
        #expect(problems("aggregate", "{every: 1h}").contains("types"))
    }

    // MARK: the documented examples

    /// The YAML in each transform's documentation (its source file) builds as it is.
    @Test(arguments: [
        "Filter/FilterTransform.swift", "Rename/RenameTransform.swift", "Convert/ConvertTransform.swift",
        "Drop/DropTransform.swift", "Tag/TagTransform.swift", "Dedupe/DedupeTransform.swift",
        "Aggregate/AggregateTransform.swift"
    ])
    func theDocumentedExampleDecodes(file: String) throws {
        _ = try Self.documentedExample(file)
    }

    static let transformFiles = [
        "Filter/FilterTransform.swift", "Rename/RenameTransform.swift", "Convert/ConvertTransform.swift",
        "Drop/DropTransform.swift", "Tag/TagTransform.swift", "Dedupe/DedupeTransform.swift",
        "Aggregate/AggregateTransform.swift"
    ]

    /// The transform a source file's documentation shows in its ```yaml example, built.
    static func documentedExample(_ file: String) throws -> any TransformSpec {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let source = try String(contentsOf: root.appendingPathComponent("Sources/Transforms/" + file), encoding: .utf8)
        var yaml: [String] = []
        var inside = false
        for line in source.split(separator: "\n", omittingEmptySubsequences: false) {
            let text = line.hasPrefix("/// ") ? String(line.dropFirst(4)) : line.hasPrefix("///") ? String(line.dropFirst(3)) : ""
            if text.hasPrefix("```yaml") { inside = true; continue }
            if inside && text.hasPrefix("```") { break }
            if inside { yaml.append(text) }
        }
        let list = try parseYAML(yaml.joined(separator: "\n"), file: file, environment: [:])
        let item = try #require(list.elements?.first)
        let entry = try #require(item.entries?.first)
        let builder = try #require(TransformRegistry.builder(named: entry.key))
        return try builder(entry.value, "example")
    }

    /// Records of every shape a line can take: with and without value, unit, fields, source,
    /// tags, metadata and extra, and JSON of the phone's that holds the very keys the line is
    /// cut at.
    static var shapes: [CanonicalRecord] {
        var out = [
            q("s1", "steps", 412, "count"), q("h1", "heart_rate", 72, "count/min"),
            q("d1", "distance_walking_running", 1842, "m", app: nil), q("w1", "body_mass", 81.5, "kg"),
            q("e1", "active_energy_burned", 1.375, "kcal"), q("x1", "apple_exercise_time", 30, "min"),
            deletion("del1"), CanonicalCodecTests.full
        ]
        var tagged = q("t1", "steps", 5, "count")
        tagged.tags = [RecordTag("person", "bob"), RecordTag("metadata", "x")]
        var tricky = CanonicalRecord(
            kind: "category", device: "phone-1", receiver: "phone", uuid: "m1", type: "sleep_analysis",
            start: noon, end: noon,
            metadata: RawJSON(#"{"a":1,"value":2,"source":{"app":"x"},"tags":{"b":"c"},"unit":"kg"}"#))
        out.append(tagged)
        out.append(tricky)
        tricky.fields = [RecordField("route", RawJSON(#"[{"lat":52.520008,"lon":13.404954,"value":1,"source":{}}]"#))]
        tricky.uuid = "m2"
        tricky.source = RecordSource(app: "com.example", device: nil)
        out.append(tricky)
        return out
    }

    /// A record a transform left as it was keeps its journal line: the bench's convert leaves a
    /// heart rate and steps as they are, and a converted distance is changed; a rename that
    /// renames nothing leaves every record, one that renames a type, the records of that type.
    @Test func aRecordATransformLeftAsItWasKeepsItsLine() throws {
        func routed(_ specs: [any TransformSpec]) throws -> [String: Record] {
            let routes = SinkRoutes(
                routes: [Route(name: "r", from: [Glob("*")], transforms: specs, to: ["s"])], sink: "s",
                clock: FixedClock(Self.noon), timeZones: SystemTimeZones(),
                logger: Logger(component: "t", sink: MemoryLogSink()))
            var out: [Record] = []
            for r in Self.shapes { _ = routes.process(try Record.read(line: CanonicalCodec.encodeLine(r)[...]), into: &out) }
            var byUUID: [String: Record] = [:]
            for r in out { byUUID[r.uuid] = r }
            return byUUID
        }
        let convert = try routed([try build("convert", "{distance: km, energy: kJ}")])
        #expect(convert["h1"]?.isChanged == false && convert["s1"]?.isChanged == false)
        #expect(convert["d1"]?.isChanged == true && convert["e1"]?.isChanged == true)
        #expect(convert["h1"]?.line == CanonicalCodec.encodeLine(Self.shapes[1]))
        let rename = try routed([try build("rename", "{devices: {someone-else: x}}")])
        #expect(rename.values.allSatisfy { !$0.isChanged })
        let renamed = try routed([try build("rename", "{types: {heart_rate: pulse}}")])
        #expect(renamed["h1"]?.isChanged == true && renamed["s1"]?.isChanged == false)
    }

    /// Through a route of each transform (and of the bench's three), records read from their
    /// journal lines are written as the lines the records they became encode to, and as records
    /// made of their fields go through the same route.
    @Test(arguments: transformFiles + ["bench"])
    func linesWrittenThroughEachRouteEqualAFullEncode(file: String) throws {
        let specs =
            file == "bench"
            ? [
                try build("filter", #"{types: [heart_rate, steps, "active_energy_*", "distance_*"]}"#),
                try build("convert", "{distance: km, energy: kJ}"), try build("tag", "{person: bench, household: home}")
            ]
            : [try Self.documentedExample(file)]
        let route = Route(name: "r", from: [Glob("*")], transforms: specs, to: ["s"])
        func routes() -> SinkRoutes {
            SinkRoutes(
                routes: [route], sink: "s", clock: FixedClock(Self.noon), timeZones: SystemTimeZones(),
                logger: Logger(component: "t", sink: MemoryLogSink()))
        }
        let fromLines = routes(), fromFields = routes()
        var out: [Record] = [], made: [Record] = []
        for r in Self.shapes {
            _ = fromLines.process(try Record.read(line: CanonicalCodec.encodeLine(r)[...]), into: &out)
            _ = fromFields.process(Record(r), into: &made)
        }
        fromLines.flush(into: &out)
        fromFields.flush(into: &made)
        #expect(out.count == made.count)
        for (r, m) in zip(out, made) {
            #expect(r.line == CanonicalCodec.encodeLine(r.canonical))
            #expect(r.line == m.line)
        }
        if ["Convert/ConvertTransform.swift", "Tag/TagTransform.swift", "Rename/RenameTransform.swift", "bench"].contains(file) {
            #expect(out.contains { $0.isChanged })
        }
    }
}

extension Transform {
    /// A record made of its fields through `process`, what it emits read whole (the tests' form).
    func process(_ record: CanonicalRecord, emit: (CanonicalRecord) -> Void) {
        process(Record(record)) { emit($0.canonical) }
    }

    func flush(emit: (CanonicalRecord) -> Void) {
        flush { (r: consuming Record) in emit(r.canonical) }
    }
}
