import Glibc
import HealthgateCore
import Posix
import Storage

/// Where the sink wrote each record's point — measurement, tag set, time — by the record's key
/// `(device, uuid, part)`, in SQLite under the data dir, so that a delete (which carries only
/// the key) can find the points to remove.
///
/// Written as a log, not a B-tree by key: HealthKit's uuids are random, and a table keyed by
/// them dirtied a page per point at every commit (a tenth of the rate InfluxDB takes, with a
/// year of history to backfill). Points go in the order they are written into the open chunk
/// (a table with no index: an append); once it holds `chunkRows` points the write that filled it
/// seals it — indexes it in one sort — and it is never written again. The sort is by a 64-bit
/// hash of the key (`keyHash`), not by the key's two texts: a third of the cost (sorting a
/// million `(device, uuid)` texts stalled a backfill for three seconds); a lookup asks each
/// sealed chunk's index by hash, checks the key itself, and scans the open one. Chunks from
/// before the hash (`chunk_<n>`, indexed by `(device, uuid)`) are still read and cleaned. Every
/// point a key was written as stays until the key is deleted, so a delete removes them all
/// (also the old point of a record that came again with another time).
final class PointIndex {
    struct Point: Equatable {
        var measurement: String
        var tags: [(String, String)]
        var timeNanos: Int64

        static func == (a: Point, b: Point) -> Bool {
            a.timeNanos == b.timeNanos && a.measurement == b.measurement && a.tags.elementsEqual(b.tags, by: { $0 == $1 })
        }
    }

    /// A point's series as the line protocol writes it — measurement and tags, escaped, the
    /// line's bytes up to its fields — the key of `seriesIDs` (hashed as bytes: no string is
    /// made per point).
    struct SeriesKey: Hashable {
        let bytes: ArraySlice<UInt8>

        static func == (a: SeriesKey, b: SeriesKey) -> Bool {
            a.bytes.count == b.bytes.count && a.bytes.withUnsafeBytes { x in
                b.bytes.withUnsafeBytes { y in x.count == 0 || memcmp(x.baseAddress!, y.baseAddress!, x.count) == 0 }
            }
        }

        func hash(into h: inout Hasher) {
            bytes.withUnsafeBytes { h.combine(bytes: $0) }
        }
    }

    /// One written point: its record's key, its series (as `SeriesKey` says) and its time.
    struct Row {
        var device: String
        var uuid: String
        var part: Int?
        var series: ArraySlice<UInt8>
        var timeNanos: Int64
    }

    let path: String
    /// Points in a chunk before it is sealed: the most a lookup scans.
    let chunkRows: Int
    private var db: SQLite?
    private var addSeries: SQLite.Statement?
    /// The open chunk, how many points it holds, and its insert statement (always hashed).
    private var openChunk: (id: Int64, rows: Int, insert: SQLite.Statement)?
    /// Sealed chunks, oldest first, and whether each is keyed by hash.
    private var sealedChunks: [(id: Int64, hashed: Bool)] = []
    /// The keyed tables of earlier versions that are there: read and cleaned, never written.
    private var legacyTables: [String] = []
    /// The id of each series (measurement and tags) this process has seen.
    private var seriesIDs: [SeriesKey: Int64] = [:]

    init(path: String, chunkRows: Int = 50_000) {
        self.path = path
        self.chunkRows = max(1, chunkRows)
    }

    /// Closes the database; the next use opens it again.
    func close() {
        openChunk = nil
        addSeries = nil
        db = nil
    }

    /// A chunk's table. Its name is made of its number alone: no outside text reaches the SQL.
    private static func table(_ id: Int64, hashed: Bool = true) -> String { hashed ? "hchunk_\(id)" : "chunk_\(id)" }

