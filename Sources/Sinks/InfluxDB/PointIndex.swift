import HealthgateCore
import Posix
import Storage

/// Where the sink wrote each record's point — measurement, tag set, time — by the record's key
/// `(device, uuid, part)`, in SQLite under the data dir, so that a delete (which carries only
/// the key) can find the point to remove. One row per key: a record written again replaces it.
final class PointIndex {
    struct Point: Equatable {
        var measurement: String
        var tags: [(String, String)]
        var timeNanos: Int64

        static func == (a: Point, b: Point) -> Bool {
            a.measurement == b.measurement && a.timeNanos == b.timeNanos && a.tags.elementsEqual(b.tags, by: { $0 == $1 })
        }
    }

    let path: String
    private var db: SQLite?

    init(path: String) { self.path = path }

    /// Closes the database; the next use opens it again.
    func close() { db = nil }

    private func open() throws -> SQLite {
        if let db { return db }
        try FileIO.makeDirectories(FileIO.dirname(path), mode: 0o700)
        let d = try SQLite(path: path)
        try d.execute("""
            CREATE TABLE IF NOT EXISTS points (device TEXT NOT NULL, uuid TEXT NOT NULL, part INTEGER NOT NULL,
                measurement TEXT NOT NULL, tags TEXT NOT NULL, time INTEGER NOT NULL, PRIMARY KEY (device, uuid, part))
            """)
        db = d
        return d
    }

    /// Tags as one string: key and value separated by US, pairs by RS (neither can be in a tag).
    static func pack(_ tags: [(String, String)]) -> String {
        tags.map { $0.0 + "\u{1F}" + $0.1 }.joined(separator: "\u{1E}")
    }

    static func unpack(_ s: String) -> [(String, String)] {
        s.split(separator: "\u{1E}").compactMap { pair in
            let kv = pair.split(separator: "\u{1F}", maxSplits: 1, omittingEmptySubsequences: false)
            return kv.count == 2 ? (String(kv[0]), String(kv[1])) : nil
        }
    }

    func record(_ entries: [(record: CanonicalRecord, point: Point)]) throws {
        guard !entries.isEmpty else { return }
        let db = try open()
        // Rows go in 200 at a time: one statement to prepare per 200, not per row.
        try db.transaction {
            var start = 0
            while start < entries.count {
                let chunk = entries[start..<min(entries.count, start + 200)]
                let sql = "INSERT OR REPLACE INTO points VALUES "
                    + Array(repeating: "(?, ?, ?, ?, ?, ?)", count: chunk.count).joined(separator: ", ")
                var values: [SQLite.Value] = []
                values.reserveCapacity(chunk.count * 6)
                for (r, p) in chunk {
                    values += [.text(r.device), .text(r.uuid), .int(Int64(r.part ?? -1)), .text(p.measurement),
                               .text(PointIndex.pack(p.tags)), .int(p.timeNanos)]
                }
                try db.execute(sql, values)
                start += 200
            }
        }
    }

    /// Every point written under `(device, uuid)`, all parts.
    func points(device: String, uuid: String) throws -> [Point] {
        try open().query("SELECT measurement, tags, time FROM points WHERE device = ? AND uuid = ?", [.text(device), .text(uuid)])
            .map { Point(measurement: $0[0].text ?? "", tags: PointIndex.unpack($0[1].text ?? ""), timeNanos: $0[2].int ?? 0) }
    }

    func remove(device: String, uuid: String) throws {
        try open().execute("DELETE FROM points WHERE device = ? AND uuid = ?", [.text(device), .text(uuid)])
    }
}
