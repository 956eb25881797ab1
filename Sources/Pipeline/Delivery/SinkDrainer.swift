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

    /// Whether a drainer of this sink and these routes decodes every field of every record (and
    /// so shares what it decodes with the other sinks: `DecodedEntries.setReaders` counts these).
    public static func readsWholeRecords(_ built: BuiltSink, routes: [Route]) -> Bool {
        SinkRoutes.fieldsRead(routes: routes, sinkReads: built.reads).isAll
    }

    /// Whether a drainer of this sink and these routes takes the records ingest hands over
    /// (`DecodedEntries.setParsingReaders` counts these): one that decodes whole records. One that
    /// reads a few fields walks the lines for them, which costs less than ingest making every
    /// record for it (the file sink by `{device}/{date}`, 1 MB × 8: 2.3 → 1.9 CPU s a million with
    /// ingest writing its lines straight instead), and one that only splits lines reads none.
    public static func takesHandedRecords(_ built: BuiltSink, routes: [Route]) -> Bool {
        readsWholeRecords(built, routes: routes)
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

    /// How much journal a drainer reads ahead of its sink: bounds its memory.
    static let readAheadBytes = 2 << 20
    /// The most records a read-ahead decodes while the sink writes: a file sink's whole batch;
    /// a larger batch (postgres: 20,000) is finished by the drainer itself. (The read-ahead
    /// decoding a postgres batch whole held 25 MB more at peak.)
    static let readAheadRecords = 10_000

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

/// The drainer's thread: everything here belongs to it (the sink, the transform instances,
/// the parser), so none of it is `Sendable`, and none of it needs to be.
final class DrainLoop {
    let d: SinkDrainer
    let routes: SinkRoutes
    let parser = JSONParser()
    let deadLetters: DeadLetters
    var sink: (any Sink)?
    var delivery: BatchDelivery?
    /// The sink, when batches go to it pipelined (see `PipelinedSink`): it keeps batches in
    /// flight, and routes hold no state.
    var pipelined: (any PipelinedSink)?
    /// Batches begun and not finished, oldest first, each with the cursor past it.
    var flights: [Flight] = []
    /// The read-ahead decoding while the sink writes: joined right after a `write`; pipelined,
    /// only once its records are wanted (or the reader, the parser or the journal's position are).
    var decoding: ReadAhead?
    /// Pipelined: the cursor past the batches delivered since the last commit, committed at
    /// most every `commitEvery` while batches flow (each commit is two fsyncs: per 1,000-record
    /// http batch they held the sink to one batch at a time), and whenever nothing is in flight.
    var uncommitted: CursorStore.Committed?
    static let commitEvery = 0.05

    struct Flight {
        var batch: RoutedRecords
        var cursor: Cursor
    }
    var committed: CursorStore.Committed
    var reader: JournalReader
    var inboxReader: JournalReader?
    /// Journal records read but not yet delivered, with where they came from.
    var pending: Pending
    /// Set when every route to this sink only maps records: they then run as records are
    /// decoded, on the read-ahead thread too (see `Pending`).
    let ahead: SinkRoutes?
    /// The fields of the journal's records the sink and its routes read (`SinkRoutes.fieldsRead`).
    let reads: CanonicalRecord.Fields
    /// The fields the routes may change, which the sink writes anew into the records' lines.
    let patches: CanonicalRecord.Fields
    /// The sink reads no field and one route passes every record to it as it is: only the
    /// journal's lines are pending, and batched, no records (see `Pending`).
    let linesOnly: Bool
    /// The read-ahead's second decoder: a parser, and the routes' instances when they run ahead
    /// (they only map, so two instances of them are the same routes). Made at the first read-ahead.
    var second: (parser: JSONParser, ahead: SinkRoutes?)?
    var lastSavedAt: Double
    var lastProbeAt = -Double.infinity
    var lastIdleAt = -Double.infinity
    /// Journal bytes decoded since memory was last given back to the system.
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
        ahead = routes.onlyMap ? routes : nil
        reads = SinkRoutes.fieldsRead(routes: d.routes, sinkReads: d.built.reads)
        patches = routes.changes
        linesOnly = routes.passesAsIs && !CanonicalCodec.parses(only: reads, patches: patches)
        pending = Pending(routed: ahead != nil, linesOnly: linesOnly)
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
                if ahead != nil, let p = s as? any PipelinedSink, p.batchesInFlight > 1 {
                    pipelined = p
                }
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
            sink?.close()
            sink = nil
        }
        guard openSink() else { return }
        var skip = committed.journal.skip
        let maxWait = d.built.common.batch.maxWaitSeconds
        let onCorrupt: (String) -> Void = { [logger, name] in logger.error("sink \(name): \($0)") }
        var stuckSince: Double?

        defer {
            joinDecoding()
            _ = settleAll()
        }
        while !d.isStopping {
            // The read-ahead still decoding is joined before anything else reads the journal
            // or uses the parser (the fill below, `shed`, the inbox: each joins it).
            if d.overLimit() {
                if settleAll() == .stopped { return }
                shed()
                skip = 0
            }
            // What `replay --sink` handed to this sink goes out between journal batches.
            if !deliverInbox() { return }
            // Fill the buffer from the journal.
            if pending.count < maxItems {
                joinDecoding()
                let entries = reader.read(maxEntries: 64, maxBytes: SinkDrainer.readAheadBytes, corrupt: onCorrupt)
                if !entries.isEmpty { note?.work(from: committed.journal, to: Cursor(seq: reader.nextSeq, skip: 0)) }
                for e in entries {
                    bytesSinceRelief += e.payload.count
                    decode(e, skip: skip)
                    skip = 0
                }
                if entries.isEmpty && pending.isEmpty && d.journal.lastDurableSeq >= reader.nextSeq {
                    // There are entries, but the reader cannot get at them (it said why through
                    // onCorrupt): try again a little later rather than spin.
                    if stuckSince == nil {
                        stuckSince = monotonicSeconds()
                        logger.error("sink \(name): cannot read journal entry \(reader.nextSeq); retrying every second")
                    }
                    if !d.sleep(1) { break }
                    continue
                }
                stuckSince = nil
                if entries.isEmpty && pending.isEmpty {
                    // Nothing more to send: what is in flight is finished before waiting.
                    if !flights.isEmpty {
                        if settleAll() == .stopped { return }
                        continue
                    }
                    if !idle() { return }
                    continue
                }
                if !entries.isEmpty && pending.count < maxItems {
                    // Give concurrent requests a moment to fill the batch, up to max_wait.
                    let deadline = monotonicSeconds() + maxWait
                    while pending.count < maxItems && !d.isStopping {
                        let left = deadline - monotonicSeconds()
                        if left <= 0 || !d.journal.waitForEntries(after: reader.nextSeq - 1, timeout: left) { break }
                        let more = reader.read(maxEntries: 64, maxBytes: SinkDrainer.readAheadBytes, corrupt: onCorrupt)
                        if !more.isEmpty { note?.work(from: committed.journal, to: Cursor(seq: reader.nextSeq, skip: 0)) }
                        for e in more {
                            bytesSinceRelief += e.payload.count
                            decode(e, skip: 0)
                        }
                    }
                }
            }
            // Run the routes over the oldest records until a batch is full. The transforms
            // have then seen exactly the records before the new cursor, which is what makes
            // committing their state with it right.
            var batch = RoutedRecords()
            var consumed = 0
            var filtered = 0
            if let last = pending.last { note?.work(from: committed.journal, to: Cursor(seq: last.seq, skip: last.index + 1)) }
            if pending.isRouted {
                (batch, consumed, filtered) = pending.takeRouted(atLeast: maxItems)
            } else {
                // Each record moved out to the routes (a copy retained each of its strings), empty
                // ones left in their places until `removeFirst`.
                let lines = pending.records.lines
                pending.records.records.withUnsafeMutableBufferPointer { all in
                    guard let base = all.baseAddress else { return }
                    while consumed < all.count && batch.count < maxItems {
                        if !routes.process((base + consumed).move(), line: lines[consumed], into: &batch) { filtered += 1 }
                        consumed += 1
                    }
                    base.initialize(repeating: CanonicalRecord.empty, count: consumed)
                }
                routes.flush(into: &batch)
                pending.removeFirst(consumed)
            }
            if filtered > 0 { metrics.filtered.add(filtered, ordering: .relaxed) }
            if !batch.isEmpty, let p = pipelined, batch.count <= maxItems {
                // Begun, and the oldest batch in flight finished once too many are: the sink's
                // requests are answered while this thread decodes and encodes the next batch.
                let cursor = pendingCursor()
                // Decoding goes on across batches, until `readAheadRecords` (or a batch, when
                // larger) are pending: the sink's requests and the next entries' decoding overlap
                // however their sizes fall (one fork and join per batch made a 1,000-record http
                // batch wait for a whole 4,800-record entry's decoding every few batches; a batch
                // and 10,000 records ahead held 20 MB more in the influxdb sink for nothing).
                if decoding == nil { decoding = startReadAhead(upTo: max(maxItems, SinkDrainer.readAheadRecords)) }
                note?.work(from: committed.journal, to: cursor)
                p.begin(SinkBatch(records: batch.records, lines: batch.lines))
                flights.append(Flight(batch: batch, cursor: cursor))
                if flights.count >= p.batchesInFlight, settleOldest(p.finishOldest()) == .stopped { return }
                continue
            }
            if !batch.isEmpty {
                // Written whole (routes that copy records made it larger than a batch): with
                // nothing in flight, as `write` must be.
                joinDecoding()
                if !flights.isEmpty {
                    switch settleAll() {
                    case .delivered: break
                    case .stopped: return
                    case .abandoned: continue   // shed at the top of the loop, this batch included
                    }
                }
                note?.work(from: committed.journal, to: pendingCursor())
                decoding = startReadAhead(upTo: min(maxItems, pending.count + SinkDrainer.readAheadRecords))
                let outcome = deliver(batch)
                joinDecoding()
                switch outcome {
                case .delivered: break
                case .stopped: return
                case .abandoned: continue   // shed at the top of the loop, the batch included
                }
            } else if !flights.isEmpty || monotonicSeconds() - lastSavedAt < 1 {
                // All filtered out: commit now and then, not per batch (and never past a batch
                // in flight: the cursor moves with it).
                continue
            }
            var next = committed
            next.journal = pendingCursor()
            save(next)
        }
    }

    /// Where the journal records not yet taken into a batch begin: the cursor past every batch
    /// made so far. (With none pending, the reader's position: a read-ahead still decoding is
    /// joined first.)
    func pendingCursor() -> Cursor {
        if pending.isEmpty { joinDecoding() }
        return pending.isEmpty ? Cursor(seq: reader.nextSeq, skip: 0)
            : Cursor(seq: pending.first!.seq, skip: pending.first!.index)
    }

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
            var out = RoutedRecords()
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

    /// The oldest batch in flight, whose write came out as `result` (from `finishOldest`):
    /// delivered as `BatchDelivery` says, then the cursor past it committed. Unless all of it was
    /// accepted, every batch in flight after it is finished too and written again after it, in
    /// order: `BatchDelivery` may write some of it again (a keep, or a rejected record whose dead
    /// letter cannot be written), which the sink takes only with nothing in flight, and an
    /// older version of a record sent again must never land over a newer one.
    func settleOldest(_ result: SinkWriteResult) -> BatchDelivery.Outcome {
        guard let p = pipelined, !flights.isEmpty else { return .delivered }
        var again = [flights.removeFirst()]
        if case .accepted = result {} else {
            for _ in flights { _ = p.finishOldest() }
            again += flights
            flights = []
        }
        for (k, f) in again.enumerated() {
            let outcome = delivery!.deliver(f.batch, first: k == 0 ? result : nil,
                                            wait: { [d] seconds in d.sleep(seconds) }, abandon: { [d] in d.overLimit() })
            if outcome != .delivered { return outcome }
            var next = uncommitted ?? committed
            next.journal = f.cursor
            if monotonicSeconds() - lastSavedAt >= DrainLoop.commitEvery { save(next) } else { uncommitted = next }
        }
        return .delivered
    }

    /// Finishes every batch in flight, oldest first. (A batch not delivered at once finishes
    /// those after it first: when this returns, nothing is in flight.)
    func settleAll() -> BatchDelivery.Outcome {
        // What was delivered is committed however this ends.
        defer { if let u = uncommitted { save(u) } }
        while let p = pipelined, !flights.isEmpty {
            let outcome = settleOldest(p.finishOldest())
            if outcome != .delivered { return outcome }
        }
        return .delivered
    }

    /// Delivers what waits in the inbox, an entry at a time, committing after each batch.
    /// False when stopping.
    func deliverInbox() -> Bool {
        guard let inbox = d.inbox, let r = inboxReader, inbox.lastDurableSeq >= r.nextSeq else { return true }
        joinDecoding()   // the parser is the read-ahead's while it runs
        // Written with nothing in flight.
        if !flights.isEmpty && settleAll() == .stopped { return false }
        let entries = r.read(maxEntries: 1, maxBytes: SinkDrainer.readAheadBytes) { [logger, name] in
            logger.error("sink \(name) inbox: \($0)")
        }
        for e in entries {
            let (records, _) = CanonicalCodec.decodeLinesWithRanges(e.payload, parser: parser) { line, error, range in
                deadLetters.keep(line: e.payload[range], reason: "inbox entry \(e.seq) line \(line) is not a canonical record: \(error)")
            }
            var start = committed.inbox.seq == e.seq ? min(committed.inbox.skip, records.count) : 0
            while start < records.count {
                let end = min(records.count, start + maxItems)
                var out = RoutedRecords()
                for i in start..<end { out.append(records[i], line: .none) }
                switch deliver(out) {
                case .delivered: break
                case .stopped: return false
                case .abandoned: break
                }
                var next = committed
                next.inbox = end == records.count ? Cursor(seq: e.seq + 1, skip: 0) : Cursor(seq: e.seq, skip: end)
                save(next)
                start = end
            }
            if records.isEmpty {
                var next = committed
                next.inbox = Cursor(seq: e.seq + 1, skip: 0)
                save(next)
            }
            inbox.deleteSegments(below: committed.inbox.seq)
        }
        return true
    }

    /// Commits the position with the transforms' state as it is now.
    func save(_ next: CursorStore.Committed) {
        uncommitted = nil   // `next` is as far as it, or further
        var c = next
        c.states = [:]
        // Routes that only map keep no state (and may be mapping on the read-ahead thread now).
        if ahead == nil { for (k, v) in routes.saveState() { c.states[k] = v } }
        if let state = sink?.saveState() { c.states[DrainLoop.sinkStateKey] = state }
        do {
            try d.commit(c)
            committed = c
            lastSavedAt = monotonicSeconds()
        } catch {
            logger.error("sink \(name): cannot save its cursor (\(error)); delivered records may be sent again after a restart")
        }
    }

    func decode(_ e: JournalEntry, skip: Int) {
        pending.decode(e, skip: skip, parser: parser, ahead: ahead, shared: d.journal.decoded, only: reads, patches: patches) { line, reason in
            deadLetters.keep(line: line, reason: reason)
        }
    }

    /// The next journal entries, read and decoded on a helper thread while the sink writes the
    /// batch before them (the decoding overlaps the destination's round trip), and when routes
    /// only map, routed and their changed lines encoded there too. Fork and join: between
    /// `startReadAhead` and `joinDecoding` only the helper touches `reader`, `parser` and the
    /// routes, and the drainer thread uses none of them (each of its uses joins first); what the
    /// helper found is applied on the drainer thread afterwards (dead letters, pending), so nothing
    /// else is shared.
    final class ReadAhead {
        let reader: JournalReader
        let parser: JSONParser
        let ahead: SinkRoutes?
        /// The second decoder (only where routes change records).
        let second: (parser: JSONParser, ahead: SinkRoutes?)?
        let reads: CanonicalRecord.Fields
        let patches: CanonicalRecord.Fields
        let linesOnly: Bool
        let logger: Logger
        let name: String
        let note: CrashNote?
        var pending: Pending
        var bad: [(ArraySlice<UInt8>, String)] = []
        var bytes = 0
        var running: Forked<Void>?

        init(reader: JournalReader, parser: JSONParser, ahead: SinkRoutes?, second: (parser: JSONParser, ahead: SinkRoutes?)?,
             reads: CanonicalRecord.Fields, patches: CanonicalRecord.Fields, linesOnly: Bool, logger: Logger, name: String,
             note: CrashNote?) {
            self.reader = reader
            self.note = note
            self.parser = parser
            self.ahead = ahead
            self.second = second
            self.reads = reads
            self.patches = patches
            self.linesOnly = linesOnly
            pending = Pending(routed: ahead != nil, linesOnly: linesOnly)
            self.logger = logger
            self.name = name
        }

        /// Records the next batch still lacks; none read when it lacks none.
        var wanted = 0

        func run() {
            // A crash here is the read-ahead's: what it read is what it was working on.
            if let note { CrashAttribution.setSlot(note.aheadSlot) }
            // What the next batch lacks, read and decoded here: the drainer thread then only
            // writes (the two overlap fully). Reading one journal entry's worth at a time (the
            // drainer decoded the rest of a batch itself) was 5–10 % slower unpaced into the file
            // sink, 1 MB bodies × 8, for 0–10 MB less at peak (2026-12-02).
            while pending.count < wanted {
                // Where routes change records, two decoders: twice as much read at once, the later
                // half decoded on a thread of its own meanwhile and put after the first, in order
                // (reading, decoding, routing and writing the changed lines is then the slower
                // half of the drain). Plain decoding is cheap enough not to pay a second
                // decoder's memory (10 MB more at peak, 1 MB bodies × 8).
                let entries = reader.read(maxEntries: 64, maxBytes: SinkDrainer.readAheadBytes / (second == nil ? 2 : 1)) { [logger, name] in
                    logger.error("sink \(name): \($0)")
                }
                if entries.isEmpty { return }
                note?.readAhead(to: Cursor(seq: reader.nextSeq, skip: 0))
                for e in entries { bytes += e.payload.count }
                let half = second == nil ? 0 : entries.count / 2
                let later = second.flatMap { second in
                    half > 0 ? Forked { [self] in decode(entries[half...], parser: second.parser, ahead: second.ahead) } : nil
                }
                let first = decode(entries[..<(half > 0 ? half : entries.count)], parser: parser, ahead: ahead)
                pending.append(&first.pending)
                bad += first.bad
                if let later {
                    let more = later.join()
                    pending.append(&more.pending)
                    bad += more.bad
                }
            }
        }

        /// Some entries decoded (and routed) into what they make pending.
        private func decode(_ entries: ArraySlice<JournalEntry>, parser: JSONParser, ahead: SinkRoutes?) -> Decoded {
            let out = Decoded(routed: ahead != nil, linesOnly: linesOnly)
            for e in entries {
                out.pending.decode(e, skip: 0, parser: parser, ahead: ahead, shared: reader.journal.decoded, only: reads,
                                   patches: patches) { line, reason in
                    out.bad.append((line, reason))
                }
            }
            return out
        }

        /// What one thread of a read-ahead decoded.
        final class Decoded {
            var pending: Pending
            var bad: [(ArraySlice<UInt8>, String)] = []
            init(routed: Bool, linesOnly: Bool) { pending = Pending(routed: routed, linesOnly: linesOnly) }
        }
    }

    /// A read-ahead decoding until `upTo` records are pending (nil when as many are, or the
    /// journal holds nothing more).
    func startReadAhead(upTo: Int) -> ReadAhead? {
        guard pending.count < upTo, d.journal.lastDurableSeq >= reader.nextSeq else { return nil }
        // The drainer's own parser: it is not used while the sink writes. The second half of
        // what it reads at once is decoded beside it with a parser (and, routed ahead, route
        // instances) of its own.
        if second == nil && patches.rawValue != 0 {
            second = (JSONParser(), ahead.map { _ in
                SinkRoutes(routes: d.routes, sink: d.name, clock: d.clock, timeZones: d.timeZones, logger: d.logger)
            })
        }
        let job = ReadAhead(reader: reader, parser: parser, ahead: ahead, second: second, reads: reads, patches: patches,
                            linesOnly: linesOnly, logger: logger, name: name, note: note)
        job.wanted = upTo - pending.count
        job.running = Forked { job.run() }
        return job
    }

    /// Waits for the read-ahead, if one runs, and takes what it decoded after what is pending.
    func joinDecoding() {
        guard let job = decoding else { return }
        decoding = nil
        job.running?.join()
        for (line, reason) in job.bad { deadLetters.keep(line: line, reason: reason) }
        bytesSinceRelief += job.bytes
        pending.append(&job.pending)
    }

    var maxItems: Int { d.built.common.batch.maxItems }

    /// Drops the oldest waiting records so that at most the limit waits, and moves the cursor.
    func shed() {
        joinDecoding()   // the reader is the read-ahead's while it runs
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
        pending = Pending(routed: ahead != nil, linesOnly: linesOnly)
        reader = d.journal.makeReader(from: keepFrom)
        var next = committed
        next.journal = Cursor(seq: keepFrom, skip: 0)
        save(next)
    }

    /// Writes a batch, in writes of at most `batch.max_items` (routes that copy or derive
    /// records can make more than they took), until every record is accepted or rejected (or
    /// the sink is stopped, or it must shed its oldest records).
    func deliver(_ batch: RoutedRecords) -> BatchDelivery.Outcome {
        guard delivery != nil else { return .stopped }
        let size = d.built.common.batch.maxItems
        var start = 0
        while start < batch.count {
            let end = min(batch.count, start + size)
            let outcome = delivery!.deliver(batch.subrange(start..<end),
                                            wait: { [d] seconds in d.sleep(seconds) },
                                            abandon: { [d] in d.overLimit() })
            if outcome != .delivered { return outcome }
            start = end
        }
        return .delivered
    }
}
