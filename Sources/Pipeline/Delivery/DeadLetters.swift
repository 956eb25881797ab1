import CanonicalJSON
import FastJSON
import HealthgateCore
import Posix

/// A sink's dead letters, `<data_dir>/sinks/<name>/dead-letters.ndjson`: one JSON object per
/// line with the time, the sink, the reason, and the record (or, for a journal line that is
/// not a record, the line as text). `healthgate replay` sends them again.
public struct DeadLetters: Sendable {
    let sink: String
    public let path: String
    let metrics: SinkMetrics
    let logger: Logger
    let clock: any Clock
    /// The most bytes rejected records take (`dead_letters.max_bytes`); past it they are kept as
    /// their keys and reason only, and past another eighth not written (counted either way).
    let maxBytes: Int
    public static let defaultMaxBytes = 100 << 20
    /// Where the lines go instead of the file (a fleet's dead-letter queue): its name, and a
    /// write that says whether they were taken.
    let outlet: Outlet?

    public struct Outlet: Sendable {
        public var name: String
        public var write: @Sendable ([UInt8]) -> Bool

        public init(name: String, write: @escaping @Sendable ([UInt8]) -> Bool) {
            self.name = name
            self.write = write
        }
    }

    public init(
        sink: String, dataDir: String, metrics: SinkMetrics, logger: Logger, clock: any Clock,
        maxBytes: Int = DeadLetters.defaultMaxBytes, outlet: Outlet? = nil
    ) {
        self.maxBytes = maxBytes
        self.outlet = outlet
        self.sink = sink
        self.path = outlet?.name ?? DeadLetters.path(sink: sink, dataDir: dataDir)
        self.metrics = metrics
        self.logger = logger
        self.clock = clock
    }

    public static func path(sink: String, dataDir: String) -> String {
        FileIO.join(dataDir, "sinks/\(sink)/dead-letters.ndjson")
    }

    /// Keeps a record the sink rejected for good. False when it could not be written (then
    /// the caller keeps the record for another try).
    public func keep(_ given: Record, reason: String) -> Bool {
        keep([(given, reason)])
    }

    /// Keeps the records a sink rejected for good from one batch, in one write, said in one log
    /// line (a batch of thousands rejected is not thousands of lines). False when they could not
    /// be written (then the caller keeps them for another try).
    /// Each is written as the sink was given it: the journal's line, with the members a route
    /// changed written anew.
    public func keep(_ rejected: [(record: Record, reason: String)]) -> Bool {
        var out: [UInt8] = []
        var first: (type: String, uuid: String, reason: String)?
        var kept = 0
        var keysOnly = 0
        var notKept = 0
        let size = outlet == nil ? FileIO.fileSize(path) ?? 0 : 0
        var otherReasons: Set<String> = []
        let time = Timestamp(seconds: clock.now().seconds).rfc3339()
        for (r, reason) in rejected {
            let encoded = r.line
            var w = JSONWriter(capacity: encoded.count + 128)
            w.beginObject()
            w.key("time"); w.string(time)
            w.key("sink"); w.string(sink)
            w.key("reason"); w.string(reason)
            if size + out.count + encoded.count + 128 <= maxBytes {
                w.key("record")
                w.raw(encoded)
            } else if size + out.count + 512 + r.device.utf8.count + r.uuid.utf8.count <= maxBytes + maxBytes / 8 {
                // Over the budget: which record it was, not the record.
                w.key("record_left_out"); w.string("over dead_letters.max_bytes")
                w.key("device"); w.string(r.device)
                w.key("uuid"); w.string(r.uuid)
                w.key("type"); w.string(r.type)
                if let part = r.part { w.key("part"); w.int(part) }
                keysOnly += 1
            } else {
                notKept += 1
                continue
            }
            w.endObject()
            w.newline()
            out += w.bytes
            kept += 1
            if first == nil {
                first = (r.type, r.uuid, reason)
            } else if reason != first!.reason && otherReasons.count < 100 {
                otherReasons.insert(reason)
            }
        }
        if notKept > 0 {
            metrics.deadLettersNotKept.add(notKept, ordering: .relaxed)
            logger.error(
                "sink \(sink): \(notKept) rejected record(s) not kept: its dead letters are past dead_letters.max_bytes "
                    + "(\(maxBytes) bytes) and the room for their keys; move \(path) away to keep more")
        }
        guard let first else { return true }
        if keysOnly > 0 {
            metrics.deadLettersKeysOnly.add(keysOnly, ordering: .relaxed)
            logger.warning(
                "sink \(sink): \(keysOnly) rejected record(s) kept as their keys only: its dead letters are past "
                    + "dead_letters.max_bytes (\(maxBytes) bytes)")
        }
        if let failure = write(out) {
            logger.error("sink \(sink): cannot write \(kept) dead letter(s) (\(failure)); the record(s) will be tried again")
            return false
        }
        metrics.rejected.add(kept, ordering: .relaxed)
        if kept == 1 {
            logger.warning("sink \(sink): a \(first.type) record (uuid \(first.uuid)) was rejected and is kept in \(path): \(first.reason)")
        } else {
            logger.warning(
                "sink \(sink): \(kept) records were rejected and are kept in \(path); the first, a \(first.type) record "
                    + "(uuid \(first.uuid)): \(first.reason)"
                    + (otherReasons.isEmpty ? "" : "; \(otherReasons.count)\(otherReasons.count == 100 ? "+" : "") other reason(s)"))
        }
        return true
    }

