import FastJSON
import HealthgateCore
import Posix
import SinkKit
import Glibc

/// Every record in PostgreSQL, stored by its key `(device, uuid, part)`: a resent sample changes
/// nothing, a changed one replaces its row, a deletion removes every part under its key. Each
/// batch goes through `COPY` into a temporary table and then one `DELETE` and one
/// `INSERT … ON CONFLICT … DO UPDATE … WHERE` the row really changed, in one transaction — never
/// row by row. The schema is the sink's own (`PostgresSchema`), migrated when the sink opens.
public final class PostgresSink: Sink {
    struct Settings: Sendable {
        var name: String
        var dsn: String
        var password: String?
        var schema: String
        var timeZone: String?
        var connectTimeout: Int
        var statementTimeoutMs: Int
        /// 1 or 2: a big batch whose halves share no key is written as two transactions at once.
        var connections: Int = 2
    }

    let settings: Settings
    let logger: Logger
    let timeZones: any TimeZoneLookup
    private var db: PGConnection?
    /// The second connection, for the other half of a big batch (opened when first needed).
    private var second: PGConnection?
    /// The schema, quoted for SQL.
    private var s = ""
    private(set) var version = 0
    private var lastAttempt = -1000.0
    private var upsertSQL = "", plainUpsertSQL = "", deleteSQL = ""
    /// Since the sink opened.
    private(set) var inserted = 0, updated = 0, unchanged = 0, deleted = 0

    init(settings: Settings, logger: Logger, timeZones: any TimeZoneLookup) throws(SinkOpenError) {
        self.settings = settings
        self.logger = logger
        self.timeZones = timeZones
        if let why = connect() { throw SinkOpenError(why) }
    }

    // MARK: connecting and migrating

    /// Connects, migrates and prepares the session; nil when ready, else why not.
    private func connect() -> String? {
        lastAttempt = monotonicSeconds()
        db?.close()
        db = nil
        do {
            let c = try session { c throws(PGError) in
                s = c.quoted(identifier: settings.schema)
                version = try migrate(c)
            }
            prepareStatements()
            db = c
            return nil
        } catch {
            return "PostgreSQL: \(error.message)"
        }
    }

    /// A connection ready for batches: its settings, `first` (the migrations), its temp table.
    private func session(_ first: (PGConnection) throws(PGError) -> Void = { _ in }) throws(PGError) -> PGConnection {
        var extra: [(String, String)] = [
            ("connect_timeout", "\(settings.connectTimeout)"),
            ("application_name", "healthgate-\(settings.name)"),
            ("keepalives", "1"), ("keepalives_idle", "30")
        ]
        if let p = settings.password { extra.append(("password", p)) }
        let c = try PGConnection(dsn: settings.dsn, extra: extra)
        try c.execute(
            "SELECT set_config('statement_timeout', $1, false), set_config('TimeZone', 'UTC', false)",
            ["\(settings.statementTimeoutMs)"])
        try first(c)
        let columns = PostgresSink.typedColumns.map { "\($0.name) \($0.type)" }.joined(separator: ", ")
        try c.execute("CREATE TEMP TABLE hg_incoming (seq integer, op text, \(columns)) ON COMMIT DELETE ROWS")
        return c
    }

