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
/// seals it — indexes it in one sort — and it is never written again. A chunk's row is small:
/// the device as a number (table `devices`), the uuid as its 16 bytes when it is a UUID's text
/// (`StoredKey`), and a 64-bit `key` drawn from the uuid that the sort is by — integers, not the
/// key's two texts (sorting a million `(device, uuid)` texts stalled a backfill for three
/// seconds); rows go in 32 to a statement. A lookup asks each sealed chunk's index by `key`,
/// checks the device and uuid themselves, and scans the open one. Chunks from
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
    /// The open chunk, how many points it holds, and its insert statements: one row, and
    /// `rowsPerInsert` rows (always hashed).
    typealias OpenChunk = (id: Int64, rows: Int, insert: SQLite.Statement, insertMany: SQLite.Statement)
    private var openChunk: OpenChunk?
    static let rowsPerInsert = 32
    /// The number of each device this index has seen (table `devices`), and the last one asked.
    private var deviceIDs: [String: Int64] = [:]
    private var lastDevice: (name: String, id: Int64)?
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
        deviceIDs = [:]
        lastDevice = nil
        addSeries = nil
        db = nil
    }

    /// A chunk's table. Its name is made of its number alone: no outside text reaches the SQL.
    private static func table(_ id: Int64, hashed: Bool = true) -> String { hashed ? "hchunk_\(id)" : "chunk_\(id)" }

    /// A uuid as a chunk stores it: a UUID's text (8-4-4-4-12 hex digits, lower or upper case
    /// throughout) as a case byte and its 16 bytes, anything else as its text; and the 64-bit
    /// key the chunk is sorted by: the UUID's first 8 bytes (random in HealthKit's), or the
    /// FNV-1a hash of the text. The same in every process (the index outlives it); keys equal
    /// for different uuids only cost a row read.
    struct StoredKey {
        var key: Int64
        /// 17 bytes, or none (then the uuid is stored as text).
        var bytes: (UInt64, UInt64, UInt8)?

        init(uuid: String) {
            var text = uuid
            let parsed = text.withUTF8 { StoredKey.parse($0) }
            if let parsed {
                bytes = parsed
                key = Int64(bitPattern: parsed.0.bigEndian)
            } else {
                bytes = nil
                var h: UInt64 = 0xcbf2_9ce4_8422_2325
                text.withUTF8 { for b in $0 { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 } }
                key = Int64(bitPattern: h)
            }
        }

        static func parse(_ p: UnsafeBufferPointer<UInt8>) -> (UInt64, UInt64, UInt8)? {
            guard p.count == 36, p[8] == 0x2D, p[13] == 0x2D, p[18] == 0x2D, p[23] == 0x2D else { return nil }
            var words: (UInt64, UInt64) = (0, 0)
            var n = 0
            var lower = false, upper = false
            for (i, c) in p.enumerated() where i != 8 && i != 13 && i != 18 && i != 23 {
                let v: UInt8
                switch c {
                case 0x30...0x39: v = c - 0x30
                case 0x61...0x66: v = c - 0x61 + 10; lower = true
                case 0x41...0x46: v = c - 0x41 + 10; upper = true
                default: return nil
                }
                if n < 16 { words.0 = words.0 << 4 | UInt64(v) } else { words.1 = words.1 << 4 | UInt64(v) }
                n += 1
            }
            if lower && upper { return nil }   // mixed case: kept as text, so no two texts meet
            // Stored big-endian, so that the bytes read as the UUID's.
            return (words.0.bigEndian, words.1.bigEndian, upper ? 1 : 0)
        }

        /// Binds the uuid to parameter `i`.
        func bind(_ s: SQLite.Statement, _ i: Int32, text: String) {
            if var b = bytes {
                withUnsafeBytes(of: &b) { s.bind(i, blob: UnsafeRawBufferPointer(rebasing: $0[0..<17])) }
            } else {
                s.bind(i, text: text)
            }
        }

        func value(text: String) -> SQLite.Value {
            guard var b = bytes else { return .text(text) }
            return .blob(withUnsafeBytes(of: &b) { Array($0[0..<17]) })
        }
    }

    /// The device's number, made the first time it is seen.
    private func deviceID(_ name: String, in db: SQLite, create: Bool) throws -> Int64? {
        if let last = lastDevice, last.name == name { return last.id }
        if let id = deviceIDs[name] {
            lastDevice = (name, id)
            return id
        }
        if create { try db.execute("INSERT OR IGNORE INTO devices (name) VALUES (?)", [.text(name)]) }
        guard let id = try db.query("SELECT id FROM devices WHERE name = ?", [.text(name)]).first?.first?.int else { return nil }
        if deviceIDs.count >= 10_000 { deviceIDs.removeAll() }
        deviceIDs[name] = id
        lastDevice = (name, id)
        return id
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
        try d.execute("CREATE TABLE IF NOT EXISTS devices (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)")
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
            openChunk = try PointIndex.chunk(open.id, rows: open.rows, in: d)
            // Full: the process that filled it stopped before it sealed it.
            if open.rows >= chunkRows { try seal(d) }
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
            CREATE TABLE \(PointIndex.table(id)) (key INTEGER NOT NULL, device INTEGER NOT NULL, uuid NOT NULL,
                part INTEGER NOT NULL, series INTEGER NOT NULL, time INTEGER NOT NULL)
            """)
        openChunk = try PointIndex.chunk(id, rows: 0, in: d)
    }

    /// An open chunk and its insert statements.
    private static func chunk(_ id: Int64, rows: Int, in d: SQLite) throws -> OpenChunk {
        let one = "(?, ?, ?, ?, ?, ?)"
        let many = Array(repeating: one, count: rowsPerInsert).joined(separator: ", ")
        return (id, rows, try d.prepare("INSERT INTO \(table(id)) VALUES \(one)"),
                try d.prepare("INSERT INTO \(table(id)) VALUES \(many)"))
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
        do {
            try db.transaction { try insert(rows, into: chunk, db) }
        } catch {
            // What a failed transaction leaves out must not stay in the caches either.
            deviceIDs = [:]
            lastDevice = nil
            seriesIDs = [:]
            throw error
        }
        openChunk?.rows += rows.count
        if chunk.rows + rows.count >= chunkRows { try seal(db) }
    }

    /// The rows into the open chunk, `rowsPerInsert` to a statement (inside a transaction).
    private func insert(_ rows: [Row], into chunk: OpenChunk, _ db: SQLite) throws {
        var at = 0
        while at < rows.count {
            let n = rows.count - at >= PointIndex.rowsPerInsert ? PointIndex.rowsPerInsert : 1
            let s = n == 1 ? chunk.insert : chunk.insertMany
            for k in 0..<n {
                let row = rows[at + k]
                let p = Int32(k * 6)
                let stored = StoredKey(uuid: row.uuid)
                s.bind(p + 1, int: stored.key)
                guard let device = try deviceID(row.device, in: db, create: true) else {
                    throw SQLite.Failure(description: "\(path): a device just written is not there")
                }
                s.bind(p + 2, int: device)
                stored.bind(s, p + 3, text: row.uuid)
                s.bind(p + 4, int: Int64(row.part ?? -1))
                s.bind(p + 5, int: try seriesID(row.series, in: db))
                s.bind(p + 6, int: row.timeNanos)
            }
            try s.step()
            at += n
        }
        try db.execute("UPDATE point_chunks SET rows = ? WHERE id = ?", [.int(Int64(chunk.rows + rows.count)), .int(chunk.id)])
    }

    /// Every point written under `(device, uuid)`, all parts, each once, oldest first.
    func points(device: String, uuid: String) throws -> [Point] {
        let db = try open()
        var found: [Point] = []
        let stored = StoredKey(uuid: uuid)
        let deviceID = try self.deviceID(device, in: db, create: false)
        for (table, hashed) in tables {
            if hashed && deviceID == nil { continue }   // a device never written has no point there
            let rows = table == "points"
                ? try db.query("SELECT measurement, tags, time FROM points WHERE device = ? AND uuid = ?", [.text(device), .text(uuid)])
                : hashed
                ? try db.query("""
                    SELECT s.measurement, s.tags, p.time FROM \(table) p JOIN series s ON s.id = p.series
                    WHERE p.key = ? AND p.device = ? AND p.uuid = ?
                    """, [.int(stored.key), .int(deviceID!), stored.value(text: uuid)])
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
        let stored = StoredKey(uuid: uuid)
        let deviceID = try self.deviceID(device, in: db, create: false)
        try db.transaction {
            for (table, hashed) in tables {
                if hashed {
                    guard let deviceID else { continue }
                    try db.execute("DELETE FROM \(table) WHERE key = ? AND device = ? AND uuid = ?",
                                   [.int(stored.key), .int(deviceID), stored.value(text: uuid)])
                } else {
                    try db.execute("DELETE FROM \(table) WHERE device = ? AND uuid = ?", [.text(device), .text(uuid)])
                }
            }
        }
    }
}
