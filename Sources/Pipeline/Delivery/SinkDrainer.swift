import CanonicalJSON
import FastJSON
import Glibc
import HealthgateCore
import Posix
import SinkKit
import Synchronization

/// One sink's queue over the journal, and the owner of the sink: its thread opens the sink,
/// reads durable entries from the sink's own cursor, runs the routes that lead to the sink
/// (with this sink's transform instances), writes batches, retries with backoff and full
/// jitter, sends rejected records to dead letters, and commits the cursor — with the
/// transforms' state — after each success. It also delivers what `replay --sink` handed to the
/// sink's inbox. A sink that is down holds back nothing but itself. See JOURNAL.md and QUEUES.md.
public final class SinkDrainer: Sendable {
    public let name: String
    let built: BuiltSink
    let routes: [Route]
    let journal: Journal
    /// `sinks/<name>/inbox`: records handed to this sink alone (`replay --sink` beside `serve`).
    public let inbox: Journal?
    let dataDir: String
    let dir: String
    let logger: Logger
    let clock: any WaitClock
    let timeZones: any TimeZoneLookup
    public let metrics: SinkMetrics
    let cursors: CursorStore
    /// Called after the cursor was saved, so the journal can drop segments every sink has passed.
    let onCommit: @Sendable () -> Void
    /// How long `stop` waits for the write in progress and `close`.
    let shutdownDeadline: Double
    private let wake = Monitor()
    private let stopping = Atomic<Bool>(false)
    private let finished = Atomic<Bool>(false)
    private let thread = Locked<pthread_t?>(nil)
    private let startCursor = Locked<CursorStore.Committed?>(nil)

    /// `dead_letters.max_bytes`: what the records this sink's destination rejects may take.
    let deadLetterBytes: Int

    public init(name: String, built: BuiltSink, routes: [Route], journal: Journal, inbox: Journal? = nil, dataDir: String,
                logger: Logger, clock: any WaitClock = SystemClock(), timeZones: any TimeZoneLookup = SystemTimeZones(),
                metrics: SinkMetrics? = nil, shutdownDeadline: Double = 10, deadLetterBytes: Int = DeadLetters.defaultMaxBytes,
                onCommit: @escaping @Sendable () -> Void = {}) {
        self.deadLetterBytes = deadLetterBytes
        self.name = name
        self.built = built
        self.routes = routes
        self.journal = journal
        self.inbox = inbox
        self.dataDir = dataDir
        self.dir = SinkDrainer.stateDirectory(sink: name, dataDir: dataDir)
        self.logger = logger
        self.clock = clock
        self.timeZones = timeZones
        self.metrics = metrics ?? SinkMetrics(name: name)
        self.cursors = CursorStore(path: FileIO.join(dir, "cursor"))
        self.onCommit = onCommit
        self.shutdownDeadline = shutdownDeadline
    }

    public static func stateDirectory(sink: String, dataDir: String) -> String {
        FileIO.join(FileIO.join(dataDir, "sinks"), sink)
    }

    /// The committed journal cursor (tests and `status`).
    public func loadCursor() throws(IOError) -> Cursor {
        try FileIO.makeDirectories(dir, mode: 0o700)
        return try cursors.load { logger.error("sink \(name): \($0)") }.journal
    }

    func commit(_ c: CursorStore.Committed) throws(IOError) {
        try cursors.save(c)
        metrics.cursorSkip.store(c.journal.skip, ordering: .relaxed)
        metrics.cursorSeq.store(c.journal.seq, ordering: .relaxed)
        metrics.inboxSeq.store(c.inbox.seq, ordering: .relaxed)
        onCommit()
    }