    /// Applies what this binary has and the database lacks, under an advisory lock; the version
    /// the schema is at.
    private func migrate(_ c: PGConnection) throws(PGError) -> Int {
        let lock = "healthgate:" + settings.schema
        try c.execute("SELECT pg_advisory_lock(hashtext($1))", [lock])
        var unlocked = false
        defer { if !unlocked { _ = try? c.execute("SELECT pg_advisory_unlock(hashtext($1))", [lock]) } }
        try c.execute("CREATE SCHEMA IF NOT EXISTS \(s)")
        try c.execute(
            """
            CREATE TABLE IF NOT EXISTS \(s).schema_migrations (version integer PRIMARY KEY, description text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now(), by text)
            """)
        var current = Int(try c.execute("SELECT coalesce(max(version), 0) FROM \(s).schema_migrations").first ?? "0") ?? 0
        if current > PostgresSchema.latest {
            throw PGError(
                sqlstate: "HG001",
                message: "the schema \(settings.schema) is at version \(current), newer than this "
                    + "healthgate knows (\(PostgresSchema.latest)): a newer healthgate migrated it; run that one, or another schema")
        }
        for m in PostgresSchema.migrations where m.version > current {
            try c.transaction { () throws(PGError) in
                for statement in m.sql { try c.execute(statement.replacing("{schema}.", with: "\(s).")) }
                try c.execute(
                    "INSERT INTO \(s).schema_migrations (version, description, by) VALUES ($1, $2, $3)",
                    ["\(m.version)", m.description, "healthgate \(Healthgate.version)"])
            }
            logger.info("schema \(settings.schema): migration \(m.version) applied (\(m.description))")
            current = m.version
        }
        // The type registry, kept up to date (it grows with healthgate).
        try c.transaction { () throws(PGError) in
            try c.execute("CREATE TEMP TABLE hg_types (LIKE \(s).types) ON COMMIT DROP")
            try c.copy("COPY hg_types (type, kind, healthkit, unit, cumulative) FROM STDIN", rows: PostgresSchema.typeRows())
            try c.execute(
                """
                INSERT INTO \(s).types SELECT * FROM hg_types ON CONFLICT (type) DO UPDATE
                SET kind = EXCLUDED.kind, healthkit = EXCLUDED.healthkit, unit = EXCLUDED.unit, cumulative = EXCLUDED.cumulative
                WHERE (types.kind, types.healthkit, types.unit, types.cumulative)
                      IS DISTINCT FROM (EXCLUDED.kind, EXCLUDED.healthkit, EXCLUDED.unit, EXCLUDED.cumulative)
                """)
        }
        _ = try? c.execute("SELECT pg_advisory_unlock(hashtext($1))", [lock])
        unlocked = true
        return current
    }

    /// The columns of `records` the sink writes, the key first.
    public static var columns: [String] { typedColumns.map(\.name) }

    /// The same with their types, for the temporary table the batches are copied into (made
    /// from this list, not from `records`, so that opening the sink takes no lock on it).
    static let typedColumns: [(name: String, type: String)] = [
        ("device", "text"), ("uuid", "text"), ("part", "integer"), ("parts", "integer"), ("kind", "text"), ("type", "text"),
        ("start_at", "timestamptz"), ("end_at", "timestamptz"), ("local_start", "timestamp"), ("value", "double precision"),
        ("text_value", "text"), ("code", "integer"), ("unit", "text"), ("activity", "text"), ("duration_s", "double precision"),
        ("energy_kcal", "double precision"), ("distance_m", "double precision"), ("source_app", "text"),
        ("source_device", "text"), ("utc_offset", "integer"), ("receiver", "text"), ("metadata", "jsonb"),
        ("fields", "jsonb"), ("extra", "jsonb"), ("tags", "jsonb"), ("time_zone", "text")
    ]

