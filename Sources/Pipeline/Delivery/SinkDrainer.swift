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

    public init(
        name: String, built: BuiltSink, routes: [Route], journal: Journal, inbox: Journal? = nil, dataDir: String,
        logger: Logger, clock: any WaitClock = SystemClock(), timeZones: any TimeZoneLookup = SystemTimeZones(),
        metrics: SinkMetrics? = nil, shutdownDeadline: Double = 10, deadLetterBytes: Int = DeadLetters.defaultMaxBytes,
        onCommit: @escaping @Sendable () -> Void = {}
    ) {
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

    /// The sink's own state in the cursor file, and in a fleet partition's state (route
    /// transform keys always hold a `/`).
    public static let sinkStateKey = "sink"

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
            logger.error(
                "sink \(name): its cursor (entry \(committed.journal.seq)) is ahead of the journal (newest entry "
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
        logger.error(
            "sink \(name) is paused: the process died on it \(pause.crashes) starts in a row (\(pause.signalName)) "
                + "at journal entry \(pause.from.seq), record \(pause.from.skip); its records wait in the journal and "
                + "every other sink goes on. \(CrashGuard.howToResume(name))")
        let guardFiles = crashGuard
        while true {
            if let skip = guardFiles.resumeAsked() {
                if skip {
                    guard
                        let kept = deadLetterRange(
                            from: pause.from, to: pause.to,
                            reason: "skipped by `healthgate resume --skip`: the process died on this "
                                + "sink while it worked on these records")
                    else {
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
                    logger.warning(
                        "sink \(name): resumed; \(kept) record(s) it was working on are in its dead letters "
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
        DeadLetters.keepJournalRange(
            journal: journal, from: from, to: to,
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
        guard
            let t = thread.withLock({ t -> pthread_t? in
                defer { t = nil }; return t
            })
        else { return }
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
            logger.error(
                "sink \(name): its write did not end within \(formatSeconds(shutdownDeadline)) of the stop; left "
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
        return journal.backlog(
            fromSeq: metrics.cursorSeq.load(ordering: .relaxed),
            skip: metrics.cursorSkip.load(ordering: .relaxed)
        ).bytes > max
    }
}
