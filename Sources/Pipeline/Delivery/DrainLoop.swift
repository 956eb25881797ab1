import CanonicalJSON
import FastJSON
import Glibc
import HealthgateCore
import Posix
import SinkKit

/// The drainer's thread: everything here belongs to it (the sink, the transform instances, the
/// records waiting), so none of it is `Sendable`, and none of it needs to be.
///
/// One loop: read journal entries into records, run the routes over them until a batch is
/// full, write the batch (retries and dead letters: `BatchDelivery`), commit the cursor with the
/// transforms' state as it was for exactly the records before it. The one overlap (`Ahead`):
/// while the sink writes a batch, the next one — already routed — is prepared for it (the
/// sink's `prepare`: its encoding) and the journal's next entries are read, on a helper thread.
final class DrainLoop {
    let d: SinkDrainer
    let routes: SinkRoutes
    let deadLetters: DeadLetters
    var sink: (any Sink)?
    var delivery: BatchDelivery?
    var committed: CursorStore.Committed
    /// The routes' state as it was for the records before the cursor committed next: routes
    /// run ahead of the batch being written, so their state now may hold more.
    var routeStates: [String: [UInt8]]
    var reader: JournalReader
    var inboxReader: JournalReader?
    /// Journal records read and not yet routed, oldest first, each with where it came from.
    var pending = PendingRecords()
    /// The helper's work while a batch is written, and the batch routed ahead of it.
    var ahead: Ahead?
    var next: Batch?
    var lastSavedAt: Double
    var lastProbeAt = -Double.infinity
    var lastIdleAt = -Double.infinity
    /// Journal bytes read since memory was last given back to the system.
    var bytesSinceRelief = 0
    var openAttempts = 0
    // Housekeeping intervals (commits of filtered-out progress, idle calls, probes) run on the
    // real monotonic clock; the drainer's `clock` times what a test must not wait for: backoff.

    /// Where a crash on this sink's threads finds what it was working on.
    let note: CrashNote?

    /// Records routed for one write: the cursor past them, and the routes' state once they
    /// were routed (what is committed with that cursor).
    struct Batch {
        var records: [Record]
        var cursor: Cursor
        var states: [String: [UInt8]]
        var prepared: (any Sendable)?
    }

    init(_ d: SinkDrainer, from start: CursorStore.Committed, note: CrashNote? = nil) {
        self.d = d
        self.note = note
        routes = SinkRoutes(routes: d.routes, sink: d.name, clock: d.clock, timeZones: d.timeZones, logger: d.logger)
        routes.restore(start.states, logger: d.logger)
        routeStates = routes.states
        deadLetters = DeadLetters(
            sink: d.name, dataDir: d.dataDir, metrics: d.metrics, logger: d.logger, clock: d.clock,
            maxBytes: d.deadLetterBytes)
        committed = start
        reader = d.journal.makeReader(from: start.journal.seq)
        inboxReader = d.inbox?.makeReader(from: start.inbox.seq)
        lastSavedAt = monotonicSeconds()
    }

    var name: String { d.name }
    var logger: Logger { d.logger }
    var metrics: SinkMetrics { d.metrics }
    var maxItems: Int { d.built.common.batch.maxItems }

    /// Opens the sink, trying again with backoff until it opens or the drainer stops.
    func openSink() -> Bool {
        while sink == nil {
            if d.isStopping { return false }
            let context = SinkContext(
                name: name, dataDir: d.dataDir, stateDir: d.dir, clock: d.clock,
                logger: logger.child("sink \(name)"))
            do {
                let s = try d.built.open(context)
                if let state = committed.states[SinkDrainer.sinkStateKey] {
                    do {
                        try s.restoreState(state, of: .all)
                    } catch {
                        logger.error("sink \(name): its saved state cannot be read (\(error)); it starts empty")
                    }
                }
                sink = s
                delivery = BatchDelivery(
                    sink: s, name: name, retry: d.built.common.retry, metrics: metrics,
                    deadLetters: deadLetters, logger: logger, clock: d.clock)
                if openAttempts > 0 { logger.info("sink \(name): opened after \(openAttempts) failed attempt(s)") }
                metrics.lastError = nil
                probe()
            } catch {
                openAttempts += 1
                let pause = d.built.common.retry.cap(afterFailures: openAttempts)
                metrics.lastError = "cannot open: \(error)"
                metrics.reachability = .unreachable("\(error)")
                logger.error("sink \(name): cannot open (\(error)); trying again in \(formatSeconds(pause))")
                if !d.sleep(pause) { return false }
            }
        }
        return true
    }

    func probe() {
        guard let sink else { return }
        lastProbeAt = monotonicSeconds()
        var r = sink.probe()
        // A destination that answers but refuses the writes stays failing until a write goes through.
        if case .failing = metrics.reachability, r == .reachable { r = metrics.reachability }
        if r != metrics.reachability {
            if case .unreachable(let why) = r { logger.warning("sink \(name): its destination is unreachable: \(why)") }
        }
        metrics.reachability = r
        metrics.report = sink.report()
    }

