import CanonicalJSON
import FastJSON
import Foundation
@testable import Gateway
import HealthgateCore
@testable import HealthgateTesting
@testable import Pipeline
import Posix
@testable import SinkFile
import SinkKit
@testable import Sinks
import Synchronization
import Testing
import Transforms
import YAMLConfig

/// Journal → routes → sink drainer → file sink, in one process, with injected failures.
@Suite struct PipelineTests {
    let logs = MemoryLogSink()
    var logger: Logger { Logger(component: "test", sink: logs) }

    static func record(_ uuid: String, type: String = "steps", device: String = "phone-1") -> CanonicalRecord {
        CanonicalRecord(kind: "quantity", device: device, receiver: "r", uuid: uuid, type: type,
                        start: Timestamp(seconds: 1_791_961_260), end: Timestamp(seconds: 1_791_961_319),
                        value: .number(412), unit: "count")
    }

    func append(_ j: Journal, _ records: [CanonicalRecord]) throws {
        try j.append(payload: CanonicalCodec.encodeLines(records), count: records.count, time: Timestamp(seconds: 0))
    }

    /// A journal in `dir`/journal holding `records` records made by `record(n)`, `perEntry` to an
    /// entry (so that batches and cursors fall inside entries).
    static func journal(dir: String, records: Int, perEntry: Int, logger: Logger,
                        _ record: (Int) -> CanonicalRecord) throws -> Journal {
        let j = try Journal(directory: dir + "/journal", logger: logger)
        for e in 0..<(records / perEntry) {
            let rs = (0..<perEntry).map { record(e * perEntry + $0) }
            try j.append(payload: CanonicalCodec.encodeLines(rs), count: rs.count, time: Timestamp(seconds: 0))
        }
        return j
    }