    private func prepareStatements() {
        let cols = PostgresSink.columns.joined(separator: ", ")
        let picked = PostgresSink.columns.map { "i.\($0)" }.joined(separator: ", ")
        // Every column but the key, and what makes a row changed.
        let rest = PostgresSink.columns.dropFirst(3)
        let set = rest.map { "\($0) = EXCLUDED.\($0)" }.joined(separator: ", ")
        let old = rest.map { "r.\($0)" }.joined(separator: ", "), new = rest.map { "EXCLUDED.\($0)" }.joined(separator: ", ")
        // The last upsert of each key in the batch, unless a later deletion of its uuid undoes it.
        upsertSQL = """
            WITH gone AS (SELECT device, uuid, max(seq) AS seq FROM hg_incoming WHERE op = 'delete' GROUP BY device, uuid),
            written AS (
                INSERT INTO \(s).records AS r (\(cols))
                SELECT DISTINCT ON (i.device, i.uuid, i.part) \(picked)
                FROM hg_incoming i LEFT JOIN gone g ON g.device = i.device AND g.uuid = i.uuid
                WHERE i.op = 'upsert' AND (g.seq IS NULL OR g.seq < i.seq)
                ORDER BY i.device, i.uuid, i.part, i.seq DESC
                ON CONFLICT (device, uuid, part) DO UPDATE SET \(set), updated_at = now()
                WHERE (\(old)) IS DISTINCT FROM (\(new))
                RETURNING (xmax = 0) AS inserted)
            SELECT count(*) FILTER (WHERE inserted), count(*) FILTER (WHERE NOT inserted) FROM written
            """
        // The usual batch — no deletion, no key twice — needs neither the join nor the sort; a
        // key twice makes PostgreSQL refuse it (21000), and the batch is written again the long way.
        plainUpsertSQL = """
            WITH written AS (
                INSERT INTO \(s).records AS r (\(cols))
                SELECT \(cols) FROM hg_incoming
                ON CONFLICT (device, uuid, part) DO UPDATE SET \(set), updated_at = now()
                WHERE (\(old)) IS DISTINCT FROM (\(new))
                RETURNING (xmax = 0) AS inserted)
            SELECT count(*) FILTER (WHERE inserted), count(*) FILTER (WHERE NOT inserted) FROM written
            """
        // Rows stored before the batch whose uuid it deletes (every part, whatever the kind).
        deleteSQL = """
            DELETE FROM \(s).records r USING (SELECT DISTINCT device, uuid FROM hg_incoming WHERE op = 'delete') d
            WHERE r.device = d.device AND r.uuid = d.uuid
            """
    }

    // MARK: writing

    struct Counts {
        var inserted = 0, updated = 0, unchanged = 0, deleted = 0

        static func += (a: inout Counts, b: Counts) {
            a.inserted += b.inserted; a.updated += b.updated; a.unchanged += b.unchanged; a.deleted += b.deleted
        }
    }

    public func write(_ given: SinkBatch) -> SinkWriteResult {
        // Every field goes into a row: the records read whole.
        let batch = given.records.map(\.canonical)
        if db == nil || !(db?.isOK ?? false) {
            if let why = connect() { return .keep(reason: why, retryAfterSeconds: nil) }
        }
        // What PostgreSQL is known to refuse is refused here, without a round trip: halving a
        // batch down to every such record (a request with one in every other record) held the
        // sink, and every other phone's records behind it, for a minute.
        // (A delete of such a key removes nothing: no row can hold it. It is done, unsent.)
        var refused: [Int: String?] = [:]
        for (i, r) in batch.enumerated() {
            guard let why = PostgresSink.unstorable(r) else { continue }
            refused[i] = r.op == .delete ? .some(nil) : why
        }
        guard !refused.isEmpty else { return write(batch) }
        let rest = batch.indices.filter { refused[$0] == nil }.map { batch[$0] }
        let written = rest.isEmpty ? .accepted : write(rest)
        if case .keep = written { return written } // the batch again later, whole
        var outcomes: [DeliveryOutcome] = []
        var k = 0
        for i in batch.indices {
            if let entry = refused[i] {
                outcomes.append(entry.map { .rejected(reason: $0) } ?? .accepted)
                continue
            }
            switch written {
            case .accepted: outcomes.append(.accepted)
            case .keep(let why, _): outcomes.append(.keep(reason: why))
            case .perRecord(let o): outcomes.append(o[k])
            }
            k += 1
        }
        return .perRecord(outcomes)
    }

    /// Why PostgreSQL cannot store the record as it is (nil: nothing known): text and jsonb hold
    /// no NUL character (SQLSTATE 22021 for text, 22P05 for jsonb's \u0000).
    static func unstorable(_ r: CanonicalRecord) -> String? {
        // Checked field by field, nothing allocated: this runs for every record written.
        func nul(_ s: String?) -> Bool { s?.utf8.contains(0) ?? false }
        func nul(_ f: RecordField) -> Bool { nul(f.name) || holdsNULEscape(f.value) }
        if nul(r.kind) || nul(r.device) || nul(r.receiver) || nul(r.uuid) || nul(r.type) || nul(r.unit) || nul(r.value?.string)
            || nul(r.source?.app) || nul(r.source?.device) || nul(r.activity) || (r.metadata.map(holdsNULEscape) ?? false)
            || r.tags.contains(where: { nul($0.name) || nul($0.value) }) || r.fields.contains(where: nul) || r.extra.contains(where: nul)
        {
            return "PostgreSQL cannot store a NUL character (U+0000) in text or jsonb (SQLSTATE 22021): the record holds one"
        }
        return nil
    }