    /// Reads the committed position and starts the sink's thread, which opens the sink.
    public func start() throws(IOError) {
        try FileIO.makeDirectories(dir, mode: 0o700)
        var committed = try cursors.load { logger.error("sink \(name): \($0)") }
        let newest = journal.lastDurableSeq
        if committed.journal.seq > newest + 1 {
            // The journal was replaced or restored from an older copy: waiting for our old
            // position would skip everything it holds.
            let first = journal.segmentFirstSeqs.first ?? 1
            logger.error("sink \(name): its cursor (entry \(committed.journal.seq)) is ahead of the journal (newest entry "
                         + "\(newest)); the journal was replaced, so the sink starts again from entry \(first)")
            committed.journal = Cursor(seq: first, skip: 0)
            committed.states = [:]
            try commit(committed)
        }
        metrics.cursorSeq.store(committed.journal.seq, ordering: .relaxed)
        metrics.cursorSkip.store(committed.journal.skip, ordering: .relaxed)
        metrics.inboxSeq.store(committed.inbox.seq, ordering: .relaxed)
        let note = CrashNote.of(sink: name, directory: dir)
        let pause = crashGuard.check(note: note, cursor: committed.journal, now: clock.now(), logger: logger)
        startCursor.withLock { $0 = committed }
        let first = committed
        switch startThread({ [self] in
            // This thread and those it starts are the sink's: a crash on them is noted.
            CrashAttribution.setSlot(note.slot)
            var start = first
            if let pause, !waitWhilePaused(pause, committed: &start) {
                wake.withLock {
                    finished.store(true, ordering: .releasing)
                    wake.broadcast()
                }
                return
            }
            DrainLoop(self, from: start, note: note).run()
            wake.withLock {
                finished.store(true, ordering: .releasing)
                wake.broadcast()
            }
        }) {
        case .success(let t): thread.withLock { $0 = t }
        case .failure(let e): throw IOError("pthread_create", name, code: e.code)
        }
    }

    /// The crash-loop guard's files of this sink (`CrashGuard`).
    public var crashGuard: CrashGuard { CrashGuard(sink: name, sinkDirectory: dir) }

    /// A paused sink's thread: waits, without opening the sink, until `healthgate resume`
    /// asks (checked every second) or the drainer stops (false). With `--skip`, the records
    /// the sink was working on go to its dead letters and its cursor moves past them.
    func waitWhilePaused(_ pause: CrashGuard.Pause, committed: inout CursorStore.Committed) -> Bool {
        metrics.paused = pause
        logger.error("sink \(name) is paused: the process died on it \(pause.crashes) starts in a row (\(pause.signalName)) "
                     + "at journal entry \(pause.from.seq), record \(pause.from.skip); its records wait in the journal and "
                     + "every other sink goes on. \(CrashGuard.howToResume(name))")
        let guardFiles = crashGuard
        while true {
            if let skip = guardFiles.resumeAsked() {
                if skip {
                    guard let kept = deadLetterRange(from: pause.from, to: pause.to,
                                                     reason: "skipped by `healthgate resume --skip`: the process died on this "
                                                         + "sink while it worked on these records") else {
                        if !waitForResume(5) { return false }
                        continue
                    }
                    committed.journal = pause.to
                    do {
                        try commit(committed)
                    } catch {
                        logger.error("sink \(name): cannot save its cursor past the skipped records (\(error)); still paused")
                        if !waitForResume(1) { return false }
                        continue
                    }
                    logger.warning("sink \(name): resumed; \(kept) record(s) it was working on are in its dead letters "
                                   + "(\(DeadLetters.path(sink: name, dataDir: dataDir)))")
                } else {
                    logger.warning("sink \(name): resumed; it tries its records again from journal entry \(pause.from.seq)")
                }
                guardFiles.clear()
                metrics.paused = nil
                return true
            }
            if !waitForResume(1) { return false }
        }
    }

    /// Waits up to `seconds` of real time, waking on stop. False when stopping.
    private func waitForResume(_ seconds: Double) -> Bool {
        wake.withLock {
            if !isStopping { wake.wait(seconds: seconds) }
            return !isStopping
        }
    }

    /// The journal's records from `from` up to `to`, each into the dead letters as it is;
    /// returns how many (nil when they could not be written).
    func deadLetterRange(from: Cursor, to: Cursor, reason: String) -> Int? {
        DeadLetters.keepJournalRange(journal: journal, from: from, to: to,
                                     into: DeadLetters(sink: name, dataDir: dataDir, metrics: metrics, logger: logger, clock: clock),
                                     reason: reason, logger: logger)
    }

    /// Asks the drainer to stop after the write in progress, without waiting (so that a
    /// service stops all its sinks at once, within one deadline).
    public func requestStop() {
        wake.withLock {
            stopping.store(true, ordering: .releasing)
            wake.broadcast()
        }
    }