    /// Starts `d`, waits (30 s at most) until its cursor is past the journal's `entries`
    /// entries, stops it, and expects that no commit found a `violation`.
    static func drainToEnd(_ d: SinkDrainer, entries: Int, violations: borrowing Mutex<[String]>) throws {
        try d.start()
        defer { d.stop() }
        #expect(ServeProcess.eventually(30) { (try? d.loadCursor()) == Cursor(seq: UInt64(entries + 1), skip: 0) },
                "the drainer did not get to the end")
        d.stop()
        #expect(violations.withLock { $0 }.isEmpty, "\(violations.withLock { $0 })")
    }

    @Test func theFileSinkWritesByTemplateAndResumesFromItsCursor() throws {
        let dir = ServeProcess.makeTempDir("pipe")
        let j = try Journal(directory: dir + "/journal", logger: logger)
        try append(j, [Self.record("a"), Self.record("b", device: "phone-2")])
        let logger = self.logger
        func drainer() -> SinkDrainer {
            let built = BuiltSink.testing(common: SinkCommonConfig(batch: BatchConfig(max_items: 100))) { _ in
                FileSink(name: "archive", pathTemplate: "out/{device}/{date}.ndjson", baseDir: dir, rotateBytes: 1 << 20,
                         logger: logger, clock: SystemClock())
            }
            return SinkDrainer(name: "archive", built: built,
                               routes: [Route(name: "all", from: [Glob("*")], transforms: [], to: ["archive"])],
                               journal: j, dataDir: dir, logger: logger)
        }
        var d = drainer()
        try d.start()
        #expect(ServeProcess.eventually { ServeProcess.ndjson(under: dir + "/out").count == 2 })
        #expect(FileManager.default.fileExists(atPath: dir + "/out/phone-1/2026-10-14.ndjson"))
        #expect(FileManager.default.fileExists(atPath: dir + "/out/phone-2/2026-10-14.ndjson"))
        d.stop()
        #expect(try d.loadCursor() == Cursor(seq: 2, skip: 0))
        // After a restart only new entries are written.
        try append(j, [Self.record("c")])
        d = drainer()
        try d.start()
        #expect(ServeProcess.eventually { ServeProcess.ndjson(under: dir + "/out").count == 3 })
        usleep(200_000)
        #expect(ServeProcess.ndjson(under: dir + "/out").map { $0["uuid"] as! String }.sorted() == ["a", "b", "c"])
        d.stop()
    }

    /// Two sinks read each journal entry decoded once: the second drainer copies what the first
    /// decoded (waiting for it when both reach an entry together), the last reader takes the
    /// entry out, and both sinks write the same lines. Once in step, once one after the other.
    @Test func twoSinksDecodeEachEntryOnce() throws {
        for together in [true, false] {
            let dir = ServeProcess.makeTempDir("shared")
            let j = try Journal(directory: dir + "/journal", logger: logger)
            for e in 0..<3 { try append(j, (0..<4).map { Self.record("e\(e)r\($0)") }) }
            let shared = j.decoded
            shared.setReaders(2)
            let logger = self.logger
            func drainer(_ name: String) -> SinkDrainer {
                let built = BuiltSink.testing(common: SinkCommonConfig(batch: BatchConfig(max_items: 100))) { _ in
                    FileSink(name: name, pathTemplate: "\(name).ndjson", baseDir: dir, rotateBytes: 1 << 20, logger: logger, clock: SystemClock())
                }
                return SinkDrainer(name: name, built: built, routes: [Route(name: "all", from: [Glob("*")], transforms: [], to: [name])],
                                   journal: j, dataDir: dir, logger: logger)
            }
            func lines(_ name: String) -> [String] {
                ((try? String(contentsOfFile: dir + "/\(name).ndjson", encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
            }
            let a = drainer("a"), b = drainer("b")
            try a.start()
            if together { try b.start() }
            #expect(ServeProcess.eventually { lines("a").count == 12 })
            if !together {
                #expect(shared.keptRecords == 12, "left for the other sink")
                try b.start()
            }
            #expect(ServeProcess.eventually { lines("b").count == 12 })
            a.stop()
            b.stop()
            #expect(shared.decodes.load(ordering: .relaxed) == 3, "together: \(together)")
            #expect(shared.reuses.load(ordering: .relaxed) == 3)
            #expect(shared.keptRecords == 0, "the last reader took each entry out")
            #expect(lines("a") == lines("b"))
            #expect(lines("a").first?.contains("\"uuid\":\"e0r0\"") == true)
        }
    }

    /// What ingest hands over with a request's entries (`Journal.append(records:)`) is taken by
    /// the drainers that decode whole records instead of parsing (a request over 1 MiB: two
    /// entries, each with its part; here a route through `drop`, which reads every field), the
    /// last of them takes each entry out, and every sink writes what it writes from parsed lines,
    /// byte for byte: the lines as they are, and the ones a route changed written anew. A sink
    /// that reads a few fields (by `{device}`, through `tag`) walks its lines for them and takes
    /// nothing — the records stay for the other until it comes — nor does one that only copies
    /// lines.
    @Test func recordsHandedOverByIngestAreTakenNotParsed() throws {
        func run(handOver: Bool) throws -> [String: String] {
            let dir = ServeProcess.makeTempDir("handed")
            let j = try Journal(directory: dir + "/journal", logger: logger)
            func built(_ path: String) throws -> BuiltSink {
                try FileSink.build(name: "x", node: parseYAML("{kind: file, path: \"\(path)\"}", file: "t", environment: [:]),
                                   path: "sinks.x", context: SinkBuildContext(dataDir: dir))
            }
            let tag = try #require(TransformRegistry.builder(named: "tag"))
            let drop = try #require(TransformRegistry.builder(named: "drop"))
            let sinks: [(name: String, built: BuiltSink, routes: [Route])] = [
                ("a", try built("out/a/{device}.ndjson"),
                 [Route(name: "all", from: [Glob("*")], transforms: [try drop(parseYAML("{fields: [source]}", file: "t", environment: [:]), "t")],
                        to: ["a"])]),
                ("b", try built("out/b/{device}.ndjson"),
                 [Route(name: "tagged", from: [Glob("*")], transforms: [try tag(parseYAML("{person: alice}", file: "t", environment: [:]), "t")],
                        to: ["b"])]),
                ("c", try built("out/c/all.ndjson"), [Route(name: "all", from: [Glob("*")], transforms: [], to: ["c"])]),
            ]
            #expect(sinks.map { SinkDrainer.takesHandedRecords($0.built, routes: $0.routes) } == [true, false, false])
            j.decoded.setParsingReaders(handOver ? 1 : 0)
            #expect(j.decoded.recordsWanted == (handOver ? 16_000 : 0))
            for n in [3, 5000] {
                var batch = ReceivedBatch(keepingUpTo: j.decoded.recordsWanted)
                for i in 0..<n {
                    batch.append(PipelineTests.record("request-\(n)-record-\(i)-" + String(repeating: "x", count: 100),
                                                      device: "phone-\(i % 2)"))
                }
                let parts = Journal.parts(of: batch.payload, count: batch.count)
                #expect(parts.count == (n == 5000 ? 2 : 1))
                let cut = batch.cuts.parts(total: batch.payload.count)
                #expect(cut.map(\.range) == parts.map(\.range) && cut.map(\.count) == parts.map(\.count),
                        "the batch cuts its lines as the journal does")
                try j.append(payload: batch.payload, parts: parts, time: Timestamp(seconds: 0),
                             records: batch.keepsRecords ? batch.takeRecords() : nil)
            }
            #expect(j.decoded.handedRecordsKept == (handOver ? 5003 : 0))
            let drainers = sinks.map { SinkDrainer(name: $0.name, built: $0.built, routes: $0.routes, journal: j, dataDir: dir, logger: logger) }
            // The two that do not decode whole records first, to the end: they take nothing.
            for d in drainers.dropFirst() { try d.start() }
            #expect(ServeProcess.eventually(30) { drainers.dropFirst().allSatisfy { (try? $0.loadCursor()) == Cursor(seq: 4, skip: 0) } })
            #expect(j.decoded.handedTaken.load(ordering: .relaxed) == 0)
            #expect(j.decoded.handedRecordsKept == (handOver ? 5003 : 0))
            try drainers[0].start()
            #expect(ServeProcess.eventually(30) { (try? drainers[0].loadCursor()) == Cursor(seq: 4, skip: 0) })
            for d in drainers { d.stop() }
            #expect(j.decoded.handedTaken.load(ordering: .relaxed) == (handOver ? 3 : 0), "three entries, one drainer that decodes whole records")
            #expect(j.decoded.handedRecordsKept == 0, "the last drainer took each entry out")
            var files: [String: String] = [:]
            for sink in ["a", "b", "c"] {
                for name in (try? FileManager.default.contentsOfDirectory(atPath: dir + "/out/" + sink)) ?? [] {
                    files[sink + "/" + name] = try String(contentsOfFile: dir + "/out/\(sink)/\(name)", encoding: .utf8)
                }
            }
            return files
        }
        let handed = try run(handOver: true), parsed = try run(handOver: false)
        #expect(handed.keys.sorted() == ["a/phone-0.ndjson", "a/phone-1.ndjson", "b/phone-0.ndjson", "b/phone-1.ndjson", "c/all.ndjson"])
        #expect(handed["c/all.ndjson"]?.split(separator: "\n").count == 5003)
        #expect(handed["b/phone-1.ndjson"]?.contains("\"tags\":{\"person\":\"alice\"}") == true)
        #expect(handed == parsed, "what the sinks wrote depends on whether the records were handed over")
    }

    /// Records handed over are bounded: past the bound, entries some drainer already took go
    /// first (they wait for a sink that lags); else the new ones are not kept, and ingest is told
    /// not to keep more until the drainers make room.
    @Test func recordsHandedOverAreBounded() {
        let d = DecodedEntries(maxHanded: 10)
        #expect(d.recordsWanted == 0, "no drainer parses")
        d.setParsingReaders(2)
        #expect(d.recordsWanted == 10)
        func part(_ n: Int) -> [KeptPart] {
            var p = KeptPart(start: 0)
            p.records = (0..<n).map { PipelineTests.record("r\($0)") }
            p.ranges = (0..<n).map { $0 * 10..<($0 + 1) * 10 }
            return [p]
        }
        d.handOver(part(4), lastSeq: 1)
        d.handOver(part(4), lastSeq: 2)
        #expect(d.handedRecordsKept == 8 && d.recordsWanted == 2)
        d.handOver(part(4), lastSeq: 3)
        #expect(d.handedRecordsKept == 8, "no room, and every entry still waits for both drainers")
        #expect(d.takeHanded(3) == nil)
        #expect(d.takeHanded(1)?.owned == false, "the other drainer still has to take it")
        d.handOver(part(4), lastSeq: 4)
        #expect(d.handedRecordsKept == 8, "entry 1, which one drainer took, made room for entry 4")
        #expect(d.takeHanded(1) == nil)
        #expect(d.takeHanded(4)?.entry.records.count == 4)
        #expect(d.takeHanded(4)?.owned == true, "the second drainer takes it out")
        d.handOver(part(2), lastSeq: 5)
        #expect(d.handedRecordsKept == 6)
        d.handOver(part(4), lastSeq: 6)
        #expect(d.handedRecordsKept == 10 && d.recordsWanted == 0, "full: ingest keeps no records")
        // One nobody took, past the age, goes to make room (a drainer that skipped it never will).
        d.handOver(part(4), lastSeq: 7, now: monotonicSeconds() + 61)
        #expect(d.takeHanded(7)?.entry.records.count == 4, "entry 2, taken by no drainer but old, made room")
        #expect(d.takeHanded(2) == nil && d.takeHanded(5) != nil)
        // Another count of drainers: what was handed over for the old one is let go.
        d.setParsingReaders(1)
        #expect(d.handedRecordsKept == 0 && d.recordsWanted == 10)
        d.setParsingReaders(0)
        #expect(d.handedRecordsKept == 0 && d.recordsWanted == 0)
        // A request with more records than it may keep keeps none (not its first ones).
        for n in [3, 4] {
            var batch = ReceivedBatch(keepingUpTo: 3)
            for i in 0..<n { batch.append(PipelineTests.record("u\(i)")) }
            #expect(batch.keepsRecords == (n == 3) && batch.kept.reduce(0) { $0 + $1.records.count } == (n == 3 ? 3 : 0))
            #expect(batch.count == n)
        }
        // What requests keep while their entries are written counts too (`reserve`): every HTTP
        // thread's request was told the same room, and together they held past the bound.
        d.setParsingReaders(2)
        #expect(d.reserve(6) && d.recordsWanted == 4)
        #expect(!d.reserve(5), "6 reserved and 5 more would pass 10")
        #expect(d.reserve(4) && d.recordsWanted == 0)
        d.handOver(part(6), lastSeq: 8, reserved: true)
        #expect(d.handedRecordsKept == 6, "a reservation's own records fit: others' 4 and these 6")
        #expect(d.recordsWanted == 0, "4 still reserved, 6 held")
        d.release(4)
        #expect(d.recordsWanted == 4)
        #expect(d.takeHanded(8)?.owned == false)
        #expect(d.reserve(10) && d.handedRecordsKept == 0, "entry 8, taken by one drainer, went to make room")
        d.release(10)
        d.setParsingReaders(0)
        #expect(!d.reserve(1), "no drainer parses")
    }

    /// A request whose entries are not written (the journal closed, a failed write) gives back
    /// the room it reserved for its records: else each such request shrank the bound for good.
    @Test func recordsOfEntriesNotWrittenGiveTheirRoomBack() throws {
        let dir = ServeProcess.makeTempDir("pipe")
        let j = try Journal(directory: dir + "/journal", logger: logger)
        j.decoded.setParsingReaders(1)
        var batch = ReceivedBatch(keepingUpTo: j.decoded.recordsWanted)
        for i in 0..<3 { batch.append(PipelineTests.record("r\(i)")) }
        #expect(batch.keepsRecords)
        j.close()
        #expect(throws: JournalError.self) {
            try j.append(payload: batch.payload, parts: batch.cuts.parts(total: batch.payload.count), time: Timestamp(seconds: 0),
                         records: batch.takeRecords())
        }
        #expect(j.decoded.recordsWanted == 16_000 && j.decoded.handedRecordsKept == 0)
    }

    @Test func routesFilterByTypeGlobsPerSink() throws {
        let dir = ServeProcess.makeTempDir("pipe")
        let j = try Journal(directory: dir + "/journal", logger: logger)
        try append(j, [Self.record("1", type: "steps"), Self.record("2", type: "body_mass"),
                       Self.record("3", type: "heart_rate"), Self.record("4", type: "body_fat_percentage")])
        let logger = self.logger
        let built = BuiltSink.testing { _ in
            FileSink(name: "s", pathTemplate: "out.ndjson", baseDir: dir, rotateBytes: 1 << 20, logger: logger, clock: SystemClock())
        }
        let route = Route(name: "bodies", from: [Glob("r")],
                          transforms: [FilterTransform(types: ["body_*", "steps"], excludeTypes: ["body_fat_*"])],
                          to: ["s"])
        let d = SinkDrainer(name: "s", built: built,
                            routes: [route], journal: j, dataDir: dir, logger: logger)
        try d.start()
        #expect(ServeProcess.eventually { ServeProcess.ndjson(under: dir).count == 2 })
        usleep(100_000)
        #expect(ServeProcess.ndjson(under: dir).map { $0["uuid"] as! String } == ["1", "2"])
        #expect(ServeProcess.eventually { d.metrics.filtered.load(ordering: .relaxed) == 2 })
        d.stop()
    }

    /// A sink that reads the journal's lines itself (the InfluxDB sink) rejects a line that is no
    /// canonical record: its dead letter holds the line as text, so that the file stays JSON.
    @Test func aRejectedLineThatIsNoRecordIsKeptAsText() throws {
        let dir = ServeProcess.makeTempDir("dead")
        let dead = DeadLetters(sink: "s", dataDir: dir, metrics: SinkMetrics(name: "s"), logger: logger, clock: SystemClock())
        #expect(dead.keep(.empty, line: .whole(Array("{\"op\":\"upsert\",\"kind\":1\n".utf8)[...]), reason: "not a record"))
        #expect(dead.keep(Self.record("ok"), line: .whole((CanonicalCodec.encodeLine(Self.record("ok")) + [0x0A])[...]), reason: "refused"))
        let lines = try String(contentsOfFile: dead.path, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 2)
        let parser = JSONParser()
        let first = try parser.parse(Array(lines[0].utf8))
        #expect(first.root["line"]?.string == "{\"op\":\"upsert\",\"kind\":1" && first.root["record"] == nil)
        let second = try parser.parse(Array(lines[1].utf8))
        #expect(second.root["record"]?["uuid"]?.string == "ok" && second.root["reason"]?.string == "refused")
    }

    @Test func aFailingSinkIsRetriedAndRejectedRecordsBecomeDeadLetters() throws {
        let dir = ServeProcess.makeTempDir("pipe")
        let j = try Journal(directory: dir + "/journal", logger: logger)
        try append(j, [Self.record("ok"), Self.record("poison"), Self.record("ok2")])
        let sink = ScriptedSink()
        let d = SinkDrainer(name: "scripted",
                            built: .testing(sink, common: SinkCommonConfig(retry: RetryConfig(initial: ConfigDurationFor.ms(10), max: ConfigDurationFor.ms(20)))),
                            routes: [Route(name: "all", from: [Glob("*")], transforms: [], to: ["scripted"])],
                            journal: j, dataDir: dir, logger: logger)
        try d.start()
        #expect(ServeProcess.eventually { sink.delivered.sorted() == ["ok", "ok2"] })
        // (Counted when write returns, a moment after the sink took the records.)
        #expect(ServeProcess.eventually { d.metrics.rejected.load(ordering: .relaxed) == 1 })
        #expect(d.metrics.kept.load(ordering: .relaxed) >= 2)
        let dead = try String(contentsOfFile: dir + "/sinks/scripted/dead-letters.ndjson", encoding: .utf8)
        #expect(dead.contains("\"uuid\":\"poison\""))
        #expect(dead.contains("the destination said no"))
        d.stop()
    }

    /// A batch whose every record the destination refuses used to log one line per record
    /// (10,000–40,000 lines from one poisoned request): a batch's dead letters are one write and
    /// one line, with how many and the first reason.
    @Test func aBatchOfRejectedRecordsIsOneLogLine() throws {
        let dir = ServeProcess.makeTempDir("pipe")
        let j = try Journal(directory: dir + "/journal", logger: logger)
        try append(j, (0..<2_000).map { _ in Self.record("poison") } + [Self.record("ok")])
        let sink = ScriptedSink()
        let logs = MemoryLogSink()
        let d = SinkDrainer(name: "scripted",
                            built: .testing(sink, common: SinkCommonConfig(retry: RetryConfig(initial: ConfigDurationFor.ms(10), max: ConfigDurationFor.ms(20)))),
                            routes: [Route(name: "all", from: [Glob("*")], transforms: [], to: ["scripted"])],
                            journal: j, dataDir: dir, logger: Logger(component: "t", sink: logs))
        try d.start()
        defer { d.stop() }
        // The good record may go out after the last rejection is counted (another part of the
        // halved batch); under a sanitizer the halving takes a while.
        #expect(ServeProcess.eventually(90) { d.metrics.rejected.load(ordering: .relaxed) == 2_000 && sink.delivered == ["ok"] },
                "\(d.metrics.rejected.load(ordering: .relaxed)) rejected, \(sink.delivered) delivered")
        let dead = try String(contentsOfFile: dir + "/sinks/scripted/dead-letters.ndjson", encoding: .utf8)
        #expect(dead.split(separator: "\n").count == 2_000)
        let said = logs.all.filter { $0.message.contains("rejected") }
        #expect(!said.isEmpty && said.count <= 5, "\(said.count) lines")
        #expect(said.contains { $0.message.contains("records were rejected") && $0.message.contains("the destination said no") },
                "\(said.map(\.message))")
    }

    /// Dead letters had no budget: a phone's poisoned requests could fill the disk with them.
    /// Past `dead_letters.max_bytes` a rejected record is kept as its keys and reason, and past
    /// another eighth only counted; each is said in the log and counted.
    @Test func deadLettersKeepToTheirBudget() throws {
        let dir = ServeProcess.makeTempDir("pipe")
        let j = try Journal(directory: dir + "/journal", logger: logger)
        try append(j, (0..<200).map { _ in Self.record("poison") })
        let sink = ScriptedSink()
        let logs = MemoryLogSink()
        let d = SinkDrainer(name: "scripted",
                            built: .testing(sink, common: SinkCommonConfig(retry: RetryConfig(initial: ConfigDurationFor.ms(10), max: ConfigDurationFor.ms(20)))),
                            routes: [Route(name: "all", from: [Glob("*")], transforms: [], to: ["scripted"])],
                            journal: j, dataDir: dir, logger: Logger(component: "t", sink: logs), deadLetterBytes: 8192)
        try d.start()
        defer { d.stop() }
        let m = d.metrics
        #expect(ServeProcess.eventually {
            m.rejected.load(ordering: .relaxed) + m.deadLettersNotKept.load(ordering: .relaxed) == 200
        })
        let path = dir + "/sinks/scripted/dead-letters.ndjson"
        let size = try #require(FileIO.fileSize(path))
        #expect(size <= 8192 + 1024 + 600, "\(size) bytes")
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
        let whole = lines.filter { $0.contains("\"record\":") }.count
        let keys = lines.filter { $0.contains("\"record_left_out\":\"over dead_letters.max_bytes\"") && $0.contains("\"uuid\":\"poison\"") }.count
        #expect(whole > 0 && keys > 0, "\(whole) whole, \(keys) keys")
        #expect(keys == m.deadLettersKeysOnly.load(ordering: .relaxed))
        #expect(whole + keys + m.deadLettersNotKept.load(ordering: .relaxed) == 200)
        #expect(m.deadLettersNotKept.load(ordering: .relaxed) > 0)
        #expect(logs.all.contains { $0.message.contains("kept as their keys only") })
        #expect(logs.all.contains { $0.message.contains("not kept") && $0.message.contains("dead_letters.max_bytes") })
    }

    @Test func pathTemplatesCannotEscapeTheirDirectory() {
        let t = PathTemplate("/data/archive/{device}/{date}.ndjson")
        var r = Self.record("x", device: "../../etc/passwd")
        #expect(t.render(r, fallbackDate: "2026-01-01") == "/data/archive/%2E.%2F..%2Fetc%2Fpasswd/2026-10-14.ndjson")
        r.start = nil
        r.device = ""
        #expect(t.render(r, fallbackDate: "2026-01-01") == "/data/archive/%-/2026-01-01.ndjson")
    }

    /// Distinct values are distinct files: `a/b`, `a_b` and `a\b` used to share one, and a
    /// device `x.1` wrote into device `x`'s rotated file.
    @Test func distinctValuesNeverShareAFile() {
        let values = ["a/b", "a_b", "a\\b", "a%2Fb", "", "_", "%-", "x", "x.1", "x%2E1", "~", ".x", "%2Ex", "a\u{7F}",
                      String(repeating: "y", count: 300), String(repeating: "y", count: 299) + "z", "Anna's iPhone"]
        let names = values.map(PathTemplate.safe)
        #expect(Set(names).count == values.count, "\(names)")
        for n in names {
            #expect(!n.contains("/") && !n.hasPrefix(".") && n.utf8.count <= 220 && !n.unicodeScalars.contains { $0.value < 0x20 })
        }
        #expect(PathTemplate.safe("d_zsOZnTQUz_juWFVljuOOBQ") == "d_zsOZnTQUz_juWFVljuOOBQ")
        #expect(PathTemplate.safe("Anna's iPhone") == "Anna's iPhone")
    }

    /// The archive's synced pages are let go (`FileIO.releaseCache`): a sink writing a year of
    /// history fills the disk, not the page cache (mincore over the file's mapping).
    @Test func theFileSinkLeavesNoArchivePagesCached() throws {
        // Under the package's .build, not TMPDIR: a tmpfs keeps its pages (they are the file).
        let dir = FileManager.default.currentDirectoryPath + "/.build/uncached-\(getpid())"
        _ = try FileIO.makeDirectories(dir)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let sink = FileSink(name: "s", pathTemplate: "x.ndjson", baseDir: dir, rotateBytes: 1 << 30, logger: logger, clock: SystemClock())
        #expect(sink.write(SinkBatch(records: (0..<2_000).map { Self.record("u\($0)") })) == .accepted)
        #expect(sink.write(SinkBatch(records: (0..<2_000).map { Self.record("v\($0)") })) == .accepted)
        let cache = try #require(FileIO.cachedPages(dir + "/x.ndjson"))
        #expect(cache.pages > 64)
        // The last page may stay (a partial page written again by the next batch is let go then).
        #expect(cache.cached <= 1, "\(cache.cached) of the archive's \(cache.pages) pages still cached")
        #expect(ServeProcess.ndjson(under: dir).count == 4_000)
        sink.close()
    }

    @Test func theFileSinkRotatesBySize() throws {
        let dir = ServeProcess.makeTempDir("rotate")
        let sink = FileSink(name: "s", pathTemplate: "x.ndjson", baseDir: dir, rotateBytes: 600, logger: logger, clock: SystemClock())
        for i in 0..<10 { #expect(sink.write(SinkBatch(records: [Self.record("r\(i)"), Self.record("q\(i)")])) == .accepted) }
        let files = try FileIO.list(dir)
        #expect(files.count > 2)
        #expect(files.contains("x.1.ndjson"))
        #expect(ServeProcess.ndjson(under: dir).count == 20)
        sink.close()
    }
}

