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
    /// Called after the cursor was saved, so the journal can drop segments every sink has passed.
    var onCommit: (@Sendable () -> Void)?
    private var rng = SystemRandomNumberGenerator()

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
    }

    var cursorPath: String { FileIO.join(dir, "cursor") }
    var deadLetterPath: String { FileIO.join(dir, "dead-letters.ndjson") }

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
        metrics.cursorSeq.store(c.seq, ordering: .relaxed)
        onCommit?()
    }

    public func start() throws(IOError) {
        let cursor = try loadCursor()
        metrics.cursorSeq.store(cursor.seq, ordering: .relaxed)
        let box = Unmanaged.passRetained(DrainerBox(self, cursor))
        var t = pthread_t()
        let rc = pthread_create(&t, nil, { raw in
            let box = Unmanaged<DrainerBox>.fromOpaque(raw!).takeRetainedValue()
            box.drainer.run(from: box.cursor)
            return nil
        }, box.toOpaque())
        if rc != 0 {
            box.release()
            throw IOError("pthread_create", name, code: rc)
        }
        thread = t
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

    struct Item {
        var record: CanonicalRecord
        /// The record's journal line, when no transform changed it.
        var line: ArraySlice<UInt8>?
        var seq: UInt64
        var index: Int
        var entryCount: Int
    }

    /// How much journal a drainer reads ahead of its sink: bounds its memory.
    let readAheadBytes = 4 << 20

    func run(from start: Cursor) {
        let reader = journal.makeReader(from: start.seq)
        var skip = start.skip
        var buffer: [Item] = []
        var bufferHead = 0
        var committed = start
        var lastSavedAt = monotonicSeconds()
        let maxItems = common.batch.maxItems
        let maxWait = common.batch.maxWaitSeconds

        while !isStopping {
            // Fill the buffer from the journal.
            if buffer.count - bufferHead < maxItems {
                let entries = reader.read(maxEntries: 64, maxBytes: readAheadBytes, corrupt: { [logger, name] in
                    logger.error("sink \(name): \($0)")
                })
                for e in entries {
                    decodeEntry(e, skip: skip, into: &buffer)
                    skip = 0
                }
                if entries.isEmpty && buffer.count == bufferHead {
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
                if entries.isEmpty == false && buffer.count - bufferHead < maxItems {
                    // Give concurrent requests a moment to fill the batch, up to max_wait.
                    let deadline = monotonicSeconds() + maxWait
                    while buffer.count - bufferHead < maxItems && !isStopping {
                        let left = deadline - monotonicSeconds()
                        if left <= 0 || !journal.waitForEntries(after: reader.nextSeq - 1, timeout: left) { break }
                        for e in reader.read(maxEntries: 64, maxBytes: readAheadBytes) { decodeEntry(e, skip: 0, into: &buffer) }
                    }
                }
            }
            let end = min(buffer.count, bufferHead + maxItems)
            if end == bufferHead {
                // Everything read so far was filtered out.
                continue
            }
            let batch = Array(buffer[bufferHead..<end])
            guard deliver(batch) else { break }
            bufferHead = end
            let last = batch[batch.count - 1]
            let next = last.index + 1 >= last.entryCount ? Cursor(seq: last.seq + 1, skip: 0)
                                                         : Cursor(seq: last.seq, skip: last.index + 1)
            // When the rest of the buffer is empty, everything the reader consumed is done.
            let cursor = bufferHead == buffer.count && next.skip == 0 ? Cursor(seq: reader.nextSeq, skip: 0) : next
            do {
                try saveCursor(cursor)
                committed = cursor
                lastSavedAt = monotonicSeconds()
            } catch {
                logger.error("sink \(name): cannot save its cursor (\(error)); delivered records may be sent again after a restart")
            }
            if bufferHead == buffer.count {
                buffer.removeAll(keepingCapacity: true)
                bufferHead = 0
            } else if bufferHead > 4096 {
                buffer.removeFirst(bufferHead)
                bufferHead = 0
            }
        }
    }

    private func decodeEntry(_ e: JournalEntry, skip: Int, into buffer: inout [Item]) {
        var index = 0
        let (records, ranges) = CanonicalCodec.decodeLinesWithRanges(e.payload, parser: parser) { [logger, name] line, error in
            logger.error("sink \(name): journal entry \(e.seq) line \(line) is not a canonical record: \(error)")
        }
        for r in records {
            defer { index += 1 }
            if index < skip { continue }
            var delivered = false
            for route in routes where route.takes(receiver: r.receiver) {
                if let out = route.apply(r) {
                    let line = route.keepsRecordsUnchanged ? ranges.map { e.payload[$0[index]] } : nil
                    buffer.append(Item(record: out, line: line, seq: e.seq, index: index, entryCount: records.count))
                    delivered = true
                }
            }
            if !delivered { metrics.filtered.add(1, ordering: .relaxed) }
        }
    }

    /// Writes a batch until every record is accepted or rejected. Returns false only when stopping.
    private func deliver(_ batch: [Item]) -> Bool {
        var pending = batch
        var attempt = 0
        while !pending.isEmpty {
            if isStopping { return false }
            let result = sink.write(SinkBatch(records: pending.map(\.record), lines: pending.map(\.line)))
            metrics.batches.add(1, ordering: .relaxed)
            var retryAfter: Double?
            var reason = ""
            var stillPending: [Item] = []
            switch result {
            case .accepted:
                metrics.sent.add(pending.count, ordering: .relaxed)
            case .keep(let why, let after):
                stillPending = pending
                reason = why
                retryAfter = after
            case .perRecord(let outcomes):
                for (item, outcome) in zip(pending, outcomes) {
                    switch outcome {
                    case .accepted:
                        metrics.sent.add(1, ordering: .relaxed)
                    case .keep(let why):
                        stillPending.append(item)
                        reason = why
                    case .rejected(let why):
                        deadLetter(item.record, reason: why)
                    }
                }
                if outcomes.count < pending.count {
                    stillPending.append(contentsOf: pending[outcomes.count...])
                    reason = "the sink answered for fewer records than it was given"
                }
            }
            pending = stillPending
            if pending.isEmpty {
                if attempt > 0 {
                    logger.info("sink \(name): delivering again after \(attempt) failed attempt(s)")
                    metrics.lastError = nil
                }
                return true
            }
            metrics.kept.add(pending.count, ordering: .relaxed)
            metrics.lastError = reason
            attempt += 1
            let cap = min(common.retry.maxSeconds, common.retry.initialSeconds * pow(2, Double(min(attempt - 1, 30))))
            let wait = retryAfter ?? Double.random(in: 0...cap, using: &rng)
            logger.warning("sink \(name): \(reason); \(pending.count) record(s) kept, retrying in \(formatSeconds(wait))")
            if !sleep(max(wait, 0.001)) { return false }
        }
        return true
    }

    private func deadLetter(_ r: CanonicalRecord, reason: String) {
        metrics.rejected.add(1, ordering: .relaxed)
        var w = JSONWriter(capacity: 512)
        w.beginObject()
        w.key("time"); w.string(SystemClock().now().rfc3339())
        w.key("sink"); w.string(name)
        w.key("reason"); w.string(reason)
        w.key("record")
        var line = JSONWriter(capacity: 256)
        CanonicalCodec.encode(r, into: &line)
        w.raw(Array(line.bytes.dropLast()))
        w.endObject()
        w.newline()
        do {
            try FileIO.append(deadLetterPath, w.bytes)
            logger.warning("sink \(name): a \(r.type) record (uuid \(r.uuid)) was rejected and is kept in \(deadLetterPath): \(reason)")
        } catch {
            logger.error("sink \(name): cannot write a dead letter (\(error)); the record stays in the journal")
        }
    }
}

final class DrainerBox {
    let drainer: SinkDrainer
    let cursor: SinkDrainer.Cursor
    init(_ d: SinkDrainer, _ c: SinkDrainer.Cursor) {
        drainer = d
        cursor = c
    }
}

func formatSeconds(_ s: Double) -> String {
    s < 1 ? "\(Int(s * 1000)) ms" : s < 120 ? "\(Int(s.rounded())) s" : "\(Int((s / 60).rounded())) min"
}
