import CanonicalJSON
import FastJSON
import Glibc
import HealthgateCore
import Posix
import Sinks

/// One sink's queue over the journal: reads durable entries from the sink's own cursor,
/// applies the routes that lead to the sink, writes batches, retries with backoff and full
/// jitter, sends rejected records to dead letters, and saves the cursor after each success.
/// A sink that is down holds back nothing but itself. See JOURNAL.md and QUEUES.md.
public final class SinkDrainer: @unchecked Sendable {
    public let name: String
    let sink: any Sink
    let common: SinkCommonConfig
    let routes: [Route]
    let journal: Journal
    let dir: String
    let logger: Logger
    public let metrics: SinkMetrics
    private let wake = Monitor()
    private var stopping = false
    private var thread: pthread_t?
    private let parser = JSONParser()
    private var delivery: BatchDelivery
    private let deadLetters: DeadLetters
    /// Called after the cursor was saved, so the journal can drop segments every sink has passed.
    var onCommit: (@Sendable () -> Void)?

    /// Where the sink stands: the next entry to read and how many of its records are done.
    public struct Cursor: Equatable, Sendable {
        public var seq: UInt64
        public var skip: Int
    }

    public init(name: String, built: BuiltSink, routes: [Route], journal: Journal, dataDir: String, logger: Logger) {
        self.name = name
        self.sink = built.sink
        self.common = built.common
        self.routes = routes
        self.journal = journal
        self.dir = FileIO.join(FileIO.join(dataDir, "sinks"), name)
        self.logger = logger
        self.metrics = SinkMetrics(name: name)
        deadLetters = DeadLetters(sink: name, dataDir: dataDir, metrics: metrics, logger: logger)
        delivery = BatchDelivery(sink: built.sink, retry: built.common.retry, metrics: metrics, deadLetters: deadLetters,
                                 logger: logger)
    }

    var cursorPath: String { FileIO.join(dir, "cursor") }

    public func loadCursor() throws(IOError) -> Cursor {
        try FileIO.makeDirectories(dir, mode: 0o700)
        guard FileIO.exists(cursorPath) else { return Cursor(seq: 1, skip: 0) }
        let text = String(decoding: try FileIO.readAll(cursorPath), as: UTF8.self)
        let parts = text.split(whereSeparator: { $0 == " " || $0 == "\n" })
        guard parts.count >= 2, let seq = UInt64(parts[0]), let skip = Int(parts[1]) else {
            logger.error("sink \(name): cursor file \(cursorPath) is unreadable; starting from the oldest journal entry")
            return Cursor(seq: 1, skip: 0)
        }
        return Cursor(seq: seq, skip: skip)
    }

    func saveCursor(_ c: Cursor) throws(IOError) {
        try FileIO.writeAtomically(cursorPath, Array("\(c.seq) \(c.skip)\n".utf8), mode: 0o600)
        metrics.cursorSkip.store(c.skip, ordering: .relaxed)
        metrics.cursorSeq.store(c.seq, ordering: .relaxed)
        onCommit?()
    }

    public func start() throws(IOError) {
        var cursor = try loadCursor()
        let newest = journal.lastDurableSeq
        if cursor.seq > newest + 1 {
            // The journal was replaced or restored from an older copy: waiting for our old
            // position would skip everything it holds.
            let first = journal.segmentFirstSeqs.first ?? 1
            logger.error("sink \(name): its cursor (entry \(cursor.seq)) is ahead of the journal (newest entry \(newest)); "
                         + "the journal was replaced, so the sink starts again from entry \(first)")
            cursor = Cursor(seq: first, skip: 0)
            try saveCursor(cursor)
        }
        metrics.cursorSeq.store(cursor.seq, ordering: .relaxed)
        metrics.cursorSkip.store(cursor.skip, ordering: .relaxed)
        let start = cursor
        switch startThread({ [self] in run(from: start) }) {
        case .success(let t): thread = t
        case .failure(let e): throw IOError("pthread_create", name, code: e.code)
        }
    }

    /// Asks the drainer to stop after the write in progress, and waits for it.
    public func stop() {
        wake.withLock {
            stopping = true
            wake.broadcast()
        }
        if let t = thread {
            pthread_join(t, nil)
            thread = nil
        }
        sink.close()
    }

    private var isStopping: Bool { wake.withLock { stopping } }

    /// Sleeps up to `seconds`, waking early on stop. Returns false when stopping.
    private func sleep(_ seconds: Double) -> Bool {
        wake.withLock {
            if !stopping { wake.wait(seconds: seconds) }
            return !stopping
        }
    }

