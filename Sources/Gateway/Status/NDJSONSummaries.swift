import FastJSON
import Glibc
import HealthgateCore
import Posix
import Synchronization

/// How many lines an append-only NDJSON file holds (a quarantine's, a sink's dead letters) and
/// what its newest line says, for the status page. Counted incrementally: a look reads only what
/// was appended since the last one (a file that shrank, rewritten or rotated, is counted anew).
final class NDJSONSummaries: Sendable {
    struct Summary: Sendable {
        var lines: Int
        var bytes: Int
        var newestTime: String?
        var newestReason: String?
    }

    private let known = Mutex<[String: Summary]>([:])

    /// nil when the file does not exist or is empty.
    func of(_ path: String) -> Summary? {
        guard let size = FileIO.fileSize(path), size > 0 else { return nil }
        let before = known.withLock { $0[path] }
        if let before, before.bytes == size { return before }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var lines = 0
        var from = 0
        if let before, before.bytes < size {
            lines = before.lines
            from = before.bytes
        }
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        var at = from
        while at < size {
            let n = chunk.withUnsafeMutableBytes { pread(fd, $0.baseAddress, min($0.count, size - at), off_t(at)) }
            if n <= 0 { break }
            for b in chunk[0..<n] where b == 0x0A { lines += 1 }
            at += n
        }
        var summary = Summary(lines: lines, bytes: size)
        // The newest complete line, from the file's last 64 KiB.
        let tailStart = max(0, size - 65_536)
        var tail = [UInt8](repeating: 0, count: size - tailStart)
        let n = tail.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(tailStart)) }
        if n > 0 {
            let text = tail[0..<n]
            let end = text.last == 0x0A ? text.index(before: text.endIndex) : text.endIndex
            let start = text[..<end].lastIndex(of: 0x0A).map { $0 + 1 } ?? text.startIndex
            if start < end, let doc = try? JSONParser().parse(Array(text[start..<end])) {
                summary.newestTime = doc.root["time"]?.string
                summary.newestReason = doc.root["reason"]?.string.map { String($0.prefix(300)) }
            }
        }
        known.withLock { $0[path] = summary }
        return summary
    }
}
