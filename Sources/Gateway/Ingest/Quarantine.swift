import FastJSON
import Glibc
import HealthgateCore
import Posix
import Synchronization
import CanonicalJSON

/// Keeps what could not be taken, with the reason, under `<data_dir>/quarantine/`:
/// bad records beside good ones in `<receiver>.ndjson`, and whole unreadable bodies
/// (size-capped) as files in `<receiver>/`, each with a line in the same NDJSON file.
///
/// Within `quarantine.max_bytes` (bodies and lines together): when a new entry does not fit,
/// the oldest kept bodies are deleted first (their reason lines stay); when it still does not
/// fit, the body or record itself is left out and only its reason line is written; past that,
/// nothing more is written and the refusals are counted (`/metrics`).
public final class Quarantine: Sendable {
    public let directory: String
    let maxBodyBytes: Int
    public let maxBytes: Int
    let clock: any Clock

    struct State {
        var sequence: UInt64 = 0
        var bytes = 0
        /// Kept body files, oldest first.
        var bodies: [(path: String, size: Int)] = []
        var bodiesDropped = 0
        var contentsLeftOut = 0
        var linesDropped = 0
    }

    private let state: Locked<State>
    public static let defaultMaxBytes = 100 << 20

    public init(directory: String, maxBodyBytes: Int = 1 << 20, maxBytes: Int = Quarantine.defaultMaxBytes, clock: any Clock) {
        self.directory = directory
        self.maxBodyBytes = maxBodyBytes
        self.maxBytes = maxBytes
        self.clock = clock
        state = Locked(Quarantine.scan(directory))
    }

    /// What is on disk already: its size, and the bodies in the order they were kept.
    static func scan(_ directory: String) -> State {
        var s = State()
        var bodies: [(key: (Int64, Int64, UInt64), path: String, size: Int)] = []
        for name in (try? FileIO.list(directory)) ?? [] {
            let path = FileIO.join(directory, name)
            if FileIO.isDirectory(path) {
                for file in (try? FileIO.list(path)) ?? [] where file.hasSuffix(".body") {
                    let p = FileIO.join(path, file)
                    let size = FileIO.fileSize(p) ?? 0
                    let parts = file.dropLast(5).split(separator: "-").map { UInt64($0) ?? 0 }
                    let key = parts.count == 3 ? (Int64(parts[0]), Int64(parts[1]), parts[2]) : (0, 0, 0)
                    bodies.append((key, p, size))
                    s.bytes += size
                    s.sequence = max(s.sequence, key.2)
                }
            } else {
                s.bytes += FileIO.fileSize(path) ?? 0
            }
        }
        s.bodies = bodies.sorted { $0.key < $1.key }.map { ($0.path, $0.size) }
        return s
    }

    func indexPath(_ receiver: String) -> String { FileIO.join(directory, receiver + ".ndjson") }

    /// Frees room for `needed` more bytes by deleting the oldest kept bodies; true when it fits.
    private func makeRoom(_ needed: Int, _ s: inout State) -> Bool {
        while s.bytes + needed > maxBytes, !s.bodies.isEmpty {
            let oldest = s.bodies.removeFirst()
            if unlink(oldest.path) == 0 || errno == ENOENT {
                s.bytes -= oldest.size
                s.bodiesDropped += 1
            }
        }
        return s.bytes + needed <= maxBytes
    }

    /// (`FileIO.append` makes the directories it needs.)
    private func append(_ receiver: String, _ bytes: [UInt8], _ s: inout State) throws(IOError) {
        try FileIO.append(indexPath(receiver), bytes)
        s.bytes += bytes.count
    }

    /// Bad records of an otherwise good request.
    public func keep(records: [QuarantinedRecord], receiver: String) throws(IOError) {
        guard !records.isEmpty else { return }
        let now = clock.now().rfc3339()
        func lines(withRecords: Bool) -> [UInt8] {
            var w = JSONWriter(capacity: (withRecords ? 256 : 160) * records.count)
            for q in records {
                w.beginObject()
                w.key("time"); w.string(now)
                w.key("receiver"); w.string(receiver)
                w.key("reason"); w.string(q.reason)
                if withRecords {
                    w.key("record"); w.raw(q.raw.bytes)
                } else {
                    w.key("record_bytes"); w.int(q.raw.bytes.count)
                    w.key("record_left_out"); w.string("over quarantine.max_bytes")
                }
                w.endObject()
                w.newline()
            }
            return w.bytes
        }
        let full = lines(withRecords: true)
        try state.withLock { s throws(IOError) in
            if makeRoom(full.count, &s) { return try append(receiver, full, &s) }
            let short = lines(withRecords: false)
            if makeRoom(short.count, &s) {
                s.contentsLeftOut += records.count
                return try append(receiver, short, &s)
            }
            s.linesDropped += records.count
        }
    }

    /// A whole body that could not be read. Returns the file it was kept in (nil when the
    /// budget left no room for it).
    @discardableResult
    public func keep(body: [UInt8], reason: String, receiver: String, request: HTTPRequest) throws(IOError) -> String? {
        let now = clock.now()
        let kept = body.prefix(maxBodyBytes)
        func line(file: String?) -> [UInt8] {
            var w = JSONWriter(capacity: 512)
            w.beginObject()
            w.key("time"); w.string(now.rfc3339())
            w.key("receiver"); w.string(receiver)
            w.key("reason"); w.string(reason)
            if let file { w.key("body_file"); w.string(file) } else { w.key("body_left_out"); w.string("over quarantine.max_bytes") }
            w.key("body_bytes"); w.int(Int64(body.count))
            w.key("kept_bytes"); w.int(Int64(file == nil ? 0 : kept.count))
            if let ct = request.header("content-type") { w.key("content_type"); w.string(String(ct.prefix(100))) }
            w.endObject()
            w.newline()
            return w.bytes
        }
        return try state.withLock { s throws(IOError) -> String? in
            s.sequence += 1
            let dir = FileIO.join(directory, receiver)
            let file = FileIO.join(dir, "\(now.seconds)-\(now.nanoseconds)-\(s.sequence).body")
            let withBody = line(file: file)
            if makeRoom(kept.count + withBody.count, &s) {
                try FileIO.append(file, Array(kept))
                s.bytes += kept.count
                s.bodies.append((file, kept.count))
                try append(receiver, withBody, &s)
                return file
            }
            let without = line(file: nil)
            if makeRoom(without.count, &s) {
                s.contentsLeftOut += 1
                try append(receiver, without, &s)
            } else {
                s.linesDropped += 1
            }
            return nil
        }
    }

    public struct Usage: Sendable {
        public var bytes: Int
        public var bodiesDropped: Int
        public var contentsLeftOut: Int
        public var linesDropped: Int
    }

    public var usage: Usage {
        state.withLock {
            Usage(bytes: $0.bytes, bodiesDropped: $0.bodiesDropped, contentsLeftOut: $0.contentsLeftOut, linesDropped: $0.linesDropped)
        }
    }
}