    func run() {
        defer {
            joinAhead()
            sink?.close()
            sink = nil
        }
        guard openSink() else { return }
        var skip = committed.journal.skip
        var stuckSince: Double?
        while !d.isStopping {
            joinAhead()
            if d.overLimit() {
                shed()
                skip = 0
            }
            // What `replay --sink` handed to this sink goes out between journal batches.
            if !deliverInbox() { return }
            let batch: Batch
            if let made = next {
                batch = made
                next = nil
            } else {
                // Read until a batch's worth waits (giving concurrent requests up to max_wait to
                // fill it), or the journal has no more.
                let readAny = fill(skip: skip, wait: true)
                skip = 0
                if pending.isEmpty {
                    if !readAny && d.journal.lastDurableSeq >= reader.nextSeq {
                        // There are entries, but the reader cannot get at them (it said why): try
                        // again a little later rather than spin.
                        if stuckSince == nil {
                            stuckSince = monotonicSeconds()
                            logger.error("sink \(name): cannot read journal entry \(reader.nextSeq); retrying every second")
                        }
                        if !d.sleep(1) { return }
                    } else if !readAny {
                        if !idle() { return }
                    }
                    continue
                }
                stuckSince = nil
                batch = makeBatch()
            }
            note?.work(from: committed.journal, to: batch.cursor)
            if batch.records.isEmpty {
                // All filtered out: committed now and then, not per batch.
                if monotonicSeconds() - lastSavedAt >= 1 { commit(batch) }
                continue
            }
            // The next batch, routed now from what waits, is prepared while this one is written.
            _ = fill(skip: 0, wait: false)
            if !pending.isEmpty {
                next = makeBatch()
                note?.work(from: committed.journal, to: next!.cursor)
            }
            startAhead()
            switch deliver(batch.records, prepared: batch.prepared) {
            case .delivered: commit(batch)
            case .stopped: return
            case .abandoned: continue // shed at the top of the loop, the batch included
            }
        }
    }

    /// The oldest records routed until a batch is full: the transforms have then seen exactly
    /// the records before its cursor, and their state is taken with it.
    func makeBatch() -> Batch {
        var records: [Record] = []
        var filtered = 0
        while !pending.isEmpty && records.count < maxItems {
            if !routes.process(pending.takeFirst(), into: &records) { filtered += 1 }
        }
        routes.flush(into: &records)
        if filtered > 0 { metrics.filtered.add(filtered, ordering: .relaxed) }
        let cursor = pending.first.map { Cursor(seq: $0.seq, skip: $0.index) } ?? Cursor(seq: reader.nextSeq, skip: 0)
        return Batch(
            records: records, cursor: cursor,
            states: routes.states)
    }

    /// Commits the cursor past `batch`, with the routes' state as it was for it.
    func commit(_ batch: Batch) {
        routeStates = batch.states
        var c = committed
        c.journal = batch.cursor
        save(c)
    }

    /// Reads journal entries into `pending` until a batch's worth waits (with `wait`, up to
    /// `max_wait` for more when some came); true when any entry was read.
    func fill(skip: Int, wait: Bool) -> Bool {
        guard pending.count < maxItems else { return true }
        let onCorrupt: (String) -> Void = { [logger, name] in logger.error("sink \(name): \($0)") }
        var skip = skip
        var readAny = false
        let deadline = monotonicSeconds() + d.built.common.batch.maxWaitSeconds
        while pending.count < maxItems && !d.isStopping {
            let entries = reader.read(maxEntries: 64, maxBytes: SinkDrainer.readBytes, corrupt: onCorrupt)
            if entries.isEmpty {
                let left = deadline - monotonicSeconds()
                if !wait || !readAny || left <= 0 || !d.journal.waitForEntries(after: reader.nextSeq - 1, timeout: left) { break }
                continue
            }
            readAny = true
            note?.work(from: committed.journal, to: Cursor(seq: reader.nextSeq, skip: 0))
            for e in entries {
                pending.add(e, skip: skip) { deadLetters.keep(line: $0, reason: $1) }
                bytesSinceRelief += e.payload.count
                skip = 0
            }
        }
        return readAny
    }

    // MARK: The helper

    /// What a helper thread does while the sink writes a batch (fork before the write, join
    /// after it): prepares the batch routed next for the sink, and reads the journal's next
    /// entries into records. Between the two only the helper touches the journal reader and the
    /// next batch's records; what it read joins `pending` (and its bad lines the dead letters) on
    /// the drainer's thread.
    final class Ahead {
        var prepared: (any Sendable)?
        var read = PendingRecords()
        var bad: [(ArraySlice<UInt8>, String)] = []
        var bytes = 0
        var running: Forked<Void>?

