import FastJSON
import Glibc
import HealthgateCore
import Posix
import CanonicalJSON

/// What a sink was working on, in `sinks/<name>/crash-note`: a 64-byte file mapped shared, so
/// that what the drainer stores there (plain stores, no system call per batch) is in the page
/// cache when the process dies, and so read by the next start. The drainer's threads carry its
/// first word as their crash slot (`CrashAttribution`): a fatal signal on one of them stores
/// its number there; the read-ahead's threads (decoding and routing while the sink writes)
/// carry the second word. Layout (native order, this machine's alone): the two signals
/// (UInt32) at 0 and 4; the sink's committed cursor (entry, records to skip) at 8 and 16;
/// where the records the drainer thread works on end at 24 and 32 (all it routes, or the
/// batches it writes), and where the read-ahead has read to at 40 and 48.
final class CrashNote: @unchecked Sendable {
    static let size = 64
    let path: String
    /// The mapping, never unmapped: a helper thread of a sink that was stopped may still hold
    /// it as its slot. (One page per sink name for the life of the process.)
    private let base: UnsafeMutableRawPointer?

    private static let mapped = Locked<[String: CrashNote]>([:])

    /// The note of a sink's directory, mapped once per process.
    static func of(sink: String, directory: String) -> CrashNote {
        let path = FileIO.join(directory, "crash-note")
        return mapped.withLock { all in
            if let n = all[path] { return n }
            let n = CrashNote(path: path)
            all[path] = n
            return n
        }
    }

    private init(path: String) {
        self.path = path
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        var mapped: UnsafeMutableRawPointer?
        if fd >= 0 {
            var st = stat()
            if fstat(fd, &st) == 0, st.st_size < CrashNote.size { _ = ftruncate(fd, off_t(CrashNote.size)) }
            let p = mmap(nil, CrashNote.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
            if let p, p != MAP_FAILED { mapped = p }
            close(fd)
        }
        base = mapped
    }

    /// The slot of the drainer's thread and those it starts (nil when the file could not be mapped).
    var slot: UnsafeMutableRawPointer? { base }
    /// The slot of the read-ahead's threads.
    var aheadSlot: UnsafeMutableRawPointer? { base.map { $0 + 4 } }

    /// The signal the last process died of on one of the drainer's threads, and on one of the
    /// read-ahead's (0: none).
    var signals: (drainer: Int32, ahead: Int32) {
        guard let b = base else { return (0, 0) }
        return (Int32(bitPattern: b.load(as: UInt32.self)), Int32(bitPattern: b.load(fromByteOffset: 4, as: UInt32.self)))
    }

    private func cursor(at offset: Int) -> Cursor {
        guard let b = base else { return Cursor.start }
        return Cursor(seq: b.load(fromByteOffset: offset, as: UInt64.self), skip: b.load(fromByteOffset: offset + 8, as: Int.self))
    }

    /// Where the drainer thread's records end, and the read-ahead's.
    var workedTo: Cursor { cursor(at: 24) }
    var readTo: Cursor { cursor(at: 40) }

    /// Notes the batch about to be written: from the sink's committed cursor to the end of
    /// the last batch begun.
    func work(from: Cursor, to: Cursor) {
        guard let b = base else { return }
        b.storeBytes(of: from.seq, toByteOffset: 8, as: UInt64.self)
        b.storeBytes(of: from.skip, toByteOffset: 16, as: Int.self)
        b.storeBytes(of: to.seq, toByteOffset: 24, as: UInt64.self)
        b.storeBytes(of: to.skip, toByteOffset: 32, as: Int.self)
    }

    /// Notes where the read-ahead has read to (its own thread's field).
    func readAhead(to: Cursor) {
        guard let b = base else { return }
        b.storeBytes(of: to.seq, toByteOffset: 40, as: UInt64.self)
        b.storeBytes(of: to.skip, toByteOffset: 48, as: Int.self)
    }

    /// Forgets the signals (read at start).
    func clearSignals() {
        base?.storeBytes(of: 0, as: UInt64.self)
    }
}

/// The crash-loop guard of one sink. A start finds in the sink's `CrashNote` whether the
/// process before died on one of its threads; three starts in a row that died so with the
/// sink's cursor at the same place pause the sink (`sinks/<name>/paused`): the gateway takes
/// data and delivers to every other sink, and the paused one waits for `healthgate resume
/// SINK` (`sinks/<name>/resume`: try again, or `--skip`: the records it was working on go to
/// its dead letters first).
public struct CrashGuard: Sendable {
    /// Why and where a sink is paused.
    public struct Pause: Sendable, Equatable {
        public var since: Timestamp
        public var from: Cursor
        public var to: Cursor
        public var crashes: Int
        public var signal: Int32

        /// Since when, from where to where, after how many deaths: the members the pause file
        /// and the status (`status.json`, `/status`) share.
        public func writeMembers(to w: inout JSONWriter) {
            w.key("since"); w.string(since.rfc3339())
            for (key, c) in [("from", from), ("to", to)] {
                w.key(key); w.beginObject(); w.key("seq"); w.uint(c.seq); w.key("skip"); w.int(c.skip); w.endObject()
            }
            w.key("crashes"); w.int(crashes)
        }

