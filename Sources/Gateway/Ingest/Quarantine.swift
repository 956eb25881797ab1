import FastJSON
import HealthgateCore
import Posix
import Synchronization

/// Keeps what could not be taken, with the reason, under `<data_dir>/quarantine/`:
/// bad records beside good ones in `<receiver>.ndjson`, and whole unreadable bodies
/// (size-capped) as files in `<receiver>/`, each with a line in the same NDJSON file.
public final class Quarantine: Sendable {
    public let directory: String
    let maxBodyBytes: Int
    let clock: any Clock
    private let lock = Mutex<UInt64>(0)

    public init(directory: String, maxBodyBytes: Int = 1 << 20, clock: any Clock) {
        self.directory = directory
        self.maxBodyBytes = maxBodyBytes
        self.clock = clock
    }

    func indexPath(_ receiver: String) -> String { FileIO.join(directory, safeName(receiver) + ".ndjson") }

    /// Bad records of an otherwise good request.
    public func keep(records: [QuarantinedRecord], receiver: String) throws(IOError) {
        guard !records.isEmpty else { return }
        let now = clock.now().rfc3339()
        var w = JSONWriter(capacity: 256 * records.count)
        for q in records {
            w.beginObject()
            w.key("time"); w.string(now)
            w.key("receiver"); w.string(receiver)
            w.key("reason"); w.string(q.reason)
            w.key("record"); w.raw(q.raw.bytes)
            w.endObject()
            w.newline()
        }
        try lock.withLock { _ throws(IOError) in try FileIO.append(indexPath(receiver), w.bytes) }
    }

    /// A whole body that could not be read. Returns the file it was kept in.
    @discardableResult
    public func keep(body: [UInt8], reason: String, receiver: String, request: HTTPRequest) throws(IOError) -> String {
        let now = clock.now()
        let n = lock.withLock { n -> UInt64 in
            n += 1
            return n
        }
        let dir = FileIO.join(directory, safeName(receiver))
        try FileIO.makeDirectories(dir, mode: 0o700)
        let file = FileIO.join(dir, "\(now.seconds)-\(now.nanoseconds)-\(n).body")
        let kept = Array(body.prefix(maxBodyBytes))
        try FileIO.append(file, kept)
        var w = JSONWriter(capacity: 512)
        w.beginObject()
        w.key("time"); w.string(now.rfc3339())
        w.key("receiver"); w.string(receiver)
        w.key("reason"); w.string(reason)
        w.key("body_file"); w.string(file)
        w.key("body_bytes"); w.int(Int64(body.count))
        w.key("kept_bytes"); w.int(Int64(kept.count))
        if let ct = request.header("content-type") { w.key("content_type"); w.string(ct) }
        w.endObject()
        w.newline()
        try lock.withLock { _ throws(IOError) in try FileIO.append(indexPath(receiver), w.bytes) }
        return file
    }

    private func safeName(_ s: String) -> String {
        String(s.map { $0 == "/" || $0 == "\\" ? "_" : $0 }).replacingDotPrefix
    }
}

extension String {
    var replacingDotPrefix: String { hasPrefix(".") ? "_" + dropFirst() : self }
}
