import Glibc
import HealthgateCore
import Posix

/// A sink taken out of the config (by a reload or a restart) whose records still wait in the
/// journal: its directory `sinks/<name>/` keeps its cursor, and the journal keeps every segment
/// from that cursor on, so that putting the sink back delivers them. `healthgate forget NAME`
/// lets them go; the journal's budget (`journal.max_bytes`) may force the oldest of them out,
/// into the sink's dead letters (`forceOut`), never just gone.
public struct RemovedSink: Sendable, Equatable {
    public var name: String
    public var cursor: Cursor
}

public enum RemovedSinks {
    /// The name of a forgotten sink's cursor (`healthgate forget`): kept, no longer read.
    static let forgottenName = "cursor.forgotten"

    /// The sinks with a cursor under `<data_dir>/sinks/` that the config no longer names.
    public static func scan(dataDir: String, configured: Set<String>) -> [RemovedSink] {
        let root = FileIO.join(dataDir, "sinks")
        guard let names = try? FileIO.list(root) else { return [] }
        var out: [RemovedSink] = []
        for name in names.sorted() where !configured.contains(name) && !name.hasPrefix(".") {
            let dir = FileIO.join(root, name)
            guard FileIO.isDirectory(dir), !FileIO.exists(FileIO.join(dir, forgottenName)) else { continue }
            // No cursor: it never delivered a record, so everything from the start waits for it.
            let path = FileIO.join(dir, "cursor")
            guard let c = try? CursorStore(path: path).load(damaged: { _ in }) else { continue }
            out.append(RemovedSink(name: name, cursor: c.journal))
        }
        return out
    }

    /// Lets a removed sink's records go: its cursor is set aside. False when it had none.
    public static func forget(_ name: String, dataDir: String) throws(IOError) -> Bool {
        let dir = SinkDrainer.stateDirectory(sink: name, dataDir: dataDir)
        guard FileIO.isDirectory(dir), !FileIO.exists(FileIO.join(dir, forgottenName)) else { return false }
        let path = FileIO.join(dir, "cursor")
        if FileIO.exists(path) {
            if rename(path, FileIO.join(dir, forgottenName)) != 0 { throw IOError("rename", path) }
        } else {
            try FileIO.writeAtomically(FileIO.join(dir, forgottenName), Array("1 0 1 0\n".utf8), mode: 0o600)
        }
        return true
    }

    /// When the journal is at or past `fraction` of its budget and its oldest segment is held
    /// only by removed sinks, their records in it go to their dead letters (with why) and their
    /// cursors past it, so that it can be deleted. Returns the sinks it moved.
    public static func forceOut(
        _ removed: [RemovedSink], configuredLowest: UInt64, journal: Journal, maxBytes: Int,
        dataDir: String, logger: Logger, clock: any Clock, fraction: Double = 0.9
    ) -> [RemovedSink] {
        guard !removed.isEmpty, Double(journal.bytesOnDisk) >= Double(maxBytes) * fraction else { return [] }
        let starts = journal.segmentFirstSeqs
        guard starts.count >= 2 else { return [] }
        let boundary = starts[1]
        guard configuredLowest >= boundary else { return [] } // a sink in the config needs it too
        var moved: [RemovedSink] = []
        for var r in removed where r.cursor.seq < boundary {
            let metrics = SinkMetrics(name: r.name)
            let letters = DeadLetters(sink: r.name, dataDir: dataDir, metrics: metrics, logger: logger, clock: clock)
            let reason =
                "sink \(r.name) was taken out of the config with these records undelivered, and the journal's "
                + "budget (journal.max_bytes) needed their room; put the sink back and replay this file to deliver them"
            guard
                let n = DeadLetters.keepJournalRange(
                    journal: journal, from: r.cursor, to: Cursor(seq: boundary, skip: 0),
                    into: letters, reason: reason, logger: logger)
            else { continue }
            let store = CursorStore(path: FileIO.join(SinkDrainer.stateDirectory(sink: r.name, dataDir: dataDir), "cursor"))
            guard var c = try? store.load(damaged: { _ in }) else { continue }
            c.journal = Cursor(seq: boundary, skip: 0)
            do {
                try store.save(c)
            } catch {
                logger.error("sink \(r.name) (removed): cannot move its cursor past what went to its dead letters (\(error))")
                continue
            }
            logger.warning(
                "sink \(r.name) (removed from the config): \(n) waiting record(s) moved to its dead letters, "
                    + "the journal's budget needing their room")
            r.cursor = c.journal
            moved.append(r)
        }
        return moved
    }
}