/// Fails twice, then rejects "poison" and accepts the rest.
final class ScriptedSink: Sink, Named, @unchecked Sendable {
    let name = "scripted"
    private let lock = NSLock()
    private var calls = 0
    private var accepted: [String] = []

    var delivered: [String] {
        lock.lock()
        defer { lock.unlock() }
        return accepted
    }

    func write(_ batch: SinkBatch) -> SinkWriteResult {
        let records = batch.records
        lock.lock()
        defer { lock.unlock() }
        calls += 1
        if calls <= 2 { return .keep(reason: "connection refused", retryAfterSeconds: nil) }
        return .perRecord(records.map { r in
            if r.uuid == "poison" { return .rejected(reason: "the destination said no") }
            accepted.append(r.uuid)
            return .accepted
        })
    }

    func close() {}
}

enum ConfigDurationFor {
    static func ms(_ n: Int64) -> ConfigDuration { ConfigDuration(nanoseconds: n * 1_000_000) }
}

/// Faults in the queue machinery found in review, each with the test that would have caught it.
@Suite struct DrainerFaultTests {
    let logger = Logger(component: "test", sink: MemoryLogSink())

    func append(_ j: Journal, _ records: [CanonicalRecord]) throws {
        try j.append(payload: CanonicalCodec.encodeLines(records), count: records.count, time: Timestamp(seconds: 0))
    }