    /// The 64-bit FNV-1a hash of a record's key, what chunks are indexed by (the same in every
    /// process: the index outlives it). Equal hashes of different keys only cost a row read.
    static func keyHash(device: String, uuid: String) -> Int64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in device.utf8 { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
        h = (h ^ 0xFF) &* 0x100_0000_01b3   // never in UTF-8: "ab"+"c" and "a"+"bc" differ
        for b in uuid.utf8 { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
        return Int64(bitPattern: h)
    }

    // A series (measurement and tag set) once, in `series`; chunks listed in `point_chunks`.
    private func open() throws -> SQLite {
        if let db { return db }
        try FileIO.makeDirectories(FileIO.dirname(path), mode: 0o700)
        // Used by the sink's thread alone: no mutex around each call.
        let d = try SQLite(path: path, sharedAcrossThreads: false)
        try d.execute("""
            CREATE TABLE IF NOT EXISTS series (id INTEGER PRIMARY KEY, measurement TEXT NOT NULL, tags TEXT NOT NULL,
                UNIQUE (measurement, tags))
            """)
        try d.execute("""
            CREATE TABLE IF NOT EXISTS point_chunks (id INTEGER PRIMARY KEY, rows INTEGER NOT NULL, sealed INTEGER NOT NULL,
                hashed INTEGER NOT NULL DEFAULT 1)
            """)
        // Chunks of the version before the hash: the column says so (0) for each of them.
        if try d.query("SELECT 1 FROM pragma_table_info('point_chunks') WHERE name = 'hashed'").isEmpty {
            try d.execute("ALTER TABLE point_chunks ADD COLUMN hashed INTEGER NOT NULL DEFAULT 0")
        }
        legacyTables = try ["points", "record_points"].filter {
            !(try d.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", [.text($0)])).isEmpty
        }
        addSeries = try d.prepare("INSERT OR IGNORE INTO series (measurement, tags) VALUES (?, ?)")
        db = d
        var open: (id: Int64, rows: Int, hashed: Bool)?
        sealedChunks = []
        for row in try d.query("SELECT id, rows, sealed, hashed FROM point_chunks ORDER BY id") {
            let id = row[0].int ?? 0, hashed = row[3].int != 0
            if row[2].int == 1 { sealedChunks.append((id, hashed)) } else if open == nil { open = (id, Int(row[1].int ?? 0), hashed) }
        }
        if let open, open.hashed {
            openChunk = (open.id, open.rows, try d.prepare("INSERT INTO \(PointIndex.table(open.id)) VALUES (?, ?, ?, ?, ?, ?)"))
        } else {
            try d.transaction {
                // An open chunk of the version before: sealed as it is (its index by key), so
                // that every chunk written from now on is hashed.
                if let open {
                    let table = PointIndex.table(open.id, hashed: false)
                    try d.execute("CREATE INDEX IF NOT EXISTS \(table)_key ON \(table) (device, uuid)")
                    try d.execute("UPDATE point_chunks SET sealed = 1 WHERE id = ?", [.int(open.id)])
                    sealedChunks.append((open.id, false))
                }
                try startChunk(d)
            }
        }
        return d
    }

    /// A new open chunk (inside a transaction).
    private func startChunk(_ d: SQLite) throws {
        try d.execute("INSERT INTO point_chunks (rows, sealed, hashed) VALUES (0, 0, 1)")
        guard let id = try d.query("SELECT max(id) FROM point_chunks").first?.first?.int else {
            throw SQLite.Failure(description: "\(path): a chunk just listed is not there")
        }
        try d.execute("""
            CREATE TABLE \(PointIndex.table(id)) (key INTEGER NOT NULL, device TEXT NOT NULL, uuid TEXT NOT NULL,
                part INTEGER NOT NULL, series INTEGER NOT NULL, time INTEGER NOT NULL)
            """)
        openChunk = (id, 0, try d.prepare("INSERT INTO \(PointIndex.table(id)) VALUES (?, ?, ?, ?, ?, ?)"))
    }

    /// Indexes the open chunk by key hash (one sort of integers) and opens the next, in one
    /// transaction.
    private func seal(_ d: SQLite) throws {
        guard let chunk = openChunk else { return }
        let table = PointIndex.table(chunk.id)
        try d.transaction {
            try d.execute("CREATE INDEX \(table)_key ON \(table) (key)")
            try d.execute("UPDATE point_chunks SET sealed = 1 WHERE id = ?", [.int(chunk.id)])
            try startChunk(d)
        }
        sealedChunks.append((chunk.id, true))
    }

    /// The tables a lookup reads, oldest first, and whether each is keyed by hash.
    private var tables: [(name: String, hashed: Bool)] {
        legacyTables.map { ($0, false) }
            + (sealedChunks + (openChunk.map { [($0.id, true)] } ?? [])).map { (PointIndex.table($0.id, hashed: $0.hashed), $0.hashed) }
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

    private func seriesID(_ series: ArraySlice<UInt8>, in db: SQLite) throws -> Int64 {
        if let id = seriesIDs[SeriesKey(bytes: series)] { return id }
        let p = PointIndex.parseSeries(series)
        let tags = PointIndex.pack(p.tags)
        try addSeries!.run(.text(p.measurement), .text(tags))
        guard let id = try db.query("SELECT id FROM series WHERE measurement = ? AND tags = ?", [.text(p.measurement), .text(tags)])
            .first?.first?.int else { throw SQLite.Failure(description: "\(path): a series just written is not there") }
        if seriesIDs.count >= 100_000 { seriesIDs.removeAll() }
        // Its own bytes: the key must not keep the request's whole body alive.
        seriesIDs[SeriesKey(bytes: ArraySlice(Array(series)))] = id
        return id
    }

    /// Whether `b[i]` is a backslash escaping a separator.
    private static func escapes(_ b: ArraySlice<UInt8>, at i: Int) -> Bool {
        b[i] == UInt8(ascii: "\\") && i + 1 < b.endIndex
            && (b[i + 1] == UInt8(ascii: ",") || b[i + 1] == UInt8(ascii: " ") || b[i + 1] == UInt8(ascii: "="))
    }

    /// A series' measurement and tags from its line-protocol bytes (`m,k=v,k2=v2`), unescaped
    /// as InfluxDB reads them: what a delete must name.
    static func parseSeries(_ bytes: ArraySlice<UInt8>) -> (measurement: String, tags: [(String, String)]) {
        // Split at the commas and the first `=` of each pair that are not escaped.
        var pieces: [ArraySlice<UInt8>] = []
        var from = bytes.startIndex
        var i = bytes.startIndex
        while i < bytes.endIndex {
            if escapes(bytes, at: i) { i += 2; continue }
            if bytes[i] == UInt8(ascii: ",") {
                pieces.append(bytes[from..<i])
                from = i + 1
            }
            i += 1
        }
        pieces.append(bytes[from..<bytes.endIndex])
        func unescape(_ b: ArraySlice<UInt8>) -> String {
            var out: [UInt8] = []
            var j = b.startIndex
            while j < b.endIndex {
                if escapes(b, at: j) { j += 1 }
                out.append(b[j])
                j += 1
            }
            return String(decoding: out, as: UTF8.self)
        }
        var tags: [(String, String)] = []
        for pair in pieces.dropFirst() {
            var j = pair.startIndex
            while j < pair.endIndex && !(pair[j] == UInt8(ascii: "=") ) {
                j += escapes(pair, at: j) ? 2 : 1
            }
            guard j < pair.endIndex else { continue }
            tags.append((unescape(pair[..<j]), unescape(pair[(j + 1)...])))
        }
        return (unescape(pieces[0]), tags)
    }

    /// Notes where each record's point went, in one transaction, the statement prepared once
    /// per chunk and its values bound one by one (no list of values made per point); the write
    /// that fills the open chunk seals it.
    func record(_ rows: [Row]) throws {
        guard !rows.isEmpty else { return }
        let db = try open()
        guard let chunk = openChunk else { return }
        try db.transaction {
            let s = chunk.insert
            for row in rows {
                s.bind(1, int: PointIndex.keyHash(device: row.device, uuid: row.uuid))
                s.bind(2, text: row.device)
                s.bind(3, text: row.uuid)
                s.bind(4, int: Int64(row.part ?? -1))
                s.bind(5, int: try seriesID(row.series, in: db))
                s.bind(6, int: row.timeNanos)
                try s.step()
            }
            try db.execute("UPDATE point_chunks SET rows = ? WHERE id = ?", [.int(Int64(chunk.rows + rows.count)), .int(chunk.id)])
        }
        openChunk?.rows += rows.count
        if chunk.rows + rows.count >= chunkRows { try seal(db) }
    }

    /// Seals the open chunk if it holds `chunkRows` points or more.
    func sealIfFull() throws {
        guard let db, let chunk = openChunk, chunk.rows >= chunkRows else { return }
        try seal(db)
    }

    /// Every point written under `(device, uuid)`, all parts, each once, oldest first.
    func points(device: String, uuid: String) throws -> [Point] {
        let db = try open()
        try sealIfFull()
        var found: [Point] = []
        let key = PointIndex.keyHash(device: device, uuid: uuid)
        for (table, hashed) in tables {
            let rows = table == "points"
                ? try db.query("SELECT measurement, tags, time FROM points WHERE device = ? AND uuid = ?", [.text(device), .text(uuid)])
                : hashed
                ? try db.query("""
                    SELECT s.measurement, s.tags, p.time FROM \(table) p JOIN series s ON s.id = p.series
                    WHERE p.key = ? AND p.device = ? AND p.uuid = ?
                    """, [.int(key), .text(device), .text(uuid)])
                : try db.query("""
                    SELECT s.measurement, s.tags, p.time FROM \(table) p JOIN series s ON s.id = p.series
                    WHERE p.device = ? AND p.uuid = ?
                    """, [.text(device), .text(uuid)])
            for r in rows {
                let p = Point(measurement: r[0].text ?? "", tags: PointIndex.unpack(r[1].text ?? ""), timeNanos: r[2].int ?? 0)
                if !found.contains(p) { found.append(p) }
            }
        }
        return found
    }

    /// Forgets every point of `(device, uuid)`.
    func remove(device: String, uuid: String) throws {
        let db = try open()
        let key = PointIndex.keyHash(device: device, uuid: uuid)
        try db.transaction {
            for (table, hashed) in tables {
                if hashed {
                    try db.execute("DELETE FROM \(table) WHERE key = ? AND device = ? AND uuid = ?", [.int(key), .text(device), .text(uuid)])
                } else {
                    try db.execute("DELETE FROM \(table) WHERE device = ? AND uuid = ?", [.text(device), .text(uuid)])
                }
            }
        }
    }
}