    /// Where a record came from in the journal.
    struct Position {
        var seq: UInt64
        var index: Int
        var entryCount: Int
    }

    /// Records waiting for the sink, as parallel arrays so that a batch is handed to the sink
    /// without copying records one by one.
    struct Pending {
        var records: [CanonicalRecord] = []
        /// The record's journal line, when no transform changed it.
        var lines: [ArraySlice<UInt8>?] = []
        var positions: [Position] = []

        var count: Int { records.count }
        var isEmpty: Bool { records.isEmpty }

        mutating func append(_ r: CanonicalRecord, line: ArraySlice<UInt8>?, at p: Position) {
            records.append(r)
            lines.append(line)
            positions.append(p)
        }

        /// The first `n` records, and the rest left here.
        mutating func takeFirst(_ n: Int) -> Pending {
            if n >= count {
                defer { self = Pending() }
                return self
            }
            let head = Pending(records: Array(records[..<n]), lines: Array(lines[..<n]), positions: Array(positions[..<n]))
            records.removeFirst(n)
            lines.removeFirst(n)
            positions.removeFirst(n)
            return head
        }

        func picking(_ indices: [Int]) -> Pending {
            Pending(records: indices.map { records[$0] }, lines: indices.map { lines[$0] },
                    positions: indices.map { positions[$0] })
        }
    }

    /// How much journal a drainer reads ahead of its sink: bounds its memory.
    let readAheadBytes = 2 << 20

    /// For `when_full: drop_oldest`: the limit past which the oldest waiting records are dropped.
    var dropOldestAbove: Int? {
        guard let max = common.queue.max_bytes?.bytes, common.queue.when_full == .drop_oldest else { return nil }
        return Int(max)
    }

    /// True when the sink is over its drop_oldest limit (and so should shed).
    private func overLimit() -> Bool {
        guard let max = dropOldestAbove else { return false }
        return journal.backlog(fromSeq: metrics.cursorSeq.load(ordering: .relaxed),
                               skip: metrics.cursorSkip.load(ordering: .relaxed)).bytes > max
    }

    /// Drops the oldest waiting records so that at most the limit waits, and moves the cursor.
    private func shed(_ reader: inout JournalReader, _ buffer: inout Pending) -> Cursor? {
        guard let max = dropOldestAbove else { return nil }
        let before = journal.backlog(fromSeq: metrics.cursorSeq.load(ordering: .relaxed),
                                     skip: metrics.cursorSkip.load(ordering: .relaxed))
        let keepFrom = journal.seqKeeping(lastBytes: max)
        let after = journal.backlog(fromSeq: keepFrom, skip: 0)
        let dropped = before.records - after.records
        guard dropped > 0 else { return nil }
        metrics.dropped.add(dropped, ordering: .relaxed)
        logger.warning("sink \(name): \(before.bytes) bytes waiting, over queue.max_bytes (\(max)) with drop_oldest: "
                       + "dropped the \(dropped) oldest record(s) unsent")
        buffer = Pending()
        reader = journal.makeReader(from: keepFrom)
        return Cursor(seq: keepFrom, skip: 0)
    }