    func drainer(_ sink: some Sink & Sendable & Named, _ j: Journal, dir: String, routes: Int = 1, maxItems: Int = 1000) -> SinkDrainer {
        let rs = (0..<routes).map { Route(name: "r\($0)", from: [Glob("*")], transforms: [], to: [sink.name]) }
        let common = SinkCommonConfig(batch: BatchConfig(max_items: maxItems),
                                      retry: RetryConfig(initial: ConfigDurationFor.ms(5), max: ConfigDurationFor.ms(10)))
        return SinkDrainer(name: sink.name, built: .testing(sink, common: common), routes: rs,
                           journal: j, dataDir: dir, logger: logger)
    }

    /// Two routes deliver each record twice; a batch that ends between the two copies must not
    /// move the cursor past the second.
    @Test func aBatchEndingBetweenTwoCopiesKeepsTheSecond() throws {
        let dir = ServeProcess.makeTempDir("pipe")
        let j = try Journal(directory: dir + "/journal", logger: logger)
        try append(j, [PipelineTests.record("a"), PipelineTests.record("b")])
        let sink = GateSink(acceptFirst: 3)
        let d = drainer(sink, j, dir: dir, routes: 2, maxItems: 3)
        try d.start()
        #expect(ServeProcess.eventually { sink.calls >= 2 })
        d.stop()
        // Delivered: a, a, b (first copy), in a write of max_items. Still owed: b's second
        // copy, so the cursor has not passed b.
        #expect(sink.accepted == ["a", "a", "b"])
        let c = try d.loadCursor()
        #expect(c.seq == 1 && c.skip <= 1)
    }

    @Test func aCursorAheadOfTheJournalStartsOver() throws {
        let dir = ServeProcess.makeTempDir("pipe")
        let j = try Journal(directory: dir + "/journal", logger: logger)
        try append(j, [PipelineTests.record("a")])
        try FileIO.makeDirectories(dir + "/sinks/gate")
        try FileIO.writeAtomically(dir + "/sinks/gate/cursor", Array("5000 0\n".utf8))
        let sink = GateSink(acceptFirst: 100)
        let d = drainer(sink, j, dir: dir)
        try d.start()
        #expect(ServeProcess.eventually { sink.accepted == ["a"] })
        d.stop()
    }