    /// The journal's records from `from` up to `to`, each into `letters` as it is, in one write;
    /// how many (nil when they could not be written).
    static func keepJournalRange(
        journal: Journal, from: Cursor, to: Cursor, into letters: DeadLetters, reason: String,
        logger: Logger
    ) -> Int? {
        let reader = journal.makeReader(from: from.seq)
        var lines: [ArraySlice<UInt8>] = []
        reading: while true {
            let entries = reader.read(maxEntries: 16, corrupt: { [sink = letters.sink] in logger.error("sink \(sink): \($0)") })
            if entries.isEmpty { break }
            for e in entries {
                var index = 0
                for line in e.payload.split(separator: 0x0A, omittingEmptySubsequences: true) {
                    defer { index += 1 }
                    if e.seq > to.seq || (e.seq == to.seq && index >= to.skip) { break reading }
                    if e.seq == from.seq && index < from.skip { continue }
                    lines.append(line)
                }
                if e.seq >= to.seq { break reading }
            }
        }
        return letters.keep(journalLines: lines, reason: reason) ? lines.count : nil
    }

    /// Keeps journal lines as the records they are, in one write, with one log line for all.
    /// False when they could not be written.
    func keep(journalLines lines: [ArraySlice<UInt8>], reason: String) -> Bool {
        guard !lines.isEmpty else { return true }
        var w = JSONWriter(capacity: 512)
        let time = Timestamp(seconds: clock.now().seconds).rfc3339()
        for line in lines {
            w.beginObject()
            w.key("time"); w.string(time)
            w.key("sink"); w.string(sink)
            w.key("reason"); w.string(reason)
            if (try? JSONParser().parse(Array(line))) != nil {
                w.key("record"); w.raw(Array(line))
            } else {
                w.key("line"); w.string(utf8: Array(line))
            }
            w.endObject()
            w.newline()
        }
        if let failure = write(w.bytes) {
            logger.error("sink \(sink): cannot write \(lines.count) dead letter(s) (\(failure))")
            return false
        }
        metrics.rejected.add(lines.count, ordering: .relaxed)
        logger.warning("sink \(sink): \(lines.count) record(s) kept in \(path): \(reason)")
        return true
    }

    /// Appends dead-letter lines to the file or the outlet; why not, when they were not taken.
    private func write(_ lines: [UInt8]) -> String? {
        if let outlet { return outlet.write(lines) ? nil : "\(outlet.name) did not take them" }
        do {
            try FileIO.append(path, lines)
            return nil
        } catch {
            return "\(error)"
        }
    }

    /// Keeps a line that is not a canonical record (its text as a JSON string).
    public func keep(line: ArraySlice<UInt8>, reason: String) {
        var w = JSONWriter(capacity: 512)
        w.beginObject()
        w.key("time"); w.string(Timestamp(seconds: clock.now().seconds).rfc3339())
        w.key("sink"); w.string(sink)
        w.key("reason"); w.string(reason)
        w.key("line"); w.string(utf8: Array(line))
        w.endObject()
        w.newline()
        metrics.rejected.add(1, ordering: .relaxed)
        logger.error("sink \(sink): \(reason); the line is kept in \(path)")
        if let failure = write(w.bytes) { logger.error("sink \(sink): cannot write a dead letter (\(failure))") }
    }
}