        /// The signal's name, for people.
        public var signalName: String {
            switch signal {
            case SIGSEGV: "SIGSEGV"
            case SIGBUS: "SIGBUS"
            case SIGILL: "SIGILL (a Swift trap)"
            case SIGTRAP: "SIGTRAP (a Swift trap)"
            case SIGFPE: "SIGFPE"
            case SIGABRT: "SIGABRT (an abort or fatal error)"
            default: "signal \(signal)"
            }
        }
    }

    /// Starts that died on the sink at one place before it is paused.
    public static let crashesBeforePause = 3

    let dir: String
    public let sink: String
    var pausedPath: String { FileIO.join(dir, "paused") }
    var resumePath: String { FileIO.join(dir, "resume") }
    var historyPath: String { FileIO.join(dir, "crashes") }

    public init(sink: String, sinkDirectory: String) {
        self.sink = sink
        dir = sinkDirectory
    }

    /// Reads what the process before left in `note` (and clears it): counts a death on this
    /// sink at `cursor` (its committed cursor, where delivery starts again), forgets the count
    /// when this start's predecessor did not die on it, and pauses the sink at the third.
    /// Returns the pause in force, if any.
    func check(note: CrashNote, cursor: Cursor, now: Timestamp, logger: Logger) -> Pause? {
        let signals = note.signals
        note.clearSignals()
        let signal = signals.drainer != 0 ? signals.drainer : signals.ahead
        if signal != 0 {
            var count = 1
            if let h = history(), h.at == cursor { count = h.count + 1 }
            // What it was working on: what the thread that died had taken up.
            let worked = signals.drainer != 0 ? note.workedTo : note.readTo
            let to = (worked.seq, worked.skip) > (cursor.seq, cursor.skip) ? worked : cursor
            logger.error(
                "sink \(sink): the process before this one died of \(Pause(since: now, from: cursor, to: to, crashes: count, signal: signal).signalName) "
                    + "on one of this sink's threads, with its cursor at entry \(cursor.seq) (record \(cursor.skip)); "
                    + "\(count) start(s) in a row")
            try? FileIO.writeAtomically(historyPath, Array("\(cursor.seq) \(cursor.skip) \(count)\n".utf8), mode: 0o600)
            if count >= CrashGuard.crashesBeforePause {
                let pause = Pause(since: now, from: cursor, to: to, crashes: count, signal: signal)
                save(pause, logger: logger)
            }
        } else if FileIO.exists(historyPath) {
            unlink(historyPath)
        }
        return paused()
    }

    /// The pause in force (nil: none).
    public func paused() -> Pause? {
        guard let bytes = try? FileIO.readAll(pausedPath), let doc = try? JSONParser().parse(bytes) else { return nil }
        let r = doc.root
        func cursor(_ key: String) -> Cursor? {
            guard let seq = r[key]?["seq"]?.int, let skip = r[key]?["skip"]?.int, seq >= 0, skip >= 0 else { return nil }
            return Cursor(seq: UInt64(seq), skip: skip)
        }
        guard let from = cursor("from"), let to = cursor("to"), let since = r["since"]?.string.flatMap({ Timestamp.parseRFC3339($0)?.0 })
        else { return nil }
        return Pause(
            since: since, from: from, to: to, crashes: r["crashes"]?.int ?? CrashGuard.crashesBeforePause,
            signal: Int32(clamping: r["signal"]?.int ?? 0))
    }

    private func save(_ p: Pause, logger: Logger) {
        var w = JSONWriter(capacity: 256)
        w.beginObject()
        w.key("sink"); w.string(sink)
        p.writeMembers(to: &w)
        w.key("signal"); w.int(Int(p.signal))
        w.endObject()
        w.newline()
        do {
            try FileIO.writeAtomically(pausedPath, w.bytes, mode: 0o600)
        } catch {
            logger.error("sink \(sink): cannot note its pause (\(error)); it is paused for this start only")
        }
    }

    /// What `healthgate resume` asked for: nil when nothing, else whether to skip.
    func resumeAsked() -> Bool? {
        guard let bytes = try? FileIO.readAll(resumePath) else { return paused() == nil ? false : nil }
        return String(decoding: bytes, as: UTF8.self).split(whereSeparator: { $0 == "\n" || $0 == " " }).first == "skip"
    }

    /// The pause is over: its files go.
    func clear() {
        for p in [pausedPath, resumePath, historyPath] { unlink(p) }
    }

    private func history() -> (at: Cursor, count: Int)? {
        guard let bytes = try? FileIO.readAll(historyPath) else { return nil }
        let parts = String(decoding: bytes, as: UTF8.self).split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init)
        guard parts.count == 3, let seq = UInt64(parts[0]), let skip = Int(parts[1]), let count = Int(parts[2]) else { return nil }
        return (Cursor(seq: seq, skip: skip), count)
    }

    /// Asks a paused sink to go on (what `healthgate resume` writes): `skip` sends the records
    /// it was working on to its dead letters first.
    public func requestResume(skip: Bool) throws(IOError) {
        try FileIO.writeAtomically(resumePath, Array((skip ? "skip\n" : "retry\n").utf8), mode: 0o600)
    }

    /// How a person resumes the sink, for logs and pages.
    public static func howToResume(_ sink: String) -> String {
        "`healthgate resume \(sink)` tries it again; `healthgate resume \(sink) --skip` puts the records it was working on "
            + "in its dead letters and goes on"
    }
}