    /// A rejected record whose dead letter cannot be written is tried again, not dropped.
    @Test func aDeadLetterThatCannotBeWrittenKeepsTheRecord() throws {
        let dir = ServeProcess.makeTempDir("pipe")
        let j = try Journal(directory: dir + "/journal", logger: logger)
        try append(j, [PipelineTests.record("poison")])
        // A directory where the dead-letter file should be: appending to it fails.
        try FileIO.makeDirectories(dir + "/sinks/scripted/dead-letters.ndjson")
        let sink = ScriptedSink()
        let d = drainer(sink, j, dir: dir)
        try d.start()
        #expect(ServeProcess.eventually { d.metrics.kept.load(ordering: .relaxed) >= 4 })
        #expect(d.metrics.rejected.load(ordering: .relaxed) == 0)
        // Once the dead letters can be written, the record lands there.
        try FileManager.default.removeItem(atPath: dir + "/sinks/scripted/dead-letters.ndjson")
        #expect(ServeProcess.eventually { d.metrics.rejected.load(ordering: .relaxed) == 1 })
        d.stop()
        #expect(try String(contentsOfFile: dir + "/sinks/scripted/dead-letters.ndjson", encoding: .utf8).contains("poison"))
    }

    /// The same under a sink with batches in flight: the batch whose rejected record cannot be
    /// dead-lettered is written again, and the sink's `write` is never called while a batch it
    /// began is still out (it was: a batch whose first answer only rejected was settled with the
    /// next one in flight, then written again beside it). The batches after it are written again
    /// after it, in order, and every record lands once the dead letters can be written.
    @Test func aDeadLetterThatCannotBeWrittenUnderBatchesInFlight() throws {
        let dir = ServeProcess.makeTempDir("pipe")
        let j = try Journal(directory: dir + "/journal", logger: logger)
        for e in 0..<10 {
            try append(j, (0..<10).map { k in PipelineTests.record(e == 2 && k == 4 ? "poison" : "r\(e * 10 + k)") })
        }
        try FileIO.makeDirectories(dir + "/sinks/inflight/dead-letters.ndjson")
        let sink = InFlightSink()
        let d = drainer(sink, j, dir: dir, maxItems: 10)
        try d.start()
        #expect(ServeProcess.eventually { d.metrics.kept.load(ordering: .relaxed) >= 3 })
        #expect(d.metrics.rejected.load(ordering: .relaxed) == 0)
        try FileManager.default.removeItem(atPath: dir + "/sinks/inflight/dead-letters.ndjson")
        #expect(ServeProcess.eventually { (try? d.loadCursor()) == Cursor(seq: 11, skip: 0) })
        d.stop()
        #expect(sink.violations.isEmpty, "\(sink.violations)")
        #expect(d.metrics.rejected.load(ordering: .relaxed) == 1)
        #expect(Set(sink.accepted) == Set((0..<100).filter { $0 != 24 }.map { "r\($0)" }))
        // The poison's last try (alone: the rest of its batch was taken) came before the batch
        // after it was taken for the last time.
        let w = sink.lastWrites
        #expect((w.lastIndex(of: "poison") ?? .max) < (w.lastIndex(of: "r39") ?? -1), "\(w)")
        #expect(try String(contentsOfFile: dir + "/sinks/inflight/dead-letters.ndjson", encoding: .utf8).contains("poison"))
    }

    /// A sink that reads no field, behind one route that passes records as they are, gets the
    /// journal's lines alone (no record beside each: the drainer makes none), each whole and as
    /// the journal holds it, from a cursor inside an entry, in batches that end inside entries,
    /// with batches in flight; a line it rejects goes to the dead letters as its record. The
    /// same sink reading a field gets records beside its lines, and the same outcome.
    @Test func aSinkThatReadsNoFieldGetsTheJournalsLinesAlone() throws {
        for reads in [CanonicalRecord.Fields(), CanonicalRecord.Fields(.uuid)] {
            let dir = ServeProcess.makeTempDir("pipe")
            let j = try Journal(directory: dir + "/journal", logger: logger)
            var journaled: [String: [UInt8]] = [:]
            for e in 0..<10 {
                let records = (0..<10).map { k in PipelineTests.record(e == 2 && k == 4 ? "poison" : "r\(e * 10 + k)") }
                for r in records { journaled[r.uuid] = CanonicalCodec.encodeLines([r]) }
                try append(j, records)
            }
            // Started inside the first entry: its first three records were delivered before.
            try FileIO.makeDirectories(dir + "/sinks/inflight")
            try FileIO.writeAtomically(dir + "/sinks/inflight/cursor", Array("1 3\n".utf8))
            let sink = InFlightSink(readsLines: true)
            let common = SinkCommonConfig(batch: BatchConfig(max_items: 7),
                                          retry: RetryConfig(initial: ConfigDurationFor.ms(5), max: ConfigDurationFor.ms(10)))
            let built = BuiltSink(kind: "test", common: common, summary: "test sink", reads: reads) { _ in sink }
            let d = SinkDrainer(name: sink.name, built: built,
                                routes: [Route(name: "all", from: [Glob("*")], transforms: [], to: [sink.name])],
                                journal: j, dataDir: dir, logger: logger)
            try d.start()
            #expect(ServeProcess.eventually { (try? d.loadCursor()) == Cursor(seq: 11, skip: 0) })
            d.stop()
            let expected = (3..<100).filter { $0 != 24 }.map { "r\($0)" }
            // In order; the batch in flight behind the one with a rejected record is written again.
            var seen = Set<String>()
            #expect(sink.accepted.filter { seen.insert($0).inserted } == expected, "reads \(reads.rawValue)")
            #expect(sink.accepted.count <= expected.count + 7)
            #expect(sink.batchesWithRecords == (reads.rawValue == 0 ? 0 : sink.batches), "reads \(reads.rawValue)")
            #expect(sink.batches >= 14)
            // Each line as the journal holds it (its line feed included).
            #expect(sink.lines.allSatisfy { journaled[$0.uuid] == $0.bytes }, "reads \(reads.rawValue)")
            let dead = try String(contentsOfFile: dir + "/sinks/inflight/dead-letters.ndjson", encoding: .utf8)
            #expect(dead.split(separator: "\n").count == 1 && dead.contains(#""record":{"op":"upsert""#) && dead.contains("poison"))
        }
    }

    /// A pipelined sink whose read-ahead decodes on across batches, with `replay --sink`
    /// records arriving in its inbox while it drains: the inbox goes out with nothing in flight
    /// (the read-ahead joined first: it and the inbox share the parser), and every record of
    /// both lands once the cursors are at their ends.
    @Test func theInboxGoesOutBetweenPipelinedBatches() throws {
        let dir = ServeProcess.makeTempDir("pipe")
        let j = try Journal(directory: dir + "/journal", logger: logger)
        let inbox = try Journal(directory: dir + "/inbox", logger: logger)
        for e in 0..<60 { try append(j, (0..<10).map { PipelineTests.record("r\(e * 10 + $0)") }) }
        let sink = InFlightSink()
        let common = SinkCommonConfig(batch: BatchConfig(max_items: 10),
                                      retry: RetryConfig(initial: ConfigDurationFor.ms(5), max: ConfigDurationFor.ms(10)))
        let d = SinkDrainer(name: sink.name, built: .testing(sink, common: common),
                            routes: [Route(name: "all", from: [Glob("*")], transforms: [], to: [sink.name])],
                            journal: j, inbox: inbox, dataDir: dir, logger: logger)
        try d.start()
        for e in 0..<4 {
            try append(inbox, (0..<5).map { PipelineTests.record("i\(e * 5 + $0)") })
            usleep(2_000)
        }
        #expect(ServeProcess.eventually { (try? d.loadCursor()) == Cursor(seq: 61, skip: 0) && Set(sink.accepted).count == 620 })
        d.stop()
        #expect(sink.violations.isEmpty, "\(sink.violations)")
        #expect(Set(sink.accepted) == Set((0..<600).map { "r\($0)" } + (0..<20).map { "i\($0)" }))
    }

