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
            a.timeNanos == b.timeNanos && Series(a) == Series(b)
        }
    }

    /// A point's series (measurement and tag set, not the time): the key of `seriesIDs`,
    /// hashed from the point's own strings (none made per record).
    struct Series: Hashable {
        let point: Point
        init(_ point: Point) { self.point = point }

        static func == (a: Series, b: Series) -> Bool {
            a.point.measurement == b.point.measurement && a.point.tags.elementsEqual(b.point.tags, by: { $0 == $1 })
        }

        func hash(into h: inout Hasher) {
            h.combine(point.measurement)
            for (k, v) in point.tags {
                h.combine(k)
                h.combine(v)
            }
        }
    }

    let path: String
    private var db: SQLite?
    private var upsert: SQLite.Statement?
    private var addSeries: SQLite.Statement?
    /// The id of each series (measurement and tags) this process has seen.
    private var seriesIDs: [Series: Int64] = [:]
    /// Whether the one-table index of earlier versions is there: read and cleaned as well.
    private var legacy = false

    init(path: String) { self.path = path }

    /// Closes the database; the next use opens it again.
    func close() {
        upsert = nil
        addSeries = nil
        db = nil
    }

    // A series (measurement and tag set) once, in `series`; a record's point as the series'
    // id and the time, by the record's key, in a table that is its own key's B-tree.
    private func open() throws -> SQLite {
        if let db { return db }
        try FileIO.makeDirectories(FileIO.dirname(path), mode: 0o700)
        let d = try SQLite(path: path)
        try d.execute("""
            CREATE TABLE IF NOT EXISTS series (id INTEGER PRIMARY KEY, measurement TEXT NOT NULL, tags TEXT NOT NULL,
                UNIQUE (measurement, tags))
            """)
        try d.execute("""
            CREATE TABLE IF NOT EXISTS record_points (device TEXT NOT NULL, uuid TEXT NOT NULL, part INTEGER NOT NULL,
                series INTEGER NOT NULL, time INTEGER NOT NULL, PRIMARY KEY (device, uuid, part)) WITHOUT ROWID
            """)
        legacy = !(try d.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'points'")).isEmpty
        upsert = try d.prepare("INSERT OR REPLACE INTO record_points VALUES (?, ?, ?, ?, ?)")
        addSeries = try d.prepare("INSERT OR IGNORE INTO series (measurement, tags) VALUES (?, ?)")
        db = d
        return d
    }

    /// Tags as one string: key and value separated by US, pairs by RS (neither can be in a tag).
    static func pack(_ tags: [(String, String)]) -> String {
        var s = ""
        for (i, t) in tags.enumerated() {
            if i > 0 { s += "\u{1E}" }
            s += t.0
            s += "\u{1F}"
            s += t.1
        }
        return s
    }

    static func unpack(_ s: String) -> [(String, String)] {
        s.split(separator: "\u{1E}").compactMap { pair in
            let kv = pair.split(separator: "\u{1F}", maxSplits: 1, omittingEmptySubsequences: false)
            return kv.count == 2 ? (String(kv[0]), String(kv[1])) : nil
        }
    }

    private func seriesID(_ p: Point, in db: SQLite) throws -> Int64 {
        let key = Series(p)
        if let id = seriesIDs[key] { return id }
        let tags = PointIndex.pack(p.tags)
        try addSeries!.run(.text(p.measurement), .text(tags))
        guard let id = try db.query("SELECT id FROM series WHERE measurement = ? AND tags = ?", [.text(p.measurement), .text(tags)])
            .first?.first?.int else { throw SQLite.Failure(description: "\(path): a series just written is not there") }
        if seriesIDs.count >= 100_000 { seriesIDs.removeAll() }
        seriesIDs[key] = id
        return id
    }

    /// Notes where each record's point went, in one transaction, the statement prepared once.
    func record(_ entries: [(record: CanonicalRecord, point: Point)]) throws {
        guard !entries.isEmpty else { return }
        let db = try open()
        try db.transaction {
            for (r, p) in entries {
                try upsert!.run(.text(r.device), .text(r.uuid), .int(Int64(r.part ?? -1)), .int(try seriesID(p, in: db)),
                                .int(p.timeNanos))
            }
        }
    }

    /// Every point written under `(device, uuid)`, all parts.
    func points(device: String, uuid: String) throws -> [Point] {
        let db = try open()
        var found = try db.query("""
            SELECT s.measurement, s.tags, p.time FROM record_points p JOIN series s ON s.id = p.series
            WHERE p.device = ? AND p.uuid = ?
            """, [.text(device), .text(uuid)])
        if legacy {
            found += try db.query("SELECT measurement, tags, time FROM points WHERE device = ? AND uuid = ?", [.text(device), .text(uuid)])
        }
        return found.map { Point(measurement: $0[0].text ?? "", tags: PointIndex.unpack($0[1].text ?? ""), timeNanos: $0[2].int ?? 0) }
    }

    func remove(device: String, uuid: String) throws {
        let db = try open()
        try db.execute("DELETE FROM record_points WHERE device = ? AND uuid = ?", [.text(device), .text(uuid)])
        if legacy { try db.execute("DELETE FROM points WHERE device = ? AND uuid = ?", [.text(device), .text(uuid)]) }
    }
}