        func run(
            prepare: (@Sendable (SinkBatch) -> any Sendable)?, batch: [Record]?, reader: JournalReader?, want: Int,
            note: CrashNote?, onCorrupt: (String) -> Void
        ) {
            if let prepare, let batch, !batch.isEmpty { prepared = prepare(SinkBatch(records: batch)) }
            guard let reader else { return }
            while read.count < want {
                let entries = reader.read(maxEntries: 64, maxBytes: SinkDrainer.readBytes, corrupt: onCorrupt)
                if entries.isEmpty { return }
                note?.readAhead(to: Cursor(seq: reader.nextSeq, skip: 0))
                for e in entries {
                    bytes += e.payload.count
                    read.add(e, skip: 0) { bad.append(($0, $1)) }
                }
            }
        }
    }

    func startAhead() {
        let reads = pending.count < maxItems && d.journal.lastDurableSeq >= reader.nextSeq
        let prepare = next.flatMap { $0.records.isEmpty ? nil : sink?.prepare }
        guard ahead == nil, reads || prepare != nil else { return }
        let job = Ahead()
        let (batch, reader, want, note) = (next?.records, reads ? reader : nil, maxItems - pending.count, note)
        if let next { note?.readAhead(to: next.cursor) }
        let onCorrupt: (String) -> Void = { [logger, name] in logger.error("sink \(name): \($0)") }
        job.running = Forked {
            // A crash here is the helper's: what it read and prepared is what it was working on.
            if let slot = note?.aheadSlot { CrashAttribution.setSlot(slot) }
            job.run(prepare: prepare, batch: batch, reader: reader, want: want, note: note, onCorrupt: onCorrupt)
        }
        ahead = job
    }

    func joinAhead() {
        guard let job = ahead else { return }
        ahead = nil
        job.running?.join()
        next?.prepared = job.prepared
        for (line, reason) in job.bad { deadLetters.keep(line: line, reason: reason) }
        bytesSinceRelief += job.bytes
        pending.append(&job.read)
        if let last = pending.last { note?.readAhead(to: Cursor(seq: last.seq, skip: last.index + 1)) }
    }

    // MARK: Idle, inbox, shedding, commits

    /// Nothing waits: let the sink and the transforms do what time asks, note how far
    /// filtered-out entries got us, then wait for new entries. False when stopping.
    func idle() -> Bool {
        if bytesSinceRelief > 8 << 20 {
            bytesSinceRelief = 0
            MemoryRelief.giveBack()
        }
        let now = monotonicSeconds()
        if now - lastIdleAt >= 1 {
            lastIdleAt = now
            sink?.idle()
            if let s = sink { metrics.report = s.report() }
            var out: [Record] = []
            routes.tick(now: d.clock.now(), into: &out)
            routes.flush(into: &out)
            if !out.isEmpty {
                let batch = Batch(
                    records: out, cursor: Cursor(seq: reader.nextSeq, skip: 0),
                    states: routes.states)
                switch deliver(out, prepared: nil) {
                case .delivered: commit(batch)
                case .stopped: return false
                case .abandoned: return true
                }
            }
        }
        if now - lastProbeAt >= 30 { probe() }
        let idleCursor = Cursor(seq: reader.nextSeq, skip: 0)
        if idleCursor != committed.journal && now - lastSavedAt > 1 {
            var next = committed
            next.journal = idleCursor
            save(next)
        }
        // What `replay --sink` handed over goes on at once (the wait is on the journal alone).
        if let inbox = d.inbox, let r = inboxReader, inbox.lastDurableSeq >= r.nextSeq { return true }
        d.journal.waitForEntries(after: reader.nextSeq - 1, timeout: 0.5)
        return true
    }

    /// Delivers what waits in the inbox, an entry at a time, committing after each batch.
    /// False when stopping.
    func deliverInbox() -> Bool {
        guard let inbox = d.inbox, let r = inboxReader, inbox.lastDurableSeq >= r.nextSeq else { return true }
        let entries = r.read(maxEntries: 1, maxBytes: SinkDrainer.readBytes) { [logger, name] in
            logger.error("sink \(name) inbox: \($0)")
        }
        for e in entries {
            var read = PendingRecords()
            let skip = committed.inbox.seq == e.seq ? committed.inbox.skip : 0
            read.add(e, skip: skip) { line, reason in deadLetters.keep(line: line, reason: "inbox: \(reason)") }
            while let first = read.first {
                var batch: [Record] = []
                var last = first.index
                while let r = read.first, batch.count < maxItems {
                    last = r.index
                    batch.append(read.takeFirst())
                }
                if deliver(batch, prepared: nil) == .stopped { return false }
                var next = committed
                next.inbox = read.first.map { Cursor(seq: e.seq, skip: $0.index) } ?? Cursor(seq: e.seq, skip: last + 1)
                save(next)
            }
            var next = committed
            next.inbox = Cursor(seq: e.seq + 1, skip: 0)
            save(next)
            inbox.deleteSegments(below: committed.inbox.seq)
        }
        return true
    }