    func run(from start: Cursor) {
        var reader = journal.makeReader(from: start.seq)
        var skip = start.skip
        var buffer = Pending()
        var committed = start
        var lastSavedAt = monotonicSeconds()
        let maxItems = common.batch.maxItems
        let maxWait = common.batch.maxWaitSeconds
        let onCorrupt: (String) -> Void = { [logger, name] in logger.error("sink \(name): \($0)") }
        var stuckSince: Double?
        /// Journal bytes decoded since memory was last given back to the system.
        var bytesSinceRelief = 0

        while !isStopping {
            if overLimit(), let moved = shed(&reader, &buffer) {
                skip = 0
                if (try? saveCursor(moved)) != nil { committed = moved }
            }
            // Fill the buffer from the journal.
            if buffer.count < maxItems {
                let entries = reader.read(maxEntries: 64, maxBytes: readAheadBytes, corrupt: onCorrupt)
                for e in entries {
                    bytesSinceRelief += e.payload.count
                    decodeEntry(e, skip: skip, into: &buffer)
                    skip = 0
                }
                if entries.isEmpty && buffer.isEmpty && journal.lastDurableSeq >= reader.nextSeq {
                    // There are entries, but the reader cannot get at them (it said why through
                    // onCorrupt): try again a little later rather than spin.
                    if stuckSince == nil {
                        stuckSince = monotonicSeconds()
                        logger.error("sink \(name): cannot read journal entry \(reader.nextSeq); retrying every second")
                    }
                    if !sleep(1) { break }
                    continue
                }
                stuckSince = nil
                if entries.isEmpty && buffer.isEmpty {
                    if bytesSinceRelief > 8 << 20 {
                        bytesSinceRelief = 0
                        MemoryRelief.giveBack()
                    }
                    // Nothing waiting: note how far the filtered-out entries got us, then wait.
                    let idle = Cursor(seq: reader.nextSeq, skip: 0)
                    if idle != committed && monotonicSeconds() - lastSavedAt > 1 {
                        if (try? saveCursor(idle)) != nil {
                            committed = idle
                            lastSavedAt = monotonicSeconds()
                        }
                    }
                    journal.waitForEntries(after: reader.nextSeq - 1, timeout: 0.5)
                    continue
                }
                if !entries.isEmpty && buffer.count < maxItems {
                    // Give concurrent requests a moment to fill the batch, up to max_wait.
                    let deadline = monotonicSeconds() + maxWait
                    while buffer.count < maxItems && !isStopping {
                        let left = deadline - monotonicSeconds()
                        if left <= 0 || !journal.waitForEntries(after: reader.nextSeq - 1, timeout: left) { break }
                        for e in reader.read(maxEntries: 64, maxBytes: readAheadBytes, corrupt: onCorrupt) {
                            decodeEntry(e, skip: 0, into: &buffer)
                        }
                    }
                }
            }
            // Everything read so far may have been filtered out.
            if buffer.isEmpty { continue }
            let batch = buffer.takeFirst(maxItems)
            switch deliver(batch) {
            case .delivered: break
            case .stopping: return
            case .overLimit: continue   // shed at the top of the loop, the batch included
            }
            // Everything before the first record still waiting is done; with nothing waiting,
            // everything the reader consumed is. (A record that two routes deliver to this sink
            // sits in the buffer twice with one position: a batch may end between the copies,
            // so the position of the last delivered record would skip the second.)
            let cursor = buffer.isEmpty ? Cursor(seq: reader.nextSeq, skip: 0)
                                        : Cursor(seq: buffer.positions[0].seq, skip: buffer.positions[0].index)
            do {
                try saveCursor(cursor)
                committed = cursor
                lastSavedAt = monotonicSeconds()
            } catch {
                logger.error("sink \(name): cannot save its cursor (\(error)); delivered records may be sent again after a restart")
            }
        }
    }

    private func decodeEntry(_ e: JournalEntry, skip: Int, into buffer: inout Pending) {
        let (records, ranges) = CanonicalCodec.decodeLinesWithRanges(e.payload, parser: parser) { line, error, range in
            // Only a damaged disk or a bug gets here: the line is kept, not dropped.
            deadLetters.keep(line: e.payload[range], reason: "journal entry \(e.seq) line \(line) is not a canonical record: \(error)")
        }
        buffer.records.reserveCapacity(buffer.count + records.count)
        buffer.lines.reserveCapacity(buffer.count + records.count)
        buffer.positions.reserveCapacity(buffer.count + records.count)
        for index in skip..<max(skip, records.count) {
            var delivered = false
            let position = Position(seq: e.seq, index: index, entryCount: records.count)
            for route in routes where route.takes(receiver: records[index].receiver) {
                if let out = route.apply(records[index]) {
                    let line = route.keepsRecordsUnchanged ? ranges.map { e.payload[$0[index]] } : nil
                    buffer.append(out, line: line, at: position)
                    delivered = true
                }
            }
            if !delivered { metrics.filtered.add(1, ordering: .relaxed) }
        }
    }

    enum Delivery {
        case delivered
        case stopping
        /// Gave up on the batch: the sink is over its drop_oldest limit.
        case overLimit
    }

    /// Writes a batch until every record is accepted or rejected (or the sink is stopped, or
    /// it must shed its oldest records).
    private func deliver(_ batch: Pending) -> Delivery {
        let outcome = delivery.deliver(records: batch.records, lines: batch.lines,
                                       wait: { [self] seconds in sleep(seconds) },
                                       abandon: { [self] in overLimit() })
        switch outcome {
        case .delivered: return .delivered
        case .stopped: return .stopping
        case .abandoned: return .overLimit
        }
    }
}