    /// Asks the drainer to stop after the write in progress, and waits for it (and for the
    /// sink's `close`) up to the shutdown deadline.
    public func stop(within deadline: Double? = nil) {
        let shutdownDeadline = deadline ?? self.shutdownDeadline
        guard let t = thread.withLock({ t -> pthread_t? in defer { t = nil }; return t }) else { return }
        let done: Bool = wake.withLock {
            stopping.store(true, ordering: .releasing)
            wake.broadcast()
            let until = monotonicSeconds() + shutdownDeadline
            while !finished.load(ordering: .acquiring) {
                let left = until - monotonicSeconds()
                if left <= 0 { break }
                wake.wait(seconds: left)
            }
            return finished.load(ordering: .acquiring)
        }
        if done {
            pthread_join(t, nil)
        } else {
            pthread_detach(t)
            logger.error("sink \(name): its write did not end within \(formatSeconds(shutdownDeadline)) of the stop; left "
                         + "behind (what it had not delivered goes out after the next start)")
        }
    }

    var isStopping: Bool { stopping.load(ordering: .acquiring) }

    /// Sleeps up to `seconds` (on the drainer's clock), waking early on stop. False when stopping.
    func sleep(_ seconds: Double) -> Bool {
        wake.withLock {
            if !isStopping { clock.wait(on: wake, seconds: seconds) }
            return !isStopping
        }
    }

    /// How much journal a drainer reads at once: bounds its memory.
    static let readBytes = 2 << 20

    /// For `when_full: drop_oldest`: the limit past which the oldest waiting records are dropped.
    var dropOldestAbove: Int? {
        guard let max = built.common.queue.max_bytes?.bytes, built.common.queue.when_full == .drop_oldest else { return nil }
        return Int(max)
    }

    /// True when the sink is over its drop_oldest limit (and so should shed).
    func overLimit() -> Bool {
        guard let max = dropOldestAbove else { return false }
        return journal.backlog(fromSeq: metrics.cursorSeq.load(ordering: .relaxed),
                               skip: metrics.cursorSkip.load(ordering: .relaxed)).bytes > max
    }
}

/// The drainer's thread: everything here belongs to it (the sink, the transform instances, the
/// records waiting), so none of it is `Sendable`, and none of it needs to be.
///
/// One loop: read journal entries into records, run the routes over them until a batch is
/// full, write the batch (retries and dead letters: `BatchDelivery`), commit the cursor with the
/// transforms' state. While the sink writes, the next entries are read on a helper thread
/// (`ReadAhead`).
final class DrainLoop {
    let d: SinkDrainer
    let routes: SinkRoutes
    let parser = JSONParser()
    let deadLetters: DeadLetters
    var sink: (any Sink)?
    var delivery: BatchDelivery?
    var committed: CursorStore.Committed
    var reader: JournalReader
    var inboxReader: JournalReader?
    /// Journal records read and not yet routed, oldest first, each with where it came from.
    var pending = PendingRecords()
    var lastSavedAt: Double
    var lastProbeAt = -Double.infinity
    var lastIdleAt = -Double.infinity
    /// Journal bytes read since memory was last given back to the system.
    var bytesSinceRelief = 0
    var openAttempts = 0
    // Housekeeping intervals (commits of filtered-out progress, idle calls, probes) run on the
    // real monotonic clock; the drainer's `clock` times what a test must not wait for: backoff.

    /// The sink's own state in the cursor file (route transform keys always hold a `/`).
    static let sinkStateKey = "sink"

    /// Where a crash on this sink's threads finds what it was working on.
    let note: CrashNote?

