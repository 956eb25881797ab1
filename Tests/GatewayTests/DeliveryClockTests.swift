import CanonicalJSON
import Foundation
@testable import Gateway
import HealthgateCore
@testable import HealthgateTesting
@testable import Pipeline
import Posix
@testable import SinkFile
import SinkKit
import Testing
import YAMLConfig
import Transforms

/// Backoff, Retry-After and dead-letter times run on the drainer's clock: these tests give it a
/// fake one and advance it instead of sleeping (retries an hour apart finish at once).
@Suite struct DeliveryClockTests {
    let logger = Logger(component: "test", sink: MemoryLogSink())

    /// Keeps `times` times (with `retryAfter` when given), then accepts.
    final class FlakySink: Sink, @unchecked Sendable {
        private let lock = NSLock()
        private var left: Int
        let retryAfter: Double?
        private(set) var writes = 0

        init(times: Int, retryAfter: Double?) {
            left = times
            self.retryAfter = retryAfter
        }

        func write(_ batch: SinkBatch) -> SinkWriteResult {
            lock.lock()
            defer { lock.unlock() }
            writes += 1
            if left > 0 {
                left -= 1
                return .keep(reason: "503 from the test", retryAfterSeconds: retryAfter)
            }
            return .accepted
        }

        func close() {}
    }

    func delivery(_ sink: any Sink, retry: RetryConfig, clock: FakeClock, dir: String) -> BatchDelivery {
        let metrics = SinkMetrics(name: "s")
        return BatchDelivery(
            sink: sink, name: "s", retry: retry, metrics: metrics,
            deadLetters: DeadLetters(sink: "s", dataDir: dir, metrics: metrics, logger: logger, clock: clock),
            logger: logger, clock: clock)
    }

    static func hours(_ h: Int64) -> ConfigDuration { ConfigDuration(nanoseconds: h * 3_600_000_000_000) }

    @Test func retryAfterIsWaitedOutOnTheClock() {
        let clock = FakeClock()
        let sink = FlakySink(times: 2, retryAfter: 120)
        var d = delivery(
            sink, retry: RetryConfig(initial: Self.hours(1), max: Self.hours(2)), clock: clock,
            dir: ServeProcess.makeTempDir("clock"))
        let started = monotonicSeconds()
        let outcome = d.deliver([Record(PipelineTests.record("a"))]) { seconds in
            clock.advance(seconds)
            return true
        }
        #expect(outcome == .delivered)
        #expect(sink.writes == 3)
        // Twice the Retry-After, not the hour of backoff, in steps of at most half a second.
        #expect(abs(clock.monotonicSeconds() - 1_800_000_000 - 240) < 0.01, "\(clock.monotonicSeconds() - 1_800_000_000)")
        #expect(monotonicSeconds() - started < 1)
    }

