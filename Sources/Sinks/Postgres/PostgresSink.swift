import FastJSON
import HealthgateCore
import Posix
import SinkKit

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
    }

    let settings: Settings
    let logger: Logger
    let timeZones: any TimeZoneLookup
    private var db: PGConnection?
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
        var extra: [(String, String)] = [("connect_timeout", "\(settings.connectTimeout)"),
                                         ("application_name", "healthgate-\(settings.name)"),
                                         ("keepalives", "1"), ("keepalives_idle", "30")]
        if let p = settings.password { extra.append(("password", p)) }
        do {
            let c = try PGConnection(dsn: settings.dsn, extra: extra)
            try c.execute("SELECT set_config('statement_timeout', $1, false), set_config('TimeZone', 'UTC', false)",
                          ["\(settings.statementTimeoutMs)"])
            s = c.quoted(identifier: settings.schema)
            version = try migrate(c)
            try c.execute("""
                CREATE TEMP TABLE hg_incoming (seq integer, op text, device text, uuid text, part integer, parts integer,
                    kind text, type text, start_at timestamptz, end_at timestamptz, local_start timestamp,
                    value double precision, text_value text, code integer, unit text, activity text, duration_s double precision,
                    energy_kcal double precision, distance_m double precision, source_app text, source_device text,
                    utc_offset integer, receiver text, metadata jsonb, fields jsonb, extra jsonb) ON COMMIT DELETE ROWS
                """)
            prepareStatements()
            db = c
            return nil
        } catch {
            return "PostgreSQL: \(error.message)"
        }
    }

    /// Applies what this binary has and the database lacks, under an advisory lock; the version
    /// the schema is at.
    private func migrate(_ c: PGConnection) throws(PGError) -> Int {
        let lock = "healthgate:" + settings.schema
        try c.execute("SELECT pg_advisory_lock(hashtext($1))", [lock])
        var unlocked = false
        defer { if !unlocked { _ = try? c.execute("SELECT pg_advisory_unlock(hashtext($1))", [lock]) } }
        try c.execute("CREATE SCHEMA IF NOT EXISTS \(s)")
        try c.execute("""
            CREATE TABLE IF NOT EXISTS \(s).schema_migrations (version integer PRIMARY KEY, description text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now(), by text)
            """)
        var current = Int(try c.execute("SELECT coalesce(max(version), 0) FROM \(s).schema_migrations").first ?? "0") ?? 0
        if current > PostgresSchema.latest {
            throw PGError(sqlstate: "HG001", message: "the schema \(settings.schema) is at version \(current), newer than this "
                          + "healthgate knows (\(PostgresSchema.latest)): a newer healthgate migrated it; run that one, or another schema")
        }
        for m in PostgresSchema.migrations where m.version > current {
            try c.execute("BEGIN")
            do throws(PGError) {
                for statement in m.sql { try c.execute(statement.replacing("{schema}.", with: "\(s).")) }
                try c.execute("INSERT INTO \(s).schema_migrations (version, description, by) VALUES ($1, $2, $3)",
                              ["\(m.version)", m.description, "healthgate \(PostgresSink.version)"])
                try c.execute("COMMIT")
            } catch {
                _ = try? c.execute("ROLLBACK")
                throw error
            }
            logger.info("schema \(settings.schema): migration \(m.version) applied (\(m.description))")
            current = m.version
        }
        // The type registry, kept up to date (it grows with healthgate).
        try c.execute("BEGIN")
        do throws(PGError) {
            try c.execute("CREATE TEMP TABLE hg_types (LIKE \(s).types) ON COMMIT DROP")
            try c.copy("COPY hg_types (type, kind, healthkit, unit, cumulative) FROM STDIN", rows: PostgresSchema.typeRows())
            try c.execute("""
                INSERT INTO \(s).types SELECT * FROM hg_types ON CONFLICT (type) DO UPDATE
                SET kind = EXCLUDED.kind, healthkit = EXCLUDED.healthkit, unit = EXCLUDED.unit, cumulative = EXCLUDED.cumulative
                WHERE (types.kind, types.healthkit, types.unit, types.cumulative)
                      IS DISTINCT FROM (EXCLUDED.kind, EXCLUDED.healthkit, EXCLUDED.unit, EXCLUDED.cumulative)
                """)
            try c.execute("COMMIT")
        } catch {
            _ = try? c.execute("ROLLBACK")
            throw error
        }
        _ = try? c.execute("SELECT pg_advisory_unlock(hashtext($1))", [lock])
        unlocked = true
        return current
    }

    static let version = "0.1.0"

    /// The columns of `records` the sink writes, the key first.
    public static let columns = ["device", "uuid", "part", "parts", "kind", "type", "start_at", "end_at", "local_start", "value",
                          "text_value", "code", "unit", "activity", "duration_s", "energy_kcal", "distance_m", "source_app",
                          "source_device", "utc_offset", "receiver", "metadata", "fields", "extra"]

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

    public func write(_ batch: SinkBatch) -> SinkWriteResult {
        if db == nil || !(db?.isOK ?? false) {
            if let why = connect() { return .keep(reason: why, retryAfterSeconds: nil) }
        }
        return Bisection.run(count: batch.count) { range in attempt(batch.records, range) }
    }

    private func attempt(_ records: [CanonicalRecord], _ range: Range<Int>, plain: Bool = true) -> Attempt {
        guard let c = db else { return .keep(reason: "PostgreSQL: not connected", retryAfterSeconds: nil) }
        var upserts = 0, deletes = 0
        do {
            try c.execute("BEGIN")
            // Rows go out a thousand at a time: PostgreSQL reads them while the next are encoded.
            try c.beginCopy("COPY hg_incoming (seq, op, \(PostgresSink.columns.joined(separator: ", "))) FROM STDIN")
            var rows = PGCopyWriter(capacity: min(range.count, 1000) * 320)
            for i in range {
                encode(records[i], seq: i, into: &rows)
                if records[i].op == .delete { deletes += 1 } else { upserts += 1 }
                if rows.bytes.count >= 256 << 10 || i == range.upperBound - 1 {
                    c.putCopy(rows.bytes)
                    rows.bytes.removeAll(keepingCapacity: true)
                }
            }
            try c.endCopy()
            var removed = 0
            if deletes > 0 { removed = try c.execute(deleteSQL).affected }
            let counts = try c.execute(plain && deletes == 0 ? plainUpsertSQL : upsertSQL).rows.first ?? []
            try c.execute("COMMIT")
            let ins = Int(counts.first.flatMap { $0 } ?? "0") ?? 0
            let upd = Int(counts.dropFirst().first.flatMap { $0 } ?? "0") ?? 0
            inserted += ins
            updated += upd
            unchanged += max(0, upserts - ins - upd)
            deleted += removed
            return .accepted
        } catch {
            if c.isOK { _ = try? c.execute("ROLLBACK") }
            if error.sqlstate == "21000" && plain { return attempt(records, range, plain: false) }   // a key twice
            switch error.outcome {
            case .refuse:
                return .refused(reason: "PostgreSQL refused it: \(error.description)")
            case .retry:
                if !c.isOK { c.close(); db = nil }
                return .keep(reason: "PostgreSQL: \(error.description)", retryAfterSeconds: nil)
            case .fix:
                logger.error("PostgreSQL refused the batch for a reason only a person can fix: \(error.description). "
                             + "The records wait in the queue")
                return .keep(reason: "PostgreSQL: \(error.description)", retryAfterSeconds: nil)
            }
        }
    }

    /// One row of `hg_incoming`: `seq`, `op`, then `columns`.
    private func encode(_ r: CanonicalRecord, seq: Int, into w: inout PGCopyWriter) {
        w.int(seq)
        w.text(r.op == .delete ? "delete" : "upsert")
        w.text(r.device); w.text(r.uuid); w.int(r.part ?? 0); w.int(r.parts)
        w.text(r.kind); w.text(r.type)
        w.time(r.start); w.time(r.end)
        if let t = r.start ?? r.end {
            let offset = r.utcOffset ?? settings.timeZone.flatMap { timeZones.utcOffset(zone: $0, at: t.seconds) } ?? 0
            w.time(Timestamp(seconds: t.seconds + Int64(offset), nanoseconds: t.nanoseconds), local: true)
        } else {
            w.null()
        }
        w.double(r.value?.number); w.text(r.value?.string)
        w.int(r.code); w.text(r.unit); w.text(r.activity)
        w.double(r.durationS); w.double(r.energyKcal); w.double(r.distanceM)
        w.text(r.source?.app); w.text(r.source?.device)
        w.int(r.utcOffset)
        w.text(r.receiver)
        w.raw(r.metadata?.bytes)
        w.raw(PostgresSink.object(r.fields)); w.raw(PostgresSink.object(r.extra))
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
    }

    public func report() -> SinkReport? {
        SinkReport(detail: "schema \(settings.schema) at version \(version) of \(PostgresSchema.latest)",
                   counters: [("inserted", inserted), ("updated", updated), ("unchanged", unchanged), ("deleted", deleted)])
    }
}
