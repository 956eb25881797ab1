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
        CanonicalRecord(
            kind: "quantity", device: device, receiver: "r", uuid: uuid, type: type,
            start: Timestamp(seconds: 1_791_961_260), end: Timestamp(seconds: 1_791_961_319),
            value: .number(412), unit: "count")
    }

    func append(_ j: Journal, _ records: [CanonicalRecord]) throws {
        try j.append(payload: CanonicalCodec.encodeLines(records), count: records.count, time: Timestamp(seconds: 0))
    }

    /// A journal in `dir`/journal holding `records` records made by `record(n)`, `perEntry` to an
    /// entry (so that batches and cursors fall inside entries).
    static func journal(
        dir: String, records: Int, perEntry: Int, logger: Logger,
        _ record: (Int) -> CanonicalRecord
    ) throws -> Journal {
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
        #expect(
            ServeProcess.eventually(30) { (try? d.loadCursor()) == Cursor(seq: UInt64(entries + 1), skip: 0) },
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
                FileSink(
                    name: "archive", pathTemplate: "out/{device}/{date}.ndjson", baseDir: dir, rotateBytes: 1 << 20,
                    logger: logger, clock: SystemClock())
            }
            return SinkDrainer(
                name: "archive", built: built,
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

    @Test func routesFilterByTypeGlobsPerSink() throws {
        let dir = ServeProcess.makeTempDir("pipe")
        let j = try Journal(directory: dir + "/journal", logger: logger)
        try append(
            j,
            [
                Self.record("1", type: "steps"), Self.record("2", type: "body_mass"),
                Self.record("3", type: "heart_rate"), Self.record("4", type: "body_fat_percentage")
            ])
        let logger = self.logger
        let built = BuiltSink.testing { _ in
            FileSink(name: "s", pathTemplate: "out.ndjson", baseDir: dir, rotateBytes: 1 << 20, logger: logger, clock: SystemClock())
        }
        let route = Route(
            name: "bodies", from: [Glob("r")],
            transforms: [FilterTransform(types: ["body_*", "steps"], excludeTypes: ["body_fat_*"])],
            to: ["s"])
        let d = SinkDrainer(
            name: "s", built: built,
            routes: [route], journal: j, dataDir: dir, logger: logger)
        try d.start()
        #expect(ServeProcess.eventually { ServeProcess.ndjson(under: dir).count == 2 })
        usleep(100_000)
        #expect(ServeProcess.ndjson(under: dir).map { $0["uuid"] as! String } == ["1", "2"])
        #expect(ServeProcess.eventually { d.metrics.filtered.load(ordering: .relaxed) == 2 })
        d.stop()
    }

    /// A journal line that is no canonical record is kept as text in the dead letters, so that
    /// the file stays JSON; a record is kept as its line.
    @Test func aRejectedLineThatIsNoRecordIsKeptAsText() throws {
        let dir = ServeProcess.makeTempDir("dead")
        let dead = DeadLetters(sink: "s", dataDir: dir, metrics: SinkMetrics(name: "s"), logger: logger, clock: SystemClock())
        dead.keep(line: Array("{\"op\":\"upsert\",\"kind\":1".utf8)[...], reason: "not a record")
        #expect(dead.keep(try Record.read(line: CanonicalCodec.encodeLine(Self.record("ok"))[...]), reason: "refused"))
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
        let d = SinkDrainer(
            name: "scripted",
            built: .testing(
                sink, common: SinkCommonConfig(retry: RetryConfig(initial: ConfigDurationFor.ms(10), max: ConfigDurationFor.ms(20)))),
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
        let d = SinkDrainer(
            name: "scripted",
            built: .testing(
                sink, common: SinkCommonConfig(retry: RetryConfig(initial: ConfigDurationFor.ms(10), max: ConfigDurationFor.ms(20)))),
            routes: [Route(name: "all", from: [Glob("*")], transforms: [], to: ["scripted"])],
            journal: j, dataDir: dir, logger: Logger(component: "t", sink: logs))
        try d.start()
        defer { d.stop() }
        // The good record may go out after the last rejection is counted (another part of the
        // halved batch); under a sanitizer the halving takes a while.
        #expect(
            ServeProcess.eventually(90) { d.metrics.rejected.load(ordering: .relaxed) == 2_000 && sink.delivered == ["ok"] },
            "\(d.metrics.rejected.load(ordering: .relaxed)) rejected, \(sink.delivered) delivered")
        let dead = try String(contentsOfFile: dir + "/sinks/scripted/dead-letters.ndjson", encoding: .utf8)
        #expect(dead.split(separator: "\n").count == 2_000)
        let said = logs.all.filter { $0.message.contains("rejected") }
        #expect(!said.isEmpty && said.count <= 5, "\(said.count) lines")
        #expect(
            said.contains { $0.message.contains("records were rejected") && $0.message.contains("the destination said no") },
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
        let d = SinkDrainer(
            name: "scripted",
            built: .testing(
                sink, common: SinkCommonConfig(retry: RetryConfig(initial: ConfigDurationFor.ms(10), max: ConfigDurationFor.ms(20)))),
            routes: [Route(name: "all", from: [Glob("*")], transforms: [], to: ["scripted"])],
            journal: j, dataDir: dir, logger: Logger(component: "t", sink: logs), deadLetterBytes: 8192)
        try d.start()
        defer { d.stop() }
        let m = d.metrics
        #expect(
            ServeProcess.eventually {
                m.rejected.load(ordering: .relaxed) + m.deadLettersNotKept.load(ordering: .relaxed) == 200
            })
        let path = dir + "/sinks/scripted/dead-letters.ndjson"
        let size = try #require(FileIO.fileSize(path))
        #expect(size <= 8192 + 1024 + 600, "\(size) bytes")
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
        let whole = lines.filter { $0.contains("\"record\":") }.count
        let keys = lines.filter { $0.contains("\"record_left_out\":\"over dead_letters.max_bytes\"") && $0.contains("\"uuid\":\"poison\"") }
            .count
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
        #expect(t.render(Record(r), fallbackDate: "2026-01-01") == "/data/archive/%2E.%2F..%2Fetc%2Fpasswd/2026-10-14.ndjson")
        r.start = nil
        r.device = ""
        #expect(t.render(Record(r), fallbackDate: "2026-01-01") == "/data/archive/%-/2026-01-01.ndjson")
    }

    /// Distinct values are distinct files: `a/b`, `a_b` and `a\b` used to share one, and a
    /// device `x.1` wrote into device `x`'s rotated file.
    @Test func distinctValuesNeverShareAFile() {
        let values = [
            "a/b", "a_b", "a\\b", "a%2Fb", "", "_", "%-", "x", "x.1", "x%2E1", "~", ".x", "%2Ex", "a\u{7F}",
            String(repeating: "y", count: 300), String(repeating: "y", count: 299) + "z", "Anna's iPhone"
        ]
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

    /// What `prepare` made on the helper is what `write` writes: the same files and lines as a
    /// batch written with nothing prepared (a batch written again in part), and a batch whose
    /// records a route changed is written with its changes either way.
    @Test func theFileSinkWritesWhatItPreparedAsItWouldUnprepared() throws {
        let made = ServeProcess.makeTempDir("prepared"), plain = ServeProcess.makeTempDir("unprepared")
        let lines = CanonicalCodec.encodeLines((0..<300).map { i in Self.record("p\(i)", device: i % 3 == 0 ? "d_alpha" : "d_beta") })
        var records = Record.records(in: lines, bad: { _, _, _ in Issue.record("a line is no record") }).map(\.0)
        records[7].tags = [RecordTag("person", "ann")]
        let batch = SinkBatch(records: records)
        let a = FileSink(name: "a", pathTemplate: "{device}/{date}.ndjson", baseDir: made, rotateBytes: 1 << 20, logger: logger)
        let b = FileSink(name: "b", pathTemplate: "{device}/{date}.ndjson", baseDir: plain, rotateBytes: 1 << 20, logger: logger)
        let prepare = try #require(a.prepare)
        #expect(a.write(SinkBatch(records: batch.records, prepared: prepare(batch))) == .accepted)
        #expect(b.write(batch) == .accepted)
        let files = try FileIO.list(made).sorted()
        #expect(files == ["d_alpha", "d_beta"])
        #expect(try FileIO.list(plain).sorted() == files)
        for device in files {
            let day = try #require(try FileIO.list(made + "/" + device).first)
            let left = try String(contentsOfFile: "\(made)/\(device)/\(day)", encoding: .utf8)
            #expect(left == (try String(contentsOfFile: "\(plain)/\(device)/\(day)", encoding: .utf8)))
            #expect(left.split(separator: "\n").count == (device == "d_alpha" ? 100 : 200))
        }
        #expect(ServeProcess.ndjson(under: made).contains { ($0["tags"] as? [String: Any])?["person"] as? String == "ann" })
        a.close()
        b.close()
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
        return .perRecord(
            records.map { r in
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
        let common = SinkCommonConfig(
            batch: BatchConfig(max_items: maxItems),
            retry: RetryConfig(initial: ConfigDurationFor.ms(5), max: ConfigDurationFor.ms(10)))
        return SinkDrainer(
            name: sink.name, built: .testing(sink, common: common), routes: rs,
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
    @Test func aDeadLetterThatCannotBeWrittenKeepsItsBatchAndTheNextInOrder() throws {
        let dir = ServeProcess.makeTempDir("pipe")
        let j = try Journal(directory: dir + "/journal", logger: logger)
        for e in 0..<10 {
            try append(j, (0..<10).map { k in PipelineTests.record(e == 2 && k == 4 ? "poison" : "r\(e * 10 + k)") })
        }
        try FileIO.makeDirectories(dir + "/sinks/inflight/dead-letters.ndjson")
        let sink = NotingSink()
        let d = drainer(sink, j, dir: dir, maxItems: 10)
        try d.start()
        #expect(ServeProcess.eventually { d.metrics.kept.load(ordering: .relaxed) >= 3 })
        #expect(d.metrics.rejected.load(ordering: .relaxed) == 0)
        try FileManager.default.removeItem(atPath: dir + "/sinks/inflight/dead-letters.ndjson")
        #expect(ServeProcess.eventually { (try? d.loadCursor()) == Cursor(seq: 11, skip: 0) })
        d.stop()
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
    @Test func aSinkThatWritesLinesGetsTheJournalsLinesAsTheyAre() throws {
        do {
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
            let sink = NotingSink(readsLines: true)
            let common = SinkCommonConfig(
                batch: BatchConfig(max_items: 7),
                retry: RetryConfig(initial: ConfigDurationFor.ms(5), max: ConfigDurationFor.ms(10)))
            let built = BuiltSink(kind: "test", common: common, summary: "test sink") { _ in sink }
            let d = SinkDrainer(
                name: sink.name, built: built,
                routes: [Route(name: "all", from: [Glob("*")], transforms: [], to: [sink.name])],
                journal: j, dataDir: dir, logger: logger)
            try d.start()
            #expect(ServeProcess.eventually { (try? d.loadCursor()) == Cursor(seq: 11, skip: 0) })
            d.stop()
            let expected = (3..<100).filter { $0 != 24 }.map { "r\($0)" }
            // In order; the batch in flight behind the one with a rejected record is written again.
            var seen = Set<String>()
            #expect(sink.accepted.filter { seen.insert($0).inserted } == expected)
            #expect(sink.accepted.count <= expected.count + 7)
            #expect(sink.batches >= 14)
            // Each line as the journal holds it (its line feed included).
            #expect(sink.lines.allSatisfy { journaled[$0.uuid] == $0.bytes })
            let dead = try String(contentsOfFile: dir + "/sinks/inflight/dead-letters.ndjson", encoding: .utf8)
            #expect(dead.split(separator: "\n").count == 1 && dead.contains(#""record":{"op":"upsert""#) && dead.contains("poison"))
        }
    }

    /// A pipelined sink whose read-ahead decodes on across batches, with `replay --sink`
    /// records arriving in its inbox while it drains: the inbox goes out with nothing in flight
    /// (the read-ahead joined first: it and the inbox share the parser), and every record of
    /// both lands once the cursors are at their ends.
    @Test func theInboxGoesOutBetweenJournalBatches() throws {
        let dir = ServeProcess.makeTempDir("pipe")
        let j = try Journal(directory: dir + "/journal", logger: logger)
        let inbox = try Journal(directory: dir + "/inbox", logger: logger)
        for e in 0..<60 { try append(j, (0..<10).map { PipelineTests.record("r\(e * 10 + $0)") }) }
        let sink = NotingSink()
        let common = SinkCommonConfig(
            batch: BatchConfig(max_items: 10),
            retry: RetryConfig(initial: ConfigDurationFor.ms(5), max: ConfigDurationFor.ms(10)))
        let d = SinkDrainer(
            name: sink.name, built: .testing(sink, common: common),
            routes: [Route(name: "all", from: [Glob("*")], transforms: [], to: [sink.name])],
            journal: j, inbox: inbox, dataDir: dir, logger: logger)
        try d.start()
        for e in 0..<4 {
            try append(inbox, (0..<5).map { PipelineTests.record("i\(e * 5 + $0)") })
            usleep(2_000)
        }
        #expect(ServeProcess.eventually { (try? d.loadCursor()) == Cursor(seq: 61, skip: 0) && Set(sink.accepted).count == 620 })
        d.stop()
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
        let sink = NotingSink()
        let d = SinkDrainer(
            name: sink.name, built: .testing(sink, common: SinkCommonConfig(batch: BatchConfig(max_items: 10))),
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
    @Test func aFileSinkWritesTheJournalLinesAndKeepsRefusedOnesWhole() throws {
        let dir = ServeProcess.makeTempDir("few")
        try FileIO.makeDirectories(dir + "/out")
        try FileIO.writeAtomically(dir + "/out/blocked", Array("x".utf8)) // ENOTDIR for device "blocked", forever
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
            try FileSink.build(
                name: "x", node: parseYAML("{kind: file, path: \"\(path)\"}", file: "t", environment: [:]),
                path: "sinks.x", context: SinkBuildContext(dataDir: dir))
        }
        let byDevice = try built("out/{device}/{date}.ndjson"), fixed = try built("fixed.ndjson")
        let a = SinkDrainer(name: "a", built: byDevice, routes: [all], journal: j, dataDir: dir, logger: logger)
        let b = SinkDrainer(name: "b", built: fixed, routes: [all], journal: j, dataDir: dir, logger: logger)
        try a.start()
        try b.start()
        defer { a.stop(); b.stop() }
        #expect(
            ServeProcess.eventually { (try? a.loadCursor()) == Cursor(seq: 2, skip: 0) && (try? b.loadCursor()) == Cursor(seq: 2, skip: 0) }
        )
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
    @Test func transformedRecordsAreWrittenWithTheirChangesAndTheRestOfTheirLines() throws {
        let dir = ServeProcess.makeTempDir("few-transforms")
        let j = try Journal(directory: dir + "/journal", logger: logger)
        var expected: [String] = []
        for entry in 0..<200 {
            var records: [CanonicalRecord] = []
            for i in 0..<8 {
                var r =
                    i % 2 == 0
                    ? CanonicalCodecTests.full : PipelineTests.record("p\(i)", type: i % 4 == 1 ? "steps" : "distance_walking_running")
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
        let built = try FileSink.build(
            name: "out",
            node: parseYAML(
                "{kind: file, path: out.ndjson, batch: {max_items: 10}}", file: "t",
                environment: [:]),
            path: "sinks.out", context: SinkBuildContext(dataDir: dir))
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
        let route = Route(
            name: "r", from: [Glob("*")], transforms: [try build(parseYAML("{person: alice}", file: "t", environment: [:]), "tag")],
            to: ["out"])
        // `{device}` makes "blocked%2Fx": a directory stands where its file would go (EISDIR), for good.
        try FileIO.makeDirectories(dir + "/out/blocked%2Fx.ndjson")
        let built = try FileSink.build(
            name: "out", node: parseYAML("{kind: file, path: \"out/{device}.ndjson\"}", file: "t", environment: [:]),
            path: "sinks.out", context: SinkBuildContext(dataDir: dir))
        let logs = MemoryLogSink()
        let d = SinkDrainer(
            name: "out", built: built, routes: [route], journal: j, dataDir: dir, logger: Logger(component: "t", sink: logs))
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
        try j.append(
            payload: Array("{\"op\":\"upsert\"}\n".utf8) + CanonicalCodec.encodeLines([PipelineTests.record("ok")]),
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
        let sink = FileSink(
            name: "s", pathTemplate: "{device}/x.ndjson", baseDir: dir, rotateBytes: 1 << 20, logger: logger, clock: SystemClock())
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
        let sink = FileSink(
            name: "s", pathTemplate: "{device}/x.ndjson", baseDir: dir, rotateBytes: 1 << 20, logger: logger, clock: SystemClock())
        let result = sink.write(
            SinkBatch(records: [
                PipelineTests.record("a", device: "fine"),
                PipelineTests.record("b", device: "blocked")
            ]))
        guard case .perRecord(let outcomes) = result else {
            Issue.record("expected per-record outcomes, got \(result)")
            return
        }
        #expect(outcomes[0] == .accepted)
        if case .rejected(let why) = outcomes[1] { #expect(why.contains("blocked")) } else { Issue.record("b was not rejected") }
        sink.close()
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

/// A sink that rejects every `poison` record and accepts the rest, noting what it took.
/// `readsLines`: each record's uuid is read from its line (`SinkBatch.appendLine`), as a sink
/// that writes lines does, and each line is noted; a batch all accepted is then answered
/// `.accepted` (else always one outcome a record).
final class NotingSink: Sink, Named, @unchecked Sendable {
    let name = "inflight"
    let readsLines: Bool
    private let lock = NSLock()
    private var _accepted: [String] = []
    private var _lines: [(uuid: String, bytes: [UInt8])] = []
    private var _batches = 0
    private var _lastWrites: [String] = []
    private let parser = JSONParser()

    init(readsLines: Bool = false) { self.readsLines = readsLines }

    var accepted: [String] { lock.lock(); defer { lock.unlock() }; return _accepted }
    /// The last record of each batch taken, in the order taken.
    var lastWrites: [String] { lock.lock(); defer { lock.unlock() }; return _lastWrites }
    var lines: [(uuid: String, bytes: [UInt8])] { lock.lock(); defer { lock.unlock() }; return _lines }
    var batches: Int { lock.lock(); defer { lock.unlock() }; return _batches }

    func write(_ batch: SinkBatch) -> SinkWriteResult {
        lock.lock()
        defer { lock.unlock() }
        _batches += 1
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

    func close() {}
}

protocol Named { var name: String { get } }