    /// Drops the oldest waiting records so that at most the limit waits, and moves the cursor.
    func shed() {
        guard let max = d.dropOldestAbove else { return }
        let before = d.journal.backlog(
            fromSeq: metrics.cursorSeq.load(ordering: .relaxed),
            skip: metrics.cursorSkip.load(ordering: .relaxed))
        let keepFrom = d.journal.seqKeeping(lastBytes: max)
        let after = d.journal.backlog(fromSeq: keepFrom, skip: 0)
        let dropped = before.records - after.records
        guard dropped > 0 else { return }
        metrics.dropped.add(dropped, ordering: .relaxed)
        logger.warning(
            "sink \(name): \(before.bytes) bytes waiting, over queue.max_bytes (\(max)) with drop_oldest: "
                + "dropped the \(dropped) oldest record(s) unsent")
        pending = PendingRecords()
        if let made = next {
            routeStates = made.states // the routes saw the batch that is dropped
            next = nil
        }
        reader = d.journal.makeReader(from: keepFrom)
        var c = committed
        c.journal = Cursor(seq: keepFrom, skip: 0)
        save(c)
    }

    /// Commits a position with the routes' state as it was for it and the sink's as it is now.
    func save(_ next: CursorStore.Committed) {
        var c = next
        c.states = routeStates
        if let state = sink?.saveState(of: .all) { c.states[SinkDrainer.sinkStateKey] = state }
        do {
            try d.commit(c)
            committed = c
            lastSavedAt = monotonicSeconds()
        } catch {
            logger.error("sink \(name): cannot save its cursor (\(error)); delivered records may be sent again after a restart")
        }
    }

    /// Writes a batch, in writes of at most `batch.max_items` (routes that copy or derive
    /// records can make more than they took), until every record is accepted or rejected (or
    /// the sink is stopped, or it must shed its oldest records).
    func deliver(_ batch: [Record], prepared: (any Sendable)?) -> BatchDelivery.Outcome {
        guard delivery != nil else { return .stopped }
        if batch.count <= maxItems {
            return delivery!.deliver(
                batch, prepared: prepared, wait: { [d] seconds in d.sleep(seconds) },
                abandon: { [d] in d.overLimit() })
        }
        var start = 0
        while start < batch.count {
            let end = min(batch.count, start + maxItems)
            let outcome = delivery!.deliver(
                Array(batch[start..<end]), wait: { [d] seconds in d.sleep(seconds) },
                abandon: { [d] in d.overLimit() })
            if outcome != .delivered { return outcome }
            start = end
        }
        return .delivered
    }
}

/// Journal records read and not yet routed, oldest first, each with the entry it came from and
/// its place among the entry's lines (what a cursor's `skip` counts).
struct PendingRecords {
    /// Each record with the entry it came from and its place; nil once taken.
    private var items: [(record: Record?, seq: UInt64, index: Int)] = []
    /// Items before this were taken (dropped once they are most of the array).
    private var head = 0

    var count: Int { items.count - head }
    var isEmpty: Bool { count == 0 }
    /// Where the oldest and the newest record waiting came from.
    var first: (seq: UInt64, index: Int)? { isEmpty ? nil : (items[head].seq, items[head].index) }
    var last: (seq: UInt64, index: Int)? { isEmpty ? nil : (items[items.count - 1].seq, items[items.count - 1].index) }

    /// The records of entry `e` from its line `skip` on; a line that is no canonical record
    /// goes to `bad` with why (only a damaged disk or a bug gets there: the line is kept).
    mutating func add(_ e: JournalEntry, skip: Int, bad: (ArraySlice<UInt8>, String) -> Void) {
        Record.forEach(
            in: e.payload, from: skip,
            bad: { index, line, error in
                bad(line, "journal entry \(e.seq) line \(index + 1) is not a canonical record: \(error)")
            }
        ) { r, index in items.append((r, e.seq, index)) }
    }

    /// The oldest record, moved out: it is then its holder's alone, and a transform changes it
    /// where it lies.
    mutating func takeFirst() -> Record {
        let r = items[head].record.take()!
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024 && head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
        return r
    }

    /// Appends `other`'s records after these and leaves it empty.
    mutating func append(_ other: inout PendingRecords) {
        if isEmpty {
            swap(&self, &other) // what the helper read, as it lies
        } else {
            for i in other.head..<other.items.count {
                items.append((other.items[i].record.take(), other.items[i].seq, other.items[i].index))
            }
        }
        other = PendingRecords()
    }
}