    /// Whether JSON text holds the escape `\u0000` (a backslash not itself escaped, then u0000).
    static func holdsNULEscape(_ json: RawJSON) -> Bool {
        let b = json.bytes
        var i = 0
        while i < b.count {
            if b[i] == 0x5C {
                if i + 5 < b.count, b[i + 1] == 0x75, b[i + 2] == 0x30, b[i + 3] == 0x30, b[i + 4] == 0x30, b[i + 5] == 0x30 { return true }
                i += 2 // the escaped character, whatever it is
                continue
            }
            if b[i] == 0 { return true }
            i += 1
        }
        return false
    }

    /// Writes the records (none of them known to be refused).
    private func write(_ records: [CanonicalRecord]) -> SinkWriteResult {
        var result: SinkWriteResult
        var counts = Counts()
        // A big batch whose halves share no key: two transactions at once, one per connection
        // (PostgreSQL works a connection on one core). A shared key keeps the batch in one, in order.
        if settings.connections > 1, records.count >= 2_000, PostgresSink.halvesAreDisjoint(records), let other = secondSession() {
            let mid = records.count / 2
            let half = HalfJob()
            let started = startThread { [self] in half.run = run(other, records, mid..<records.count) }
            let first = run(db!, records, 0..<mid)
            if case .success(let t) = started { pthread_join(t, nil) } else { half.run = run(other, records, mid..<records.count) }
            let (second, secondCounts, secondLost) = half.run!
            if secondLost { self.second?.close(); self.second = nil }
            if first.lost { db?.close(); db = nil }
            counts = first.counts
            counts += secondCounts
            result = PostgresSink.merge(first.result, mid, second, records.count - mid)
        } else {
            let one = run(db!, records, 0..<records.count)
            if one.lost { db?.close(); db = nil }
            counts = one.counts
            result = one.result
        }
        inserted += counts.inserted
        updated += counts.updated
        unchanged += counts.unchanged
        deleted += counts.deleted
        return result
    }

    final class HalfJob: @unchecked Sendable {
        var run: (SinkWriteResult, Counts, Bool)?
    }

    private func secondSession() -> PGConnection? {
        if let c = second, c.isOK { return c }
        second?.close()
        second = try? session()
        return second
    }

    /// True when no (device, uuid) of the first half is in the second.
    static func halvesAreDisjoint(_ records: [CanonicalRecord]) -> Bool {
        let mid = records.count / 2
        var firstKeys = Set<String>(minimumCapacity: mid)
        for r in records[..<mid] { firstKeys.insert(r.device + "\u{1}" + r.uuid) }
        for r in records[mid...] where firstKeys.contains(r.device + "\u{1}" + r.uuid) { return false }
        return true
    }

    /// Two halves' results as one.
    static func merge(_ a: SinkWriteResult, _ aCount: Int, _ b: SinkWriteResult, _ bCount: Int) -> SinkWriteResult {
        if a == .accepted && b == .accepted { return .accepted }
        if case .keep(let why, let x) = a, case .keep(_, let y) = b {
            return .keep(reason: why, retryAfterSeconds: [x, y].compactMap { $0 }.max())
        }
        func outcomes(_ r: SinkWriteResult, _ n: Int) -> [DeliveryOutcome] {
            switch r {
            case .accepted: return Array(repeating: .accepted, count: n)
            case .keep(let why, _): return Array(repeating: .keep(reason: why), count: n)
            case .perRecord(let o): return o
            }
        }
        return .perRecord(outcomes(a, aCount) + outcomes(b, bCount))
    }