    @Test func backoffDoublesUpToItsMaxWithJitter() {
        let clock = FakeClock()
        let sink = FlakySink(times: 8, retryAfter: nil)
        var d = delivery(
            sink,
            retry: RetryConfig(
                initial: ConfigDuration(nanoseconds: 10_000_000_000),
                max: ConfigDuration(nanoseconds: 60_000_000_000)),
            clock: clock, dir: ServeProcess.makeTempDir("clock"))
        var pauses: [Double] = []
        var current = 0.0
        var lastWrites = 0
        let outcome = d.deliver([Record(PipelineTests.record("a"))]) { seconds in
            if sink.writes != lastWrites {
                if lastWrites > 0 { pauses.append(current) }
                current = 0
                lastWrites = sink.writes
            }
            current += seconds
            clock.advance(seconds)
            return true
        }
        pauses.append(current)
        #expect(outcome == .delivered)
        #expect(pauses.count == 8)
        // Full jitter: each pause is up to its cap — 10 s, 20 s, 40 s, then 60 s (the max).
        let caps: [Double] = [10, 20, 40, 60, 60, 60, 60, 60]
        for (p, cap) in zip(pauses, caps) { #expect(p <= cap + 0.001, "\(pauses)") }
        #expect(pauses.reduce(0, +) > 0)
    }

    /// Through a drainer: retries an hour apart, a rejected record's dead letter stamped with
    /// the clock's time, and the whole in well under a second of real time.
    @Test func aDrainerRetriesOnItsClockAndStampsDeadLettersWithIt() throws {
        let dir = ServeProcess.makeTempDir("clock")
        let j = try Journal(directory: dir + "/journal", logger: logger)
        try j.append(
            payload: CanonicalCodec.encodeLines([
                PipelineTests.record("ok"), PipelineTests.record("poison"),
                PipelineTests.record("ok2")
            ]),
            count: 3, time: Timestamp(seconds: 0))
        let clock = FakeClock()
        let sink = ScriptedSink()
        let d = SinkDrainer(
            name: "scripted",
            built: .testing(sink, common: SinkCommonConfig(retry: RetryConfig(initial: Self.hours(1), max: Self.hours(2)))),
            routes: [Route(name: "all", from: [Glob("*")], transforms: [], to: ["scripted"])],
            journal: j, dataDir: dir, logger: logger, clock: clock)
        let started = monotonicSeconds()
        try d.start()
        #expect(ServeProcess.eventually(5) { sink.delivered.sorted() == ["ok", "ok2"] })
        #expect(monotonicSeconds() - started < 3)
        d.stop()
        #expect(clock.waited > 0)
        let dead = try String(contentsOfFile: dir + "/sinks/scripted/dead-letters.ndjson", encoding: .utf8)
        let stamp = Timestamp(seconds: clock.now().seconds).rfc3339()
        #expect(dead.contains(#""time":"\#(stamp)""#), "\(dead) vs \(stamp)")
    }

    /// A crash in the middle of a write leaves a partial last line; the next write cuts it
    /// first instead of gluing a record to it.
    @Test func theFileSinkCutsATornLastLine() throws {
        let dir = ServeProcess.makeTempDir("torn")
        let whole = CanonicalCodec.encodeLines([PipelineTests.record("before")])
        try Data(whole + Array(#"{"op":"upsert","kind":"quan"#.utf8)).write(to: URL(fileURLWithPath: dir + "/x.ndjson"))
        let sink = FileSink(
            name: "s", pathTemplate: "x.ndjson", baseDir: dir, rotateBytes: 1 << 20, logger: logger,
            clock: SystemClock())
        #expect(sink.write(SinkBatch(records: [PipelineTests.record("after")])) == .accepted)
        sink.close()
        let lines = try String(contentsOfFile: dir + "/x.ndjson", encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 2)
        let uuids = try lines.map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])["uuid"] as? String
        }
        #expect(uuids == ["before", "after"])
    }
}

/// Transforms may emit more than they take, and emit on their own when time says so.
@Suite struct EmittingTransformTests {
    /// Passes each record on and adds a derived one; on a tick, emits a marker once.
    struct Doubler: TransformSpec {
        var kind: String { "doubler" }
        func instantiate(_ context: TransformContext) -> any Transform { Instance(clock: context.clock) }

        final class Instance: Transform {
            let clock: any Clock
            var ticked = false
            init(clock: any Clock) { self.clock = clock }

            func process(_ record: consuming Record, emit: (consuming Record) -> Void) {
                emit(copy record)
                record.uuid += "-derived"
                emit(record)
            }

            func tick(now: Timestamp, emit: (consuming Record) -> Void) {
                guard !ticked else { return }
                ticked = true
                emit(
                    Record(
                        CanonicalRecord(
                            kind: "quantity", device: "clock", receiver: "r", uuid: "tick-\(now.seconds)", type: "steps",
                            start: now, end: now, value: .number(1), unit: "count")))
            }
        }
    }

    @Test func derivedAndTimedRecordsReachTheSinkInBatchesOfMaxItems() throws {
        let dir = ServeProcess.makeTempDir("emit")
        let logger = Logger(component: "test", sink: MemoryLogSink())
        let j = try Journal(directory: dir + "/journal", logger: logger)
        try j.append(
            payload: CanonicalCodec.encodeLines((0..<5).map { PipelineTests.record("r\($0)") }), count: 5,
            time: Timestamp(seconds: 0))
        let sink = GateSink(acceptFirst: 1000)
        let clock = FakeClock()
        let d = SinkDrainer(
            name: "gate", built: .testing(sink, common: SinkCommonConfig(batch: BatchConfig(max_items: 4))),
            routes: [Route(name: "double", from: [Glob("*")], transforms: [Doubler()], to: ["gate"])],
            journal: j, dataDir: dir, logger: logger, clock: clock)
        try d.start()
        #expect(ServeProcess.eventually { sink.accepted.count == 11 })
        d.stop()
        #expect(Array(sink.accepted.prefix(10)) == (0..<5).flatMap { ["r\($0)", "r\($0)-derived"] })
        #expect(sink.accepted.last == "tick-\(clock.now().seconds)")
        #expect(sink.largestBatch <= 4)
        #expect(try d.loadCursor() == Cursor(seq: 2, skip: 0))
    }
}