    init(_ d: SinkDrainer, from start: CursorStore.Committed, note: CrashNote? = nil) {
        self.d = d
        self.note = note
        routes = SinkRoutes(routes: d.routes, sink: d.name, clock: d.clock, timeZones: d.timeZones, logger: d.logger)
        routes.restore(start.states, logger: d.logger)
        deadLetters = DeadLetters(sink: d.name, dataDir: d.dataDir, metrics: d.metrics, logger: d.logger, clock: d.clock,
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
            let context = SinkContext(name: name, dataDir: d.dataDir, stateDir: d.dir, clock: d.clock,
                                      logger: logger.child("sink \(name)"))
            do {
                let s = try d.built.open(context)
                if let state = committed.states[DrainLoop.sinkStateKey] {
                    do {
                        try s.restoreState(state)
                    } catch {
                        logger.error("sink \(name): its saved state cannot be read (\(error)); it starts empty")
                    }
                }
                sink = s
                delivery = BatchDelivery(sink: s, name: name, retry: d.built.common.retry, metrics: metrics,
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
            joinReadAhead()
            sink?.close()
            sink = nil
        }
        guard openSink() else { return }
        var skip = committed.journal.skip
        var stuckSince: Double?
        while !d.isStopping {
            if d.overLimit() {
                shed()
                skip = 0
            }
            // What `replay --sink` handed to this sink goes out between journal batches.
            if !deliverInbox() { return }
            // Read until a batch's worth waits (giving concurrent requests up to max_wait to
            // fill it), or the journal has no more.
            let readAny = fill(skip: skip)
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
            // Route the oldest records until a batch is full: the transforms have then seen
            // exactly the records before the new cursor, which makes committing their state
            // with it right.
            var batch: [Record] = []
            var filtered = 0
            while let r = pending.first, batch.count < maxItems {
                pending.removeFirst()
                if !routes.process(r.record, into: &batch) { filtered += 1 }
            }
            routes.flush(into: &batch)
            if filtered > 0 { metrics.filtered.add(filtered, ordering: .relaxed) }
            let cursor = pendingCursor()
            note?.work(from: committed.journal, to: cursor)
            if batch.isEmpty && monotonicSeconds() - lastSavedAt < 1 { continue }   // all filtered out
            if !batch.isEmpty {
                // The next entries are read while the sink writes this batch.
                if pending.count < maxItems { startReadAhead() }
                switch deliver(batch) {
                case .delivered: break
                case .stopped: return
                case .abandoned: continue   // shed at the top of the loop, the batch included
                }
            }
            var next = committed
            next.journal = cursor
            save(next)
        }
    }

    /// Reads journal entries into `pending` until a batch's worth waits, waiting up to
    /// `max_wait` for more when some came; true when any entry was read.
    func fill(skip: Int) -> Bool {
        joinReadAhead()
        guard pending.count < maxItems else { return true }
        let onCorrupt: (String) -> Void = { [logger, name] in logger.error("sink \(name): \($0)") }
        var skip = skip
        var readAny = false
        let deadline = monotonicSeconds() + d.built.common.batch.maxWaitSeconds
        while pending.count < maxItems && !d.isStopping {
            let entries = reader.read(maxEntries: 64, maxBytes: SinkDrainer.readBytes, corrupt: onCorrupt)
            if entries.isEmpty {
                let left = deadline - monotonicSeconds()
                if !readAny || left <= 0 || !d.journal.waitForEntries(after: reader.nextSeq - 1, timeout: left) { break }
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

    /// Where the journal records not yet routed begin: the cursor past every batch made so far.
    func pendingCursor() -> Cursor {
        if let first = pending.first { return Cursor(seq: first.seq, skip: first.index) }
        joinReadAhead()
        return pending.first.map { Cursor(seq: $0.seq, skip: $0.index) } ?? Cursor(seq: reader.nextSeq, skip: 0)
    }

    // MARK: Reading ahead

    /// The next entries read into records on a helper thread while the sink writes: fork and
    /// join. Between `startReadAhead` and `joinReadAhead` only the helper touches `reader`; the
    /// records it read join `pending` (and the lines that are no records the dead letters) on
    /// this thread.
    final class ReadAhead {
        let reader: JournalReader
        let want: Int
        let onCorrupt: (String) -> Void
        var read = PendingRecords()
        var bad: [(ArraySlice<UInt8>, String)] = []
        var bytes = 0
        var running: Forked<Void>?

        init(reader: JournalReader, want: Int, onCorrupt: @escaping (String) -> Void) {
            self.reader = reader
            self.want = want
            self.onCorrupt = onCorrupt
        }

        func run() {
            while read.count < want {
                let entries = reader.read(maxEntries: 64, maxBytes: SinkDrainer.readBytes, corrupt: onCorrupt)
                if entries.isEmpty { return }
                for e in entries {
                    bytes += e.payload.count
                    read.add(e, skip: 0) { bad.append(($0, $1)) }
                }
            }
        }
    }

    var readingAhead: ReadAhead?

    func startReadAhead() {
        guard readingAhead == nil, d.journal.lastDurableSeq >= reader.nextSeq else { return }
        let job = ReadAhead(reader: reader, want: maxItems - pending.count) { [logger, name] in logger.error("sink \(name): \($0)") }
        let slot = note?.aheadSlot
        job.running = Forked {
            // A crash here is the read-ahead's: what it read is what it was working on.
            if let slot { CrashAttribution.setSlot(slot) }
            job.run()
        }
        readingAhead = job
    }

    func joinReadAhead() {
        guard let job = readingAhead else { return }
        readingAhead = nil
        job.running?.join()
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
                switch deliver(out) {
                case .delivered:
                    var next = committed
                    next.journal = Cursor(seq: reader.nextSeq, skip: 0)
                    save(next)
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
                var last = first
                while let r = read.first, batch.count < maxItems {
                    read.removeFirst()
                    batch.append(r.record)
                    last = r
                }
                if deliver(batch) == .stopped { return false }
                var next = committed
                next.inbox = read.first.map { Cursor(seq: e.seq, skip: $0.index) } ?? Cursor(seq: e.seq, skip: last.index + 1)
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
        joinReadAhead()   // the reader is the read-ahead's while it runs
        guard let max = d.dropOldestAbove else { return }
        let before = d.journal.backlog(fromSeq: metrics.cursorSeq.load(ordering: .relaxed),
                                       skip: metrics.cursorSkip.load(ordering: .relaxed))
        let keepFrom = d.journal.seqKeeping(lastBytes: max)
        let after = d.journal.backlog(fromSeq: keepFrom, skip: 0)
        let dropped = before.records - after.records
        guard dropped > 0 else { return }
        metrics.dropped.add(dropped, ordering: .relaxed)
        logger.warning("sink \(name): \(before.bytes) bytes waiting, over queue.max_bytes (\(max)) with drop_oldest: "
                       + "dropped the \(dropped) oldest record(s) unsent")
        pending = PendingRecords()
        reader = d.journal.makeReader(from: keepFrom)
        var next = committed
        next.journal = Cursor(seq: keepFrom, skip: 0)
        save(next)
    }

    /// Commits the position with the transforms' and the sink's state as they are now.
    func save(_ next: CursorStore.Committed) {
        var c = next
        c.states = [:]
        for (k, v) in routes.saveState() { c.states[k] = v }
        if let state = sink?.saveState() { c.states[DrainLoop.sinkStateKey] = state }
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
    func deliver(_ batch: [Record]) -> BatchDelivery.Outcome {
        guard delivery != nil else { return .stopped }
        var start = 0
        while start < batch.count {
            let end = min(batch.count, start + maxItems)
            let outcome = delivery!.deliver(Array(batch[start..<end]), wait: { [d] seconds in d.sleep(seconds) },
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
    private var items: [(record: Record, seq: UInt64, index: Int)] = []
    /// Items before this were taken (dropped once they are most of the array).
    private var head = 0

    var count: Int { items.count - head }
    var isEmpty: Bool { count == 0 }
    var first: (record: Record, seq: UInt64, index: Int)? { isEmpty ? nil : items[head] }
    var last: (record: Record, seq: UInt64, index: Int)? { isEmpty ? nil : items.last }

    /// The records of entry `e` from its line `skip` on; a line that is no canonical record
    /// goes to `bad` with why (only a damaged disk or a bug gets there: the line is kept).
    mutating func add(_ e: JournalEntry, skip: Int, bad: (ArraySlice<UInt8>, String) -> Void) {
        for (r, index) in Record.records(in: e.payload, from: skip, bad: { index, line, error in
            bad(line, "journal entry \(e.seq) line \(index + 1) is not a canonical record: \(error)")
        }) {
            items.append((r, e.seq, index))
        }
    }

    mutating func removeFirst() {
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024 && head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
    }

    /// Appends `other`'s records after these and leaves it empty.
    mutating func append(_ other: inout PendingRecords) {
        for i in other.head..<other.items.count { items.append(other.items[i]) }
        other = PendingRecords()
    }
}