    /// What `replay --sink` handed over goes out entry after entry, not one entry per idle wait
    /// of the journal (half a second each: 1,000,000 records beside serve took minutes, the
    /// sink idle between entries). Forty entries with the journal empty are out in far less
    /// than the twenty seconds those waits would take.
    @Test func inboxEntriesGoOutWithoutWaitingOnTheJournal() throws {
        let dir = ServeProcess.makeTempDir("inbox")
        let j = try Journal(directory: dir + "/journal", logger: logger)
        let inbox = try Journal(directory: dir + "/inbox", logger: logger)
        for e in 0..<40 { try append(inbox, (0..<10).map { PipelineTests.record("i\(e * 10 + $0)") }) }
        let sink = InFlightSink()
        let d = SinkDrainer(name: sink.name, built: .testing(sink, common: SinkCommonConfig(batch: BatchConfig(max_items: 10))),
                            routes: [Route(name: "all", from: [Glob("*")], transforms: [], to: [sink.name])],
                            journal: j, inbox: inbox, dataDir: dir, logger: logger)
        try d.start()
        #expect(ServeProcess.eventually(5) { Set(sink.accepted).count == 400 }, "\(Set(sink.accepted).count) of 400 in 5 s")
        d.stop()
    }

    /// A file sink reads of each record only what names its files (none for a fixed path), and
    /// writes the journal's lines as they are; a record it refuses is kept in the dead letters
    /// whole, read again from its line, and the log names it. A transform on its route, or a
    /// route from some receivers only, makes the drainer read what those need.
    @Test func aSinkThatReadsFewFieldsWritesTheJournalLinesAndKeepsRefusedOnesWhole() throws {
        let dir = ServeProcess.makeTempDir("few")
        try FileIO.makeDirectories(dir + "/out")
        try FileIO.writeAtomically(dir + "/out/blocked", Array("x".utf8))   // ENOTDIR for device "blocked", forever
        let j = try Journal(directory: dir + "/journal", logger: logger)
        var records = (0..<6).map { i in
            var r = CanonicalCodecTests.full
            r.uuid = "u\(i)"
            r.device = i == 3 ? "blocked" : "phone-\(i % 2)"
            return r
        }
        records.append(PipelineTests.record("plain"))
        let payload = CanonicalCodec.encodeLines(records)
        try j.append(payload: payload, count: records.count, time: Timestamp(seconds: 0))
        let logs = MemoryLogSink()
        let logger = Logger(component: "test", sink: logs)
        let all = Route(name: "all", from: [Glob("*")], transforms: [], to: ["a", "b"])
        func built(_ path: String) throws -> BuiltSink {
            try FileSink.build(name: "x", node: parseYAML("{kind: file, path: \"\(path)\"}", file: "t", environment: [:]),
                               path: "sinks.x", context: SinkBuildContext(dataDir: dir))
        }
        let byDevice = try built("out/{device}/{date}.ndjson"), fixed = try built("fixed.ndjson")
        #expect(byDevice.reads.rawValue == CanonicalRecord.Fields(.device, .start).rawValue && fixed.reads.rawValue == 0)
        #expect(!SinkDrainer.readsWholeRecords(byDevice, routes: [all]) && !SinkDrainer.readsWholeRecords(fixed, routes: [all]))
        let filter = try #require(TransformRegistry.builder(named: "filter"))
        let filtered = Route(name: "f", from: [Glob("*")], transforms: [try filter(parseYAML("{types: [steps]}", file: "t", environment: [:]), "f")],
                             to: ["a"])
        #expect(!SinkDrainer.readsWholeRecords(byDevice, routes: [all, filtered]))
        func route(_ kind: String, _ yaml: String) throws -> Route {
            let build = try #require(TransformRegistry.builder(named: kind))
            return Route(name: kind, from: [Glob("*")], transforms: [try build(parseYAML(yaml, file: "t", environment: [:]), kind)], to: ["a"])
        }
        // What a transform reads is read (a filter: what its rules look at), and what a route
        // changes (written anew from the record); all of it for a transform with state.
        let filterReads = SinkRoutes.fieldsRead(routes: [filtered], sinkReads: fixed.reads)
        #expect(filterReads.rawValue == CanonicalRecord.Fields(.op, .type).rawValue)
        let byValue = try route("filter", "{values: {heart_rate: {min: 25}}, sources: [com.apple.*]}")
        #expect(SinkRoutes.fieldsRead(routes: [byValue], sinkReads: fixed.reads).rawValue
                == CanonicalRecord.Fields(.op, .type, .value, .source).rawValue)
        let tagReads = SinkRoutes.fieldsRead(routes: [try route("tag", "{person: a}")], sinkReads: fixed.reads)
        #expect(tagReads.rawValue == CanonicalRecord.Fields(.tags).rawValue)
        let renameReads = SinkRoutes.fieldsRead(routes: [try route("rename", "{types: {steps: walking}}")], sinkReads: byDevice.reads)
        #expect(renameReads.rawValue == CanonicalRecord.Fields(.type, .device, .start).rawValue)
        #expect(SinkDrainer.readsWholeRecords(fixed, routes: [try route("dedupe", "{ttl: 1d}")]))
        #expect(SinkRoutes.fieldsRead(routes: [Route(name: "s", from: [Glob("phone*")], transforms: [], to: ["b"])],
                                      sinkReads: fixed.reads).rawValue == CanonicalRecord.Fields(.receiver).rawValue)
        let a = SinkDrainer(name: "a", built: byDevice, routes: [all], journal: j, dataDir: dir, logger: logger)
        let b = SinkDrainer(name: "b", built: fixed, routes: [all], journal: j, dataDir: dir, logger: logger)
        try a.start()
        try b.start()
        defer { a.stop(); b.stop() }
        #expect(ServeProcess.eventually { (try? a.loadCursor()) == Cursor(seq: 2, skip: 0) && (try? b.loadCursor()) == Cursor(seq: 2, skip: 0) })
        let lines = String(decoding: payload, as: UTF8.self).split(separator: "\n").map(String.init)
        func file(_ path: String) -> [String] {
            ((try? String(contentsOfFile: dir + "/" + path, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        }
        #expect(file("fixed.ndjson") == lines)
        let day = Timestamp(seconds: 1_791_954_000).utcDate()
        #expect(file("out/phone-0/\(day).ndjson") == [lines[0], lines[2], lines[4]])
        #expect(day == "2026-10-14")
        #expect(file("out/phone-1/\(day).ndjson") == [lines[1], lines[5], lines[6]])
        let dead = file("sinks/a/dead-letters.ndjson")
        #expect(dead.count == 1)
        let kept = try #require(try JSONSerialization.jsonObject(with: Data((dead.first ?? "").utf8)) as? [String: Any])
        let record = try #require(kept["record"] as? [String: Any])
        let original = try #require(try JSONSerialization.jsonObject(with: Data(lines[3].utf8)) as? NSDictionary)
        #expect(NSDictionary(dictionary: record) == original, "the whole record, not the fields the sink read")
        #expect(logs.all.contains { $0.message.contains("a workout record (uuid u3) was rejected") }, "\(logs.all.map(\.message))")
    }

    /// Through filter + convert + tag, the drainer reads only what those and the sink need and
    /// writes each changed record as its journal line with the changed members written anew —
    /// records with the phone's own `fields` and metadata among them, read ahead by two decoders
    /// at once in small batches: every line is the transformed record's own, field for field,
    /// in the journal's order.
    @Test func transformsOnFewFieldsGiveTheWholeTransformedRecord() throws {
        let dir = ServeProcess.makeTempDir("few-transforms")
        let j = try Journal(directory: dir + "/journal", logger: logger)
        var expected: [String] = []
        for entry in 0..<200 {
            var records: [CanonicalRecord] = []
            for i in 0..<8 {
                var r = i % 2 == 0 ? CanonicalCodecTests.full : PipelineTests.record("p\(i)", type: i % 4 == 1 ? "steps" : "distance_walking_running")
                r.uuid = "e\(entry)-u\(i)"
                if r.type == "distance_walking_running" { r.unit = "m"; r.value = .number(1500) }
                records.append(r)
            }
            try j.append(payload: CanonicalCodec.encodeLines(records), count: records.count, time: Timestamp(seconds: 0))
            for r in records where r.type != "steps" {
                var t = r
                if t.type == "distance_walking_running" { t.value = .number(1.5); t.unit = "km" }
                t.tags = [RecordTag("person", "alice")]
                expected.append(String(decoding: CanonicalCodec.encodeLine(t), as: UTF8.self))
            }
        }
        var transforms: [any TransformSpec] = []
        for (kind, yaml) in [("filter", "{exclude_types: [steps]}"), ("convert", "{distance: km}"), ("tag", "{person: alice}")] {
            let build = try #require(TransformRegistry.builder(named: kind))
            transforms.append(try build(parseYAML(yaml, file: "t", environment: [:]), kind))
        }
        let route = Route(name: "r", from: [Glob("*")], transforms: transforms, to: ["out"])
        let built = try FileSink.build(name: "out", node: parseYAML("{kind: file, path: out.ndjson, batch: {max_items: 10}}", file: "t",
                                                                    environment: [:]),
                                       path: "sinks.out", context: SinkBuildContext(dataDir: dir))
        #expect(!SinkDrainer.readsWholeRecords(built, routes: [route]))
        let d = SinkDrainer(name: "out", built: built, routes: [route], journal: j, dataDir: dir, logger: logger)
        try d.start()
        defer { d.stop() }
        #expect(ServeProcess.eventually { (try? d.loadCursor()) == Cursor(seq: 201, skip: 0) })
        let written = ((try? String(contentsOfFile: dir + "/out.ndjson", encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        #expect(written.count == 1_200)
        #expect(written == expected)
    }

    /// A record refused after a transform changed it (its line the journal's head, the rest
    /// written anew) is kept in the dead letters as the sink wrote it, every field there —
    /// not the few fields the drainer read of it.
    @Test func aRefusedTransformedRecordIsKeptWhole() throws {
        let dir = ServeProcess.makeTempDir("few-dead")
        let j = try Journal(directory: dir + "/journal", logger: logger)
        let records = [PipelineTests.record("fine"), PipelineTests.record("refused", device: "blocked/x")]
        try j.append(payload: CanonicalCodec.encodeLines(records), count: 2, time: Timestamp(seconds: 0))
        let build = try #require(TransformRegistry.builder(named: "tag"))
        let route = Route(name: "r", from: [Glob("*")], transforms: [try build(parseYAML("{person: alice}", file: "t", environment: [:]), "tag")],
                          to: ["out"])
        // `{device}` makes "blocked%2Fx": a directory stands where its file would go (EISDIR), for good.
        try FileIO.makeDirectories(dir + "/out/blocked%2Fx.ndjson")
        let built = try FileSink.build(name: "out", node: parseYAML("{kind: file, path: \"out/{device}.ndjson\"}", file: "t", environment: [:]),
                                       path: "sinks.out", context: SinkBuildContext(dataDir: dir))
        #expect(!SinkRoutes.fieldsRead(routes: [route], sinkReads: built.reads).has(.uuid))
        let logs = MemoryLogSink()
        let d = SinkDrainer(name: "out", built: built, routes: [route], journal: j, dataDir: dir, logger: Logger(component: "t", sink: logs))
        try d.start()
        defer { d.stop() }
        #expect(ServeProcess.eventually { (try? d.loadCursor()) == Cursor(seq: 2, skip: 0) })
        let dead = ((try? String(contentsOfFile: dir + "/sinks/out/dead-letters.ndjson", encoding: .utf8)) ?? "").split(separator: "\n")
        #expect(dead.count == 1)
        let kept = try #require(try JSONSerialization.jsonObject(with: Data((dead.first ?? "").utf8)) as? [String: Any])
        let record = try #require(kept["record"] as? [String: Any])
        var tagged = records[1]
        tagged.tags = [RecordTag("person", "alice")]
        let want = try #require(try JSONSerialization.jsonObject(with: Data(CanonicalCodec.encodeLine(tagged))) as? NSDictionary)
        #expect(NSDictionary(dictionary: record) == want)
        #expect(logs.all.contains { $0.message.contains("a steps record (uuid refused) was rejected") }, "\(logs.all.map(\.message))")
    }

    @Test func aJournalLineThatIsNotARecordIsKeptAsADeadLetter() throws {
        let dir = ServeProcess.makeTempDir("pipe")
        let j = try Journal(directory: dir + "/journal", logger: logger)
        try j.append(payload: Array("{\"op\":\"upsert\"}\n".utf8) + CanonicalCodec.encodeLines([PipelineTests.record("ok")]),
                     count: 2, time: Timestamp(seconds: 0))
        let sink = GateSink(acceptFirst: 100)
        let d = drainer(sink, j, dir: dir)
        try d.start()
        #expect(ServeProcess.eventually { sink.accepted == ["ok"] })
        d.stop()
        let dead = try String(contentsOfFile: dir + "/sinks/gate/dead-letters.ndjson", encoding: .utf8)
        #expect(dead.contains(#""line":"{\"op\":\"upsert\"}""#))
    }

    @Test func theFileSinkSurvivesManyFilesAndOverlongNames() throws {
        let dir = ServeProcess.makeTempDir("files")
        let sink = FileSink(name: "s", pathTemplate: "{device}/x.ndjson", baseDir: dir, rotateBytes: 1 << 20, logger: logger, clock: SystemClock())
        // More files in one batch than the sink keeps open, and a device name far too long for
        // a file name: everything is written, nothing is refused.
        var records = (0..<150).map { PipelineTests.record("r\($0)", device: "phone-\($0)") }
        records.append(PipelineTests.record("long", device: String(repeating: "d", count: 400)))
        records.append(PipelineTests.record("long2", device: String(repeating: "d", count: 399) + "e"))
        #expect(sink.write(SinkBatch(records: records)) == .accepted)
        #expect(ServeProcess.ndjson(under: dir).count == 152)
        #expect(try FileIO.list(dir).count == 152)
        sink.close()
    }

    @Test func anUnwritablePathRejectsOnlyItsRecords() throws {
        let dir = ServeProcess.makeTempDir("files")
        // A file where the sink needs a directory: ENOTDIR for that device, forever.
        try FileIO.writeAtomically(dir + "/blocked", Array("x".utf8))
        let sink = FileSink(name: "s", pathTemplate: "{device}/x.ndjson", baseDir: dir, rotateBytes: 1 << 20, logger: logger, clock: SystemClock())
        let result = sink.write(SinkBatch(records: [PipelineTests.record("a", device: "fine"),
                                                   PipelineTests.record("b", device: "blocked")]))
        guard case .perRecord(let outcomes) = result else {
            Issue.record("expected per-record outcomes, got \(result)")
            return
        }
        #expect(outcomes[0] == .accepted)
        if case .rejected(let why) = outcomes[1] { #expect(why.contains("blocked")) } else { Issue.record("b was not rejected") }
        sink.close()
    }

    /// Many small journal entries (phones posting a few samples at a time) pile up in the
    /// drainer's pending records without reallocating them for each: it once reserved exactly
    /// what each entry added, so every entry copied every record pending (a fifth of the
    /// server's CPU with 44-sample bodies).
    @Test func pendingRecordsGrowByDoublingNotByEachEntry() {
        let payload = CanonicalCodec.encodeLines([PipelineTests.record("a"), PipelineTests.record("b")])
        for routed in [false, true] {
            var pending = Pending(routed: routed)
            var capacities = Set<Int>()
            for seq in 1...2_000 {
                pending.decode(JournalEntry(seq: UInt64(seq), timeNanos: 0, count: 2, payload: payload), skip: 0,
                               parser: JSONParser(), ahead: nil) { _, why in Issue.record("\(why)") }
                capacities.insert(pending.records.records.capacity)
            }
            #expect(pending.count == 4_000)
            #expect(capacities.count < 30, "the pending records were reallocated \(capacities.count) times for 2,000 entries")
        }
    }

    /// Records taken out of what is pending, or appended to it, keep their order and their
    /// lines whichever side is moved (the fewer): a batch taking most, or little, of what is
    /// pending; a read-ahead's records joining fewer, or more.
    @Test func movedRecordsKeepTheirOrderAndLines() {
        let bytes = Array("0123456789".utf8)
        func records(_ range: Range<Int>) -> RoutedRecords {
            var r = RoutedRecords()
            for i in range { r.append(PipelineTests.record("r\(i)"), line: i % 3 == 0 ? .none : .whole(bytes[(i % 10)...])) }
            return r
        }
        func check(_ r: RoutedRecords, _ range: Range<Int>, _ what: String) {
            #expect(r.records.map(\.uuid) == range.map { "r\($0)" }, "\(what)")
            #expect(r.lines.enumerated().allSatisfy { i, line in
                switch line {
                case .none: (range.lowerBound + i) % 3 == 0
                case .whole(let b): (range.lowerBound + i) % 3 != 0 && Array(b) == Array(bytes[((range.lowerBound + i) % 10)...])
                case .patched: false
                }
            }, "\(what)")
        }
        for range in [0..<0, 0..<1, 0..<100, 10..<50, 90..<100] {
            var pending = records(0..<100)
            check(pending.take(range), range, "taken \(range)")
        }
        // Taken batch by batch, routed ahead: each batch the next records, whatever the batch size,
        // the pending ones always the rest.
        for size in [1, 7, 300, 2_999, 3_000, 5_000] {
            var pending = Pending(routed: true)
            let routes = SinkRoutes(routes: [Route(name: "all", from: [Glob("*")], transforms: [], to: ["s"])], sink: "s",
                                    clock: SystemClock(), timeZones: SystemTimeZones(), logger: Logger(component: "t", sink: MemoryLogSink()))
            let payload = CanonicalCodec.encodeLines((0..<1_000).map { PipelineTests.record("r\($0)") })
            for seq in 1...3 {
                pending.decode(JournalEntry(seq: UInt64(seq), timeNanos: 0, count: 1_000, payload: payload), skip: 0,
                               parser: JSONParser(), ahead: routes) { _, why in Issue.record("\(why)") }
            }
            var taken = 0
            while !pending.isEmpty {
                let first = pending.first!
                #expect(first.seq == UInt64(taken / 1_000 + 1) && first.index == taken % 1_000, "size \(size): \(first) after \(taken)")
                let (batch, consumed, filtered) = pending.takeRouted(atLeast: size)
                #expect(consumed == min(size, 3_000 - taken) && filtered == 0 && batch.count == consumed)
                #expect(batch.records.map(\.uuid) == (taken..<(taken + consumed)).map { "r\($0 % 1_000)" }, "size \(size) at \(taken)")
                #expect(batch.lines.allSatisfy { if case .whole = $0 { true } else { false } })
                taken += consumed
                #expect(pending.count == 3_000 - taken)
            }
            #expect(taken == 3_000)
        }
        for (a, b) in [(0, 5), (5, 0), (3, 40), (40, 3), (20, 20)] {
            var pending = records(0..<a)
            var more = records(a..<(a + b))
            pending.appendMoving(&more)
            check(pending, 0..<(a + b), "\(a) + \(b)")
            #expect(more.isEmpty)
        }
    }
}

/// Accepts the first `acceptFirst` records it is given, then keeps everything.
final class GateSink: Sink, Named, @unchecked Sendable {
    let name = "gate"
    private let lock = NSLock()
    private var left: Int
    private var _accepted: [String] = []
    private var _calls = 0

    init(acceptFirst: Int) { left = acceptFirst }

    private var _largest = 0

    var accepted: [String] { lock.lock(); defer { lock.unlock() }; return _accepted }
    var calls: Int { lock.lock(); defer { lock.unlock() }; return _calls }
    var largestBatch: Int { lock.lock(); defer { lock.unlock() }; return _largest }

    func write(_ batch: SinkBatch) -> SinkWriteResult {
        lock.lock()
        defer { lock.unlock() }
        _calls += 1
        _largest = max(_largest, batch.count)
        if left >= batch.count {
            left -= batch.count
            _accepted += batch.records.map(\.uuid)
            return .accepted
        }
        return .keep(reason: "closed for the test", retryAfterSeconds: 60)
    }

    func close() {}
}

/// A sink with two batches in flight (as the influxdb sink): rejects every `poison` record,
/// accepts the rest, and notes each `write` called while a batch it began is still out.
/// `readsLines`: each record's uuid is read from its line (`SinkBatch.appendLine`), as a sink
/// that reads no field does, and each line and whether a batch came with records are noted; a
/// batch all accepted is then answered `.accepted` (else always one outcome a record).
final class InFlightSink: PipelinedSink, Named, @unchecked Sendable {
    let name = "inflight"
    let batchesInFlight = 2
    let readsLines: Bool
    private let lock = NSLock()
    /// What each batch begun and not finished came out as: taken when begun, as a request sent is.
    private var open: [SinkWriteResult] = []
    private var _accepted: [String] = []
    private var _violations: [String] = []
    private var _lines: [(uuid: String, bytes: [UInt8])] = []
    private var _batches = 0
    private var _batchesWithRecords = 0
    private let parser = JSONParser()

    init(readsLines: Bool = false) { self.readsLines = readsLines }

    var accepted: [String] { lock.lock(); defer { lock.unlock() }; return _accepted }
    var violations: [String] { lock.lock(); defer { lock.unlock() }; return _violations }
    /// The last record of each batch taken, in the order taken.
    var lastWrites: [String] { lock.lock(); defer { lock.unlock() }; return _lastWrites }
    private var _lastWrites: [String] = []
    var lines: [(uuid: String, bytes: [UInt8])] { lock.lock(); defer { lock.unlock() }; return _lines }
    var batches: Int { lock.lock(); defer { lock.unlock() }; return _batches }
    var batchesWithRecords: Int { lock.lock(); defer { lock.unlock() }; return _batchesWithRecords }

    private func take(_ batch: SinkBatch) -> SinkWriteResult {
        _batches += 1
        if !batch.records.isEmpty { _batchesWithRecords += 1 }
        let outcomes: [DeliveryOutcome] = (0..<batch.count).map { i in
            let uuid: String
            if readsLines {
                var bytes: [UInt8] = []
                batch.appendLine(i, to: &bytes)
                guard let u = (try? CanonicalCodec.decode(parser.parse(bytes.dropLast()).root))?.uuid else {
                    return .rejected(reason: "not a record")
                }
                uuid = u
                _lines.append((uuid, bytes))
            } else {
                uuid = batch.records[i].uuid
            }
            if i == batch.count - 1 { _lastWrites.append(uuid) }
            if uuid == "poison" { return .rejected(reason: "the destination said no") }
            _accepted.append(uuid)
            return .accepted
        }
        return readsLines && outcomes.allSatisfy { $0 == .accepted } ? .accepted : .perRecord(outcomes)
    }

    func begin(_ batch: SinkBatch) {
        lock.lock()
        defer { lock.unlock() }
        open.append(take(batch))
    }

    func finishOldest() -> SinkWriteResult {
        lock.lock()
        defer { lock.unlock() }
        guard !open.isEmpty else {
            _violations.append("finishOldest with nothing in flight")
            return .keep(reason: "nothing in flight", retryAfterSeconds: nil)
        }
        return open.removeFirst()
    }

    func write(_ batch: SinkBatch) -> SinkWriteResult {
        lock.lock()
        defer { lock.unlock() }
        if !open.isEmpty { _violations.append("write with \(open.count) batch(es) in flight") }
        return take(batch)
    }

    func close() {}
}

protocol Named { var name: String { get } }
