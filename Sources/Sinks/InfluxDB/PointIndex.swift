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
/// year of history to backfill). The points of one request go into the open chunk as one row
/// (`pruns`: a packed blob, `PackedPoints`); once the chunk holds `chunkRows` points the write
/// that filled it seals it — its points sorted by key in one go, into one blob (`psealed`) —
/// and it is never written again but to mark a point removed. A point is small: the device as a
/// number (table `devices`), the uuid as its 16 bytes when it is a UUID's text (`StoredKey`), and
/// a 64-bit `key` drawn from the uuid that the sort is by. A lookup binary-searches each sealed
/// chunk's blob in place (SQLite's incremental blob I/O: a few pages read, not the blob), checks
/// the device and uuid themselves, and scans the open chunk's runs. A row per point (5,000 SQLite
/// rows a request, and an index built over them at each seal) took about 1.8 CPU s a million
/// points, a third of the InfluxDB sink's drain. The chunks of earlier versions — a row per point,
/// indexed by key (`hchunk_<n>`) or by `(device, uuid)` (`chunk_<n>`), and the keyed tables before
/// them — are still read and cleaned. Every point a key was written as stays until the key is
/// deleted, so a delete removes them all (also the old point of a record that came again with
/// another time).
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
    struct SeriesKey: Hashable, RecentKey {
        let bytes: ArraySlice<UInt8>

        static func == (a: SeriesKey, b: SeriesKey) -> Bool {
            // memcmp only of two buffers of the same, checked, length (none for empty ones).
            a.bytes.count == b.bytes.count
                && a.bytes.withUnsafeBytes { x in
                    b.bytes.withUnsafeBytes { y in x.count == 0 || memcmp(x.baseAddress!, y.baseAddress!, x.count) == 0 }
                }
        }

        func hash(into h: inout Hasher) {
            bytes.withUnsafeBytes { h.combine(bytes: $0) }
        }

        func isSame(as other: SeriesKey) -> Bool { self == other }
    }

    /// A point's record, as the index keeps it: the device, the uuid's stored form (its text
    /// only when it is no UUID's: empty otherwise) and the part.
    struct Key {
        var device: String
        var stored: StoredKey
        var text: String
        var part: Int?

        init(device: String, uuid: String, part: Int?) {
            self.device = device
            stored = StoredKey(uuid: uuid)
            text = stored.bytes == nil ? uuid : ""
            self.part = part
        }

        /// From the uuid's bytes (a journal line's): no string made for a UUID.
        init(device: String, uuid: UnsafeRawBufferPointer, part: Int?) {
            self.device = device
            // The line's bytes: memory bound to UInt8 already (a [UInt8]'s), read within the call.
            stored = StoredKey(utf8: uuid.assumingMemoryBound(to: UInt8.self))
            text = stored.bytes == nil ? String(decoding: uuid, as: UTF8.self) : ""
            self.part = part
        }
    }

    /// One written point: its record's key, its series (as `SeriesKey` says) and its time.
    struct Row {
        var key: Key
        var series: ArraySlice<UInt8>
        var timeNanos: Int64

        init(key: Key, series: ArraySlice<UInt8>, timeNanos: Int64) {
            self.key = key
            self.series = series
            self.timeNanos = timeNanos
        }

        init(device: String, uuid: String, part: Int?, series: ArraySlice<UInt8>, timeNanos: Int64) {
            self.init(key: Key(device: device, uuid: uuid, part: part), series: series, timeNanos: timeNanos)
        }
    }

    let path: String
    /// Points in a chunk before it is sealed: the most a lookup scans.
    let chunkRows: Int
    private var db: SQLite?
    private var addSeries: SQLite.Statement?
    /// The open chunk (always packed), how many points it holds, and the statement that adds a run.
    typealias OpenChunk = (id: Int64, rows: Int, insert: SQLite.Statement)
    private var openChunk: OpenChunk?
    /// How each chunk is kept (`point_chunks.hashed`): a row a point indexed by `(device, uuid)`
    /// (`chunk_<n>`), a row a point indexed by key (`hchunk_<n>`), or packed (`pruns`, `psealed`).
    enum Format: Int64 {
        case byText = 0, byKey = 1, packed = 2
    }
    /// The number of each device this index has seen (table `devices`), and the last one asked.
    private var deviceIDs: [String: Int64] = [:]
    private var lastDevice: (name: String, id: Int64)?
    /// Sealed chunks, oldest first, and how each is kept.
    private var sealedChunks: [(id: Int64, format: Format)] = []
    /// The runs' rows of each packed sealed chunk looked up so far (a sealed chunk's never change).
    private var sealedRuns: [Int64: [Int64]] = [:]
    /// The keyed tables of earlier versions that are there: read and cleaned, never written.
    private var legacyTables: [String] = []
    /// The id of each series (measurement and tags) this process has seen.
    private var seriesIDs: [SeriesKey: Int64] = [:]
    /// The last few series looked up, compared (length, then bytes) before any is hashed: a
    /// request's points come from a few series, in runs or taken in turn, and hashing a series'
    /// ~90 bytes cost more than the rest of noting its point.
    private var recentSeries = RecentAnswers<SeriesKey, Int64>()

    init(path: String, chunkRows: Int = 50_000) {
        self.path = path
        self.chunkRows = max(1, chunkRows)
    }

    /// Closes the database; the next use opens it again.
    func close() {
        openChunk = nil
        sealedRuns = [:]
        deviceIDs = [:]
        lastDevice = nil
        addSeries = nil
        db = nil
    }

    /// A chunk's table in the formats with a row a point. Its name is made of its number alone:
    /// no outside text reaches the SQL.
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
            self = text.withUTF8 { StoredKey(utf8: $0) }
        }

        /// The same from the uuid's text as bytes (a journal line's), no string made.
        init(utf8: UnsafeBufferPointer<UInt8>) {
            if let parsed = StoredKey.parse(utf8) {
                bytes = parsed
                key = Int64(bitPattern: parsed.0.bigEndian)
            } else {
                bytes = nil
                var h: UInt64 = 0xcbf2_9ce4_8422_2325
                for b in utf8 { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
                key = Int64(bitPattern: h)
            }
        }

        /// The 32 hex digits of a UUID's text (dashes at 8, 13, 18, 23), eight at a time in a
        /// word; nil for any other text, or for one that mixes lower and upper case (kept as text,
        /// so no two texts meet).
        static func parse(_ p: UnsafeBufferPointer<UInt8>) -> (UInt64, UInt64, UInt8)? {
            guard p.count == 36, p[8] == 0x2D, p[13] == 0x2D, p[18] == 0x2D, p[23] == 0x2D, let base = p.baseAddress else { return nil }
            // Every load below lies within the 36 bytes just checked (the last: 4 bytes at 32).
            let raw = UnsafeRawPointer(base)
            let zeros: UInt64 = 0x3030_3030 // four '0's before four digits
            let d0 = hex8(raw.loadUnaligned(as: UInt64.self))
            let d1 = hex8(UInt64(raw.loadUnaligned(fromByteOffset: 9, as: UInt32.self)) << 32 | zeros)
            let d2 = hex8(UInt64(raw.loadUnaligned(fromByteOffset: 14, as: UInt32.self)) << 32 | zeros)
            let d3 = hex8(UInt64(raw.loadUnaligned(fromByteOffset: 19, as: UInt32.self)) << 32 | zeros)
            let d4 = hex8(raw.loadUnaligned(fromByteOffset: 24, as: UInt64.self))
            let d5 = hex8(UInt64(raw.loadUnaligned(fromByteOffset: 32, as: UInt32.self)) << 32 | zeros)
            guard let d0, let d1, let d2, let d3, let d4, let d5 else { return nil }
            let lower = d0.lower || d1.lower || d2.lower || d3.lower || d4.lower || d5.lower
            let upper = d0.upper || d1.upper || d2.upper || d3.upper || d4.upper || d5.upper
            if lower && upper { return nil }
            let w0 = UInt64(d0.value) << 32 | UInt64(d1.value) << 16 | UInt64(d2.value)
            let w1 = UInt64(d3.value) << 48 | UInt64(d4.value) << 16 | UInt64(d5.value)
            // Stored big-endian, so that the bytes read as the UUID's.
            return (w0.bigEndian, w1.bigEndian, upper ? 1 : 0)
        }

        /// Eight hex digits (the first in the lowest byte) as their number, and whether any was
        /// a-f or A-F; nil when a byte is no hex digit. Each byte's class by range tests on the
        /// whole word (no byte above 0x7F, so no carry crosses into the next).
        @inline(__always) static func hex8(_ x: UInt64) -> (value: UInt32, lower: Bool, upper: Bool)? {
            let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
            guard x & highs == 0 else { return nil }
            @inline(__always) func within(_ lo: UInt64, _ hi: UInt64) -> UInt64 {
                ((x &+ (0x80 - lo) &* ones) & ~(x &+ (0x7F - hi) &* ones)) & highs
            }
            let digit = within(0x30, 0x39), lower = within(0x61, 0x66), upper = within(0x41, 0x46)
            guard digit | lower | upper == highs else { return nil }
            // '0'-'9' -> 0-9; 'a'-'f' and 'A'-'F' (bit 6 set) -> 1-6 + 9.
            let v = (x & 0x0F0F_0F0F_0F0F_0F0F) &+ ((x >> 6) & ones) &* 9
            // Pairs of digits into bytes (the first the high nibble), then the four bytes in order.
            let pairs = ((v << 4) | (v >> 8)) & 0x00FF_00FF_00FF_00FF
            let quads = (pairs | (pairs >> 8)) & 0x0000_FFFF_0000_FFFF
            let bytes = UInt32(truncatingIfNeeded: quads | (quads >> 16))
            return (bytes.byteSwapped, lower != 0, upper != 0)
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
        // Used by the sink's thread alone: no mutex around each call. Pages of 16 KiB (a new
        // index's; one made before keeps 4 KiB): a run's blob of ~250 KB is 16 pages written to
        // the WAL and checkpointed, not 62, each a write of its own; larger pages cost more in
        // copying the few small pages a transaction changes besides (64 KiB: ~170 instructions
        // a point more than 4 KiB in `--micro`, 16 KiB ~40).
        let d = try SQLite(path: path, sharedAcrossThreads: false, pageSize: 16_384)
        // Checkpointed at about 4 MiB of WAL whatever the pages (SQLite's default is 1,000 pages).
        let pageSize = try d.query("PRAGMA page_size").first?.first?.int ?? 4_096
        try d.execute("PRAGMA wal_autocheckpoint=\(max(1, (4 << 20) / Int(max(pageSize, 512))))")
        try d.execute(
            """
            CREATE TABLE IF NOT EXISTS series (id INTEGER PRIMARY KEY, measurement TEXT NOT NULL, tags TEXT NOT NULL,
                UNIQUE (measurement, tags))
            """)
        try d.execute("CREATE TABLE IF NOT EXISTS devices (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)")
        try d.execute(
            """
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
        try d.execute("CREATE TABLE IF NOT EXISTS pruns (id INTEGER PRIMARY KEY, chunk INTEGER NOT NULL, points BLOB NOT NULL)")
        try d.execute("CREATE INDEX IF NOT EXISTS pruns_chunk ON pruns (chunk)")
        try d.execute("CREATE TABLE IF NOT EXISTS psealed (chunk INTEGER PRIMARY KEY, runs BLOB NOT NULL, keys BLOB NOT NULL)")
        addSeries = try d.prepare("INSERT OR IGNORE INTO series (measurement, tags) VALUES (?, ?)")
        db = d
        var open: (id: Int64, rows: Int, format: Format)?
        sealedChunks = []
        for row in try d.query("SELECT id, rows, sealed, hashed FROM point_chunks ORDER BY id") {
            let id = row[0].int ?? 0, format = Format(rawValue: row[3].int ?? 0) ?? .byText
            if row[2].int == 1 { sealedChunks.append((id, format)) } else if open == nil { open = (id, Int(row[1].int ?? 0), format) }
        }
        if let open, open.format == .packed {
            openChunk = try PointIndex.chunk(open.id, rows: open.rows, in: d)
            // Full: the process that filled it stopped before it sealed it.
            if open.rows >= chunkRows { try seal(d) }
        } else {
            // What the transaction made is taken in only once it is committed.
            let next = try d.transaction {
                // An open chunk of a version before: sealed as it is (indexed as its version did),
                // so that every chunk written from now on is packed.
                if let open {
                    let table = PointIndex.table(open.id, hashed: open.format == .byKey)
                    try d.execute(
                        "CREATE INDEX IF NOT EXISTS \(table)_key ON \(table) \(open.format == .byKey ? "(key)" : "(device, uuid)")")
                    try d.execute("UPDATE point_chunks SET sealed = 1 WHERE id = ?", [.int(open.id)])
                }
                return try startChunk(d)
            }
            if let open { sealedChunks.append((open.id, open.format)) }
            openChunk = next
        }
        return d
    }

    /// A new open chunk (inside a transaction: the caller takes it as `openChunk` once committed).
    private func startChunk(_ d: SQLite) throws -> OpenChunk {
        try d.execute("INSERT INTO point_chunks (rows, sealed, hashed) VALUES (0, 0, ?)", [.int(Format.packed.rawValue)])
        guard let id = try d.query("SELECT max(id) FROM point_chunks").first?.first?.int else {
            throw SQLite.Failure(description: "\(path): a chunk just listed is not there")
        }
        return try PointIndex.chunk(id, rows: 0, in: d)
    }

    /// An open chunk and its insert statement.
    private static func chunk(_ id: Int64, rows: Int, in d: SQLite) throws -> OpenChunk {
        (id, rows, try d.prepare("INSERT INTO pruns (chunk, points) VALUES (?, ?)"))
    }

    /// Seals the open chunk — its points' keys sorted, with where each point lies (its run and
    /// its place there), into one blob (`PackedPoints.SortedKeys`); the runs stay as they are —
    /// and opens the next, in one transaction.
    private func seal(_ d: SQLite) throws {
        guard let chunk = openChunk else { return }
        let next = try d.transaction {
            var runIDs: [Int64] = []
            var order: [(key: Int64, run: UInt32, index: UInt32)] = []
            order.reserveCapacity(chunk.rows + 1)
            for row in try d.query("SELECT id, points FROM pruns WHERE chunk = ? ORDER BY id", [.int(chunk.id)]) {
                guard let id = row[0].int, let points = row[1].blob else { continue }
                let r = UInt32(runIDs.count)
                runIDs.append(id)
                try points.withUnsafeBytes { b in
                    try b.forEachEntry { e, i in
                        if e.form != PackedPoints.Entry.removed { order.append((e.key, r, UInt32(i))) }
                    }
                }
            }
            // By key, then run and place: read in run and place order, so a stable sort by key alone.
            PointIndex.radixSortByKey(&order)
            try d.execute(
                "INSERT INTO psealed (chunk, runs, keys) VALUES (?, ?, ?)",
                [.int(chunk.id), .blob(PackedPoints.SortedKeys.runs(runIDs)), .blob(PackedPoints.SortedKeys.bytes(order))])
            try d.execute("UPDATE point_chunks SET sealed = 1 WHERE id = ?", [.int(chunk.id)])
            return try startChunk(d)
        }
        openChunk = next
        sealedChunks.append((chunk.id, .packed))
    }

    /// Sorts by key (as signed integers), stably: a least-significant-digit radix sort, a byte
    /// a pass, in safe arrays (bounds checked). A pass whose byte is the same in every key is
    /// skipped (all of them when every key is equal: sequential uuids share their first bytes).
    static func radixSortByKey(_ a: inout [(key: Int64, run: UInt32, index: UInt32)]) {
        let n = a.count
        guard n > 1 else { return }
        // The eight bytes' counts, all from one read of the keys.
        var counts = [Int](repeating: 0, count: 8 * 256)
        for e in a {
            var k = radixBits(e.key)
            for pass in 0..<8 {
                counts[pass * 256 + Int(k & 0xFF)] += 1
                k >>= 8
            }
        }
        var from = a
        var to = a
        for pass in 0..<8 {
            let base = pass * 256
            let shift = UInt64(pass * 8)
            if counts[base + Int(radixBits(from[0].key) >> shift & 0xFF)] == n { continue } // every key has this byte alike
            var sum = 0
            for d in 0..<256 {
                let k = counts[base + d]
                counts[base + d] = sum
                sum += k
            }
            for e in from {
                let d = base + Int(radixBits(e.key) >> shift & 0xFF)
                to[counts[d]] = e
                counts[d] += 1
            }
            swap(&from, &to)
        }
        a = from
    }

    /// A key's bits in the order of the integers: the sign bit flipped (negative keys first).
    @inline(__always) private static func radixBits(_ k: Int64) -> UInt64 {
        UInt64(bitPattern: k) ^ (1 << 63)
    }

    /// The tables of a row a point a lookup reads, oldest first, and whether each is keyed by hash.
    private var rowTables: [(name: String, hashed: Bool)] {
        legacyTables.map { ($0, false) }
            + sealedChunks.filter { $0.format != .packed }.map {
                (PointIndex.table($0.id, hashed: $0.format == .byKey), $0.format == .byKey)
            }
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
        let key = SeriesKey(bytes: series)
        if let id = recentSeries.answer(for: key) { return id }
        if let i = seriesIDs.index(forKey: key) {
            let (own, id) = seriesIDs[i] // the dictionary's key: bytes of its own, no copy
            recentSeries.keep(own, id)
            return id
        }
        let p = PointIndex.parseSeries(series)
        let tags = PointIndex.pack(p.tags)
        try addSeries!.run(.text(p.measurement), .text(tags))
        guard
            let id = try db.query("SELECT id FROM series WHERE measurement = ? AND tags = ?", [.text(p.measurement), .text(tags)])
                .first?.first?.int
        else { throw SQLite.Failure(description: "\(path): a series just written is not there") }
        if seriesIDs.count >= 100_000 { seriesIDs.removeAll() }
        // Its own bytes: the key must not keep the request's whole body alive.
        let own = SeriesKey(bytes: ArraySlice(Array(series)))
        seriesIDs[own] = id
        recentSeries.keep(own, id)
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
            while j < pair.endIndex && !(pair[j] == UInt8(ascii: "=")) {
                j += escapes(pair, at: j) ? 2 : 1
            }
            guard j < pair.endIndex else { continue }
            tags.append((unescape(pair[..<j]), unescape(pair[(j + 1)...])))
        }
        return (unescape(pieces[0]), tags)
    }

    /// A run's points as the sink wrote them: each one's key, its series as a range of the run's
    /// line-protocol body, and its time — the sink's own arrays, handed over whole (a `Row` made
    /// for each point retained its device, text and body, and was released again).
    struct Run {
        var keys: [Key]
        var body: [UInt8]
        var seriesStarts: [Int]
        var seriesEnds: [Int]
        var times: [Int64]

        var count: Int { keys.count }

        init(keys: [Key], body: [UInt8], seriesStarts: [Int], seriesEnds: [Int], times: [Int64]) {
            precondition(seriesStarts.count == keys.count && seriesEnds.count == keys.count && times.count == keys.count)
            self.keys = keys
            self.body = body
            self.seriesStarts = seriesStarts
            self.seriesEnds = seriesEnds
            self.times = times
        }

        /// Rows' points, their series laid end to end.
        init(_ rows: [Row]) {
            var body: [UInt8] = [], starts: [Int] = [], ends: [Int] = []
            for r in rows {
                starts.append(body.count)
                body += r.series
                ends.append(body.count)
            }
            self.init(keys: rows.map(\.key), body: body, seriesStarts: starts, seriesEnds: ends, times: rows.map(\.timeNanos))
        }
    }

    /// Notes where each record's point went: one run of packed points, in one transaction; the
    /// write that fills the open chunk seals it.
    func record(_ rows: [Row]) throws {
        try record(runs: [Run(rows)])
    }

    /// `record(_:)` for several runs of rows in one transaction.
    func record(runs: [[Row]]) throws {
        try record(runs: runs.map(Run.init))
    }

    /// `record(_:)` for several runs in one transaction (one commit, one sync, for the runs
    /// that queued while the one before was written), each its own run of packed points.
    func record(runs: [Run]) throws {
        let total = runs.reduce(0) { $0 + $1.count }
        guard total > 0 else { return }
        let db = try open()
        guard let chunk = openChunk else { return }
        do {
            try db.transaction {
                for points in runs where points.count > 0 {
                    var run = PackedPoints.Builder(points: points.count)
                    // Each key read where it lies (a copy retains its device and text).
                    try points.keys.withUnsafeBufferPointer { keys in
                        for i in keys.indices {
                            guard let device = try deviceID(keys[i].device, in: db, create: true) else {
                                throw SQLite.Failure(description: "\(path): a device just written is not there")
                            }
                            let series = try seriesID(points.body[points.seriesStarts[i]..<points.seriesEnds[i]], in: db)
                            run.add(
                                key: keys[i].stored.key, device: device, series: series, time: points.times[i],
                                part: keys[i].part, uuid: keys[i].stored.bytes, text: keys[i].text)
                        }
                    }
                    try run.finish().withUnsafeBytes { blob in
                        chunk.insert.bind(1, int: chunk.id)
                        chunk.insert.bind(2, borrowing: blob) // not copied first: a run is ~250 KB
                        try chunk.insert.step()
                    }
                }
                try db.execute("UPDATE point_chunks SET rows = ? WHERE id = ?", [.int(Int64(chunk.rows + total)), .int(chunk.id)])
            }
        } catch {
            // What a failed transaction leaves out must not stay in the caches either.
            deviceIDs = [:]
            lastDevice = nil
            seriesIDs = [:]
            recentSeries.removeAll()
            throw error
        }
        openChunk?.rows += total
        guard chunk.rows + total >= chunkRows else { return }
        // The points are noted; only the sort of the full chunk failed. The chunk stays open (a
        // lookup scans it) and the next write tries the seal again.
        do {
            try seal(db)
        } catch {
            throw SealFailure(reason: error)
        }
    }

    /// The points were noted, but the full chunk could not be sealed (tried again at the next write).
    struct SealFailure: Error, CustomStringConvertible {
        var reason: any Error
        var description: String {
            "the point index noted the points but could not sort its full chunk (\(reason)); it tries again at the next write"
        }
    }

    /// The series' measurement and tags by its id (nil for an id not there).
    private func series(_ id: Int64, in db: SQLite) throws -> (String, [(String, String)])? {
        guard let r = try db.query("SELECT measurement, tags FROM series WHERE id = ?", [.int(id)]).first else { return nil }
        return (r[0].text ?? "", PointIndex.unpack(r[1].text ?? ""))
    }

    /// The packed points of `(device, uuid)`: in each sealed chunk (oldest first) found by a
    /// binary search of its sorted keys in place, then in the open chunk's runs; `each` is given
    /// the entry, its run's row and its place there.
    private func forEachPacked(
        device: Int64, uuid: String, stored: StoredKey, in db: SQLite,
        _ each: (PackedPoints.Entry, Int64, Int) throws -> Void
    ) throws {
        var uuidBytes = uuid
        let mine = uuidBytes.withUTF8 { Array($0) }
        for (id, format) in sealedChunks where format == .packed {
            if sealedRuns[id] == nil {
                sealedRuns[id] = try db.query("SELECT runs FROM psealed WHERE chunk = ?", [.int(id)]).first?.first?.blob
                    .map(PackedPoints.SortedKeys.runIDs)
            }
            guard let runIDs = sealedRuns[id] else { continue }
            let keys = try db.blob(table: "psealed", column: "keys", row: id)
            let n = try keys.headCount(size: PackedPoints.SortedKeys.size)
            var lo = 0, hi = n
            while lo < hi {
                let mid = (lo + hi) / 2
                if try keys.sortedKey(mid).key < stored.key { lo = mid + 1 } else { hi = mid }
            }
            var runs: [Int64: SQLite.Blob] = [:]
            var i = lo
            while i < n {
                let k = try keys.sortedKey(i)
                if k.key != stored.key { break }
                i += 1
                guard Int(k.run) < runIDs.count else { continue }
                let runID = runIDs[Int(k.run)]
                if runs[runID] == nil { runs[runID] = try db.blob(table: "pruns", column: "points", row: runID) }
                let run = runs[runID]!
                guard Int(k.index) < (try run.headCount(size: PackedPoints.Entry.size)) else { continue }
                let e = try run.entry(Int(k.index))
                if try PackedPoints.matches(e, device: device, stored: stored, uuid: mine, text: { try run.text(of: e) }) {
                    try each(e, runID, Int(k.index))
                }
            }
        }
        guard let chunk = openChunk else { return }
        for r in try db.query("SELECT id, points FROM pruns WHERE chunk = ? ORDER BY id", [.int(chunk.id)]) {
            guard let rowID = r[0].int, let bytes = r[1].blob else { continue }
            try bytes.withUnsafeBytes { b in
                try b.forEachEntry { e, i in
                    if try PackedPoints.matches(e, device: device, stored: stored, uuid: mine, text: { try b.text(of: e) }) {
                        try each(e, rowID, i)
                    }
                }
            }
        }
    }

    /// Every point written under `(device, uuid)`, all parts, each once, oldest first.
    func points(device: String, uuid: String) throws -> [Point] {
        let db = try open()
        var found: [Point] = []
        let stored = StoredKey(uuid: uuid)
        let deviceID = try self.deviceID(device, in: db, create: false)
        func add(_ p: Point) { if !found.contains(p) { found.append(p) } }
        for (table, hashed) in rowTables {
            if hashed && deviceID == nil { continue } // a device never written has no point there
            let rows =
                table == "points"
                ? try db.query("SELECT measurement, tags, time FROM points WHERE device = ? AND uuid = ?", [.text(device), .text(uuid)])
                : hashed
                    ? try db.query(
                        """
                        SELECT s.measurement, s.tags, p.time FROM \(table) p JOIN series s ON s.id = p.series
                        WHERE p.key = ? AND p.device = ? AND p.uuid = ?
                        """, [.int(stored.key), .int(deviceID!), stored.value(text: uuid)])
                    : try db.query(
                        """
                        SELECT s.measurement, s.tags, p.time FROM \(table) p JOIN series s ON s.id = p.series
                        WHERE p.device = ? AND p.uuid = ?
                        """, [.text(device), .text(uuid)])
            for r in rows { add(Point(measurement: r[0].text ?? "", tags: PointIndex.unpack(r[1].text ?? ""), timeNanos: r[2].int ?? 0)) }
        }
        guard let deviceID else { return found }
        var names: [Int64: (String, [(String, String)])] = [:]
        try forEachPacked(device: deviceID, uuid: uuid, stored: stored, in: db) { e, _, _ in
            if names[e.series] == nil { names[e.series] = try series(e.series, in: db) }
            guard let (m, tags) = names[e.series] else { return }
            add(Point(measurement: m, tags: tags, timeNanos: e.time))
        }
        return found
    }

    /// Forgets every point of `(device, uuid)`.
    func remove(device: String, uuid: String) throws {
        let db = try open()
        let stored = StoredKey(uuid: uuid)
        let deviceID = try self.deviceID(device, in: db, create: false)
        try db.transaction {
            for (table, hashed) in rowTables {
                if hashed {
                    guard let deviceID else { continue }
                    try db.execute(
                        "DELETE FROM \(table) WHERE key = ? AND device = ? AND uuid = ?",
                        [.int(stored.key), .int(deviceID), stored.value(text: uuid)])
                } else {
                    try db.execute("DELETE FROM \(table) WHERE device = ? AND uuid = ?", [.text(device), .text(uuid)])
                }
            }
            guard let deviceID else { return }
            // Each point marked removed where it lies, in its run (sealed or not: a run keeps its size).
            var found: [(run: Int64, index: Int)] = []
            try forEachPacked(device: deviceID, uuid: uuid, stored: stored, in: db) { _, run, index in found.append((run, index)) }
            for (run, index) in found {
                try db.blob(table: "pruns", column: "points", row: run, writable: true).remove(index)
            }
        }
    }
}

extension InfluxDBSink {
    /// `healthgate-bench --micro`'s point index: requests of `points` points noted as the sink
    /// notes each request's (random UUIDs, four series, one device; made once), the index sealing
    /// a chunk whenever one fills.
    public final class IndexBench {
        private let index: PointIndex
        private let run: PointIndex.Run

        public init(path: String, points: Int) {
            index = PointIndex(path: path)
            let series = ["heart_rate", "steps", "active_energy_burned", "distance_walking_running"].map {
                Array("\($0),device=Apple\\ Watch,phone=d_benchbenchbenchbench0,source=com.apple.Health,unit=count".utf8)
            }
            var x: UInt64 = 0x9E37_79B9_7F4A_7C15
            func hex(_ n: Int) -> String {
                x = x &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                let digits = String(x >> 4, radix: 16)
                return String((String(repeating: "0", count: max(0, n - digits.count)) + digits).suffix(n))
            }
            run = PointIndex.Run(
                (0..<points).map { i in
                    PointIndex.Row(
                        device: "d_benchbenchbenchbench0", uuid: "\(hex(8))-\(hex(4))-4\(hex(3))-8\(hex(3))-\(hex(12))".uppercased(),
                        part: nil, series: series[i % 4][...], timeNanos: 1_760_400_000_000_000_000 + Int64(i) * 1_000_000_000)
                })
        }

        /// Notes one request's points, as the sink hands them over.
        public func note() throws { try index.record(runs: [run]) }
    }
}