    /// Writes `range` on `c`, halving down to the records PostgreSQL refuses; the result is
    /// for the range's records in order, with what was counted and whether the connection died.
    private func run(_ c: PGConnection, _ records: [CanonicalRecord], _ range: Range<Int>) -> (
        result: SinkWriteResult, counts: Counts, lost: Bool
    ) {
        var counts = Counts()
        var lost = false
        let result = Bisection.run(count: range.count) { sub in
            if lost { return .keep(reason: "PostgreSQL: the connection was lost", retryAfterSeconds: nil) }
            let part = (range.lowerBound + sub.lowerBound)..<(range.lowerBound + sub.upperBound)
            let (attempt, got) = attempt(c, records, part)
            counts += got
            if !c.isOK { lost = true }
            return attempt
        }
        return (result, counts, lost)
    }

    private func attempt(_ c: PGConnection, _ records: [CanonicalRecord], _ range: Range<Int>, plain: Bool = true) -> (Attempt, Counts) {
        var deletes = 0
        for i in range where records[i].op == .delete { deletes += 1 }
        let upserts = range.count - deletes
        let plain = plain && deletes == 0
        let used = PostgresSink.used(records, range, ordered: !plain)
        let names = zip(PostgresSink.incomingColumns, used).compactMap { $1 ? $0 : nil }.joined(separator: ", ")
        do {
            let counts = try c.transaction { () throws(PGError) -> Counts in
                // Rows go out in pieces: PostgreSQL reads them while the next are encoded.
                try c.beginCopy("COPY hg_incoming (\(names)) FROM STDIN")
                var rows = PGCopyWriter(capacity: min(range.count, 1000) * 320)
                for i in range {
                    encode(records[i], seq: i, used: used, into: &rows)
                    if rows.bytes.count >= 256 << 10 || i == range.upperBound - 1 {
                        c.putCopy(rows.bytes)
                        rows.bytes.removeAll(keepingCapacity: true)
                    }
                }
                try c.endCopy()
                let removed = deletes > 0 ? try c.execute(deleteSQL).affected : 0
                let got = try c.execute(plain ? plainUpsertSQL : upsertSQL).rows.first ?? []
                let ins = Int(got.first.flatMap { $0 } ?? "0") ?? 0
                let upd = Int(got.dropFirst().first.flatMap { $0 } ?? "0") ?? 0
                return Counts(inserted: ins, updated: upd, unchanged: max(0, upserts - ins - upd), deleted: removed)
            }
            return (.accepted, counts)
        } catch {
            if error.sqlstate == "21000" && plain { return attempt(c, records, range, plain: false) } // a key twice
            switch error.outcome {
            case .refuse:
                return (.refused(reason: "PostgreSQL refused it: \(error.description)"), Counts())
            case .retry:
                return (.keep(reason: "PostgreSQL: \(error.description)", retryAfterSeconds: nil), Counts())
            case .fix:
                // Kept, and the sink shown failing; the delivery logs it once a minute, not per try.
                return (
                    .keep(
                        reason: "PostgreSQL refused the batch for a reason only a person can fix (permissions, the "
                            + "table, authentication): \(error.description); the records wait in the queue",
                        retryAfterSeconds: nil), Counts()
                )
            }
        }
    }

    /// `hg_incoming`'s columns: `seq` and `op` (for a batch with deletions or a key twice), then `columns`.
    static let incomingColumns = ["seq", "op"] + columns

    /// The columns a part of a batch needs: the key and the kind always, the others only when a
    /// record of it has a value (the rest stay NULL without being sent: less for COPY to parse);
    /// `seq` and `op` only for the long way.
    private static func used(_ records: [CanonicalRecord], _ range: Range<Int>, ordered: Bool) -> [Bool] {
        var u = [Bool](repeating: false, count: incomingColumns.count)
        for k in [2, 3, 4, 6, 7, 22] { u[k] = true } // device, uuid, part, kind, type, receiver
        u[0] = ordered; u[1] = ordered
        for i in range {
            let r = records[i]
            if r.parts != nil { u[5] = true }
            if r.start != nil { u[8] = true }
            if r.end != nil { u[9] = true }
            if r.start != nil || r.end != nil { u[10] = true }
            if let v = r.value { if v.number != nil { u[11] = true } else { u[12] = true } }
            if r.code != nil { u[13] = true }
            if r.unit != nil { u[14] = true }
            if r.activity != nil { u[15] = true }
            if r.durationS != nil { u[16] = true }
            if r.energyKcal != nil { u[17] = true }
            if r.distanceM != nil { u[18] = true }
            if r.source?.app != nil { u[19] = true }
            if r.source?.device != nil { u[20] = true }
            if r.utcOffset != nil { u[21] = true }
            if r.metadata != nil { u[23] = true }
            if !r.fields.isEmpty { u[24] = true }
            if !r.extra.isEmpty { u[25] = true }
            if !r.tags.isEmpty { u[26] = true }
            if r.timeZone != nil { u[27] = true }
        }
        return u
    }

    /// One row of `hg_incoming`, the `used` columns of it.
    private func encode(_ r: CanonicalRecord, seq: Int, used u: [Bool], into w: inout PGCopyWriter) {
        if u[0] { w.int(seq) }
        if u[1] { w.text(r.op == .delete ? "delete" : "upsert") }
        w.text(r.device); w.text(r.uuid); w.int(r.part ?? 0)
        if u[5] { w.int(r.parts) }
        w.text(r.kind); w.text(r.type)
        if u[8] { w.time(r.start) }
        if u[9] { w.time(r.end) }
        if u[10] {
            if let t = r.start ?? r.end {
                let offset = r.utcOffset ?? settings.timeZone.flatMap { timeZones.utcOffset(zone: $0, at: t.seconds) } ?? 0
                w.time(Timestamp(seconds: t.seconds + Int64(offset), nanoseconds: t.nanoseconds), local: true)
            } else {
                w.null()
            }
        }
        if u[11] { w.double(r.value?.number) }
        if u[12] { w.text(r.value?.string) }
        if u[13] { w.int(r.code) }
        if u[14] { w.text(r.unit) }
        if u[15] { w.text(r.activity) }
        if u[16] { w.double(r.durationS) }
        if u[17] { w.double(r.energyKcal) }
        if u[18] { w.double(r.distanceM) }
        if u[19] { w.text(r.source?.app) }
        if u[20] { w.text(r.source?.device) }
        if u[21] { w.int(r.utcOffset) }
        w.text(r.receiver)
        if u[23] { w.raw(r.metadata?.bytes) }
        if u[24] { w.raw(PostgresSink.object(r.fields)) }
        if u[25] { w.raw(PostgresSink.object(r.extra)) }
        if u[26] { w.raw(PostgresSink.object(r.tags.map { RecordField($0.name, .string($0.value)) })) }
        if u[27] { w.text(r.timeZone) }
        w.endRow()
    }

    static func object(_ fields: [RecordField]) -> [UInt8]? {
        guard !fields.isEmpty else { return nil }
        var j = JSONWriter(capacity: 256)
        j.beginObject()
        for f in fields {
            j.key(f.name)
            j.raw(f.value.bytes)
        }
        j.endObject()
        return j.bytes
    }

    // MARK: idle, probe, close, report

    public func idle() {
        // Connect again between batches (at most every 5 s) so that status tells the truth.
        if db == nil && monotonicSeconds() - lastAttempt >= 5 { _ = connect() }
    }

    public func probe() -> Reachability {
        if let c = db, c.isOK, (try? c.execute("SELECT 1")) != nil { return .reachable }
        if let why = connect() { return .unreachable(why) }
        return .reachable
    }

    public func close() {
        db?.close()
        db = nil
        second?.close()
        second = nil
    }

    public func report() -> SinkReport? {
        SinkReport(
            detail: "schema \(settings.schema) at version \(version) of \(PostgresSchema.latest)",
            counters: [("inserted", inserted), ("updated", updated), ("unchanged", unchanged), ("deleted", deleted)])
    }
}
