import FastJSON
import HealthgateCore
import SinkPostgres
import CanonicalJSON

/// A page of the read API, as JSON.
struct ReadResult {
    var body: [UInt8]
}

/// A statement made of fixed SQL text and numbered parameters: `bind` takes a value and gives
/// back its placeholder, so what a client sent never becomes SQL text.
struct ParameterizedSQL {
    var parameters: [String?] = []
    var conditions: [String] = []

    mutating func bind(_ v: String?) -> String {
        parameters.append(v)
        return "$\(parameters.count)"
    }

    var whereClause: String { conditions.isEmpty ? "" : " WHERE " + conditions.joined(separator: " AND ") }

    /// A PostgreSQL text array literal, as a parameter's value (each element quoted and escaped).
    static func textArray(_ items: [String]) -> String {
        var out = "{"
        for (i, s) in items.enumerated() {
            if i > 0 { out += "," }
            out += "\""
            for c in s.unicodeScalars {
                if c == "\"" || c == "\\" { out += "\\" }
                out.unicodeScalars.append(c)
            }
            out += "\""
        }
        return out + "}"
    }
}

enum ReadQueries {
    /// A page of `q`: at most `q.limit` rows and, past its first row, at most `maxBytes` of them
    /// (the cursor goes on from the last row given), rows read from the database as they come.
    static func run(_ q: ReadQuery, on lease: ReadPool.Lease, maxBytes: Int) throws(PGError) -> ReadResult {
        switch q.endpoint {
        case .samples: return try samples(q, lease, maxBytes)
        case .workouts: return try workouts(q, lease, maxBytes)
        case .daily: return try daily(q, lease, maxBytes)
        case .sleep: return try sleep(q, lease, maxBytes)
        case .latest: return try latest(q, lease, maxBytes)
        case .batches: preconditionFailure("batches are read from the request log")
        }
    }

    /// Rows with a start, of the devices asked for, from `from` (inclusive) to `to` (not).
    static func timed(_ q: ReadQuery) -> ParameterizedSQL {
        var sql = ParameterizedSQL()
        sql.conditions.append("start_at IS NOT NULL")
        if let d = q.devices { sql.conditions.append("device = ANY(\(sql.bind(ParameterizedSQL.textArray(d)))::text[])") }
        if let f = q.from { sql.conditions.append("start_at >= \(sql.bind(f))::timestamptz") }
        if let t = q.to { sql.conditions.append("start_at < \(sql.bind(t))::timestamptz") }
        return sql
    }

    // MARK: samples

    static func samples(_ q: ReadQuery, _ lease: ReadPool.Lease, _ maxBytes: Int) throws(PGError) -> ReadResult {
        var sql = timed(q)
        if let t = q.type { sql.conditions.append("type = \(sql.bind(t))") }
        if let k = q.kind { sql.conditions.append("kind = \(sql.bind(k))") }
        if let a = q.after {
            sql.conditions.append(
                "(start_at, device, uuid, part) > (\(sql.bind(a[0]))::timestamptz, \(sql.bind(a[1])), "
                    + "\(sql.bind(a[2])), \(sql.bind(a[3]))::integer)")
        }
        let limit = sql.bind(String(q.limit + 1))
        var page = Page(limit: q.limit, maxBytes: maxBytes, endpoint: .samples)
        let parser = JSONParser()
        try lease.connection.stream(
            "SELECT device, uuid, part, parts, kind, type, extract(epoch FROM start_at)::text, extract(epoch FROM end_at)::text, "
                + "value, text_value, code, unit, activity, duration_s, energy_kcal, distance_m, source_app, source_device, "
                + "utc_offset, receiver, metadata::text, \(pairs("fields")), \(pairs("extra")), \(pairs("tags")), start_at::text, time_zone "
                + "FROM \(lease.schema).records" + sql.whereClause + " ORDER BY start_at, device, uuid, part LIMIT \(limit)::integer",
            sql.parameters
        ) { row in
            page.add(key: [row[24] ?? "", row[0] ?? "", row[1] ?? "", row[2] ?? "0"]) {
                var line: [UInt8] = []
                self.record(row, parser: parser).appendNDJSON(to: &line)
                if line.last == 0x0A { line.removeLast() }
                return line
            }
        }
        return ReadResult(body: page.finish())
    }

    /// A row of `records` as the canonical record it was.
    static func record(_ row: [String?], parser: JSONParser) -> CanonicalRecord {
        let parts = row[3].flatMap { Int($0) }
        let part = row[2].flatMap { Int($0) } ?? 0
        var value: RecordValue?
        if let v = row[8].flatMap({ Double($0) }) { value = .number(v) } else if let s = row[9] { value = .string(s) }
        let source: RecordSource? = row[16] == nil && row[17] == nil ? nil : RecordSource(app: row[16], device: row[17])
        var r = CanonicalRecord(
            kind: row[4] ?? "", device: row[0] ?? "", receiver: row[19] ?? "", uuid: row[1] ?? "",
            type: row[5] ?? "", part: parts != nil || part != 0 ? part : nil, parts: parts,
            start: row[6].flatMap(epoch), end: row[7].flatMap(epoch), utcOffset: row[18].flatMap { Int($0) },
            value: value, unit: row[11], code: row[10].flatMap { Int($0) }, activity: row[12],
            durationS: row[13].flatMap { Double($0) }, energyKcal: row[14].flatMap { Double($0) },
            distanceM: row[15].flatMap { Double($0) }, source: source,
            metadata: row[20].map { RawJSON(encoded: Array($0.utf8)) },
            fields: object(row[21], parser: parser), extra: object(row[22], parser: parser))
        r.timeZone = row.count > 25 ? row[25] : nil
        r.tags = object(row[23], parser: parser).compactMap { f in
            (try? JSONParser().parse(f.value.bytes))?.root.string.map { RecordTag(f.name, $0) }
        }
        return r
    }

    /// A jsonb object column as `[[key, "value as JSON text"], …]`: every value comes back as
    /// PostgreSQL wrote it (a number too big for 64 bits included), in jsonb's key order.
    static func pairs(_ column: String) -> String {
        "(SELECT json_agg(json_build_array(e.key, e.value::text)) FROM jsonb_each(\(column)) e)::text"
    }

    /// The members `pairs` gave, each value as JSON.
    static func object(_ text: String?, parser: JSONParser) -> [RecordField] {
        guard let text, let doc = try? parser.parse(text), doc.root.kind == .array else { return [] }
        var out: [RecordField] = []
        for pair in doc.root.elements {
            let kv = Array(pair.elements)
            guard kv.count == 2, let k = kv[0].string, let v = kv[1].string, !v.isEmpty else { continue }
            out.append(RecordField(k, RawJSON(encoded: Array(v.utf8))))
        }
        return out
    }

    /// `extract(epoch FROM …)` (e.g. 1796112000.123456) as a time, exactly.
    static func epoch(_ s: String) -> Timestamp? {
        let negative = s.hasPrefix("-")
        let digits = negative ? s.dropFirst() : Substring(s)
        let parts = digits.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard let whole = Int64(parts[0]) else { return nil }
        var nanos: Int32 = 0
        if parts.count == 2 {
            var frac = String(parts[1].prefix(9))
            while frac.utf8.count < 9 { frac += "0" }
            guard let n = Int32(frac) else { return nil }
            nanos = n
        }
        if !negative { return Timestamp(seconds: whole, nanoseconds: nanos) }
        return nanos == 0 ? Timestamp(seconds: -whole) : Timestamp(seconds: -whole - 1, nanoseconds: 1_000_000_000 - nanos)
    }

    static func time(_ s: String?) -> String? { s.flatMap(epoch).map { $0.rfc3339() } }

    // MARK: workouts

    static func workouts(_ q: ReadQuery, _ lease: ReadPool.Lease, _ maxBytes: Int) throws(PGError) -> ReadResult {
        var sql = timed(q)
        if let a = q.after {
            sql.conditions.append("(start_at, device, uuid) > (\(sql.bind(a[0]))::timestamptz, \(sql.bind(a[1])), \(sql.bind(a[2])))")
        }
        let limit = sql.bind(String(q.limit + 1))
        var page = Page(limit: q.limit, maxBytes: maxBytes, endpoint: .workouts)
        try lease.connection.stream(
            "SELECT device, uuid, activity, extract(epoch FROM start_at)::text, extract(epoch FROM end_at)::text, duration_s, "
                + "energy_kcal, distance_m, source_app, source_device, day::text, avg_bpm, max_bpm, heart_rate_samples, start_at::text, "
                + "heart_rate_from "
                + "FROM \(lease.schema).workouts" + sql.whereClause + " ORDER BY start_at, device, uuid LIMIT \(limit)::integer",
            sql.parameters
        ) { row in
            page.add(key: [row[14] ?? "", row[0] ?? "", row[1] ?? ""]) {
                var w = JSONWriter(capacity: 512)
                w.beginObject()
                w.key("device"); w.string(row[0] ?? "")
                w.key("uuid"); w.string(row[1] ?? "")
                optional(&w, "activity", row[2])
                optional(&w, "start", time(row[3]))
                optional(&w, "end", time(row[4]))
                number(&w, "duration_s", row[5])
                number(&w, "energy_kcal", row[6])
                number(&w, "distance_m", row[7])
                if row[8] != nil || row[9] != nil {
                    w.key("source"); w.beginObject()
                    optional(&w, "app", row[8]); optional(&w, "device", row[9])
                    w.endObject()
                }
                optional(&w, "day", row[10])
                w.key("heart_rate"); w.beginObject()
                number(&w, "avg_bpm", row[11]); number(&w, "max_bpm", row[12])
                w.key("samples"); w.int(Int(row[13] ?? "0") ?? 0)
                optional(&w, "from", row[15])
                w.endObject()
                w.endObject()
                return w.bytes
            }
        }
        return ReadResult(body: page.finish())
    }

    // MARK: daily

    static func daily(_ q: ReadQuery, _ lease: ReadPool.Lease, _ maxBytes: Int) throws(PGError) -> ReadResult {
        let type = q.type ?? "steps"
        // Cumulative types (steps, energy, distance) are summed per local day; the others
        // (heart rate, body mass) averaged, with their least and greatest: a record's own min
        // and max where it carries them (a minute's or a day's heart rate as Min/Avg/Max).
        let sum = HealthTypes.named(type)?.aggregation == .cumulative
        var sql = ParameterizedSQL()
        sql.conditions.append("type = \(sql.bind(type))")
        sql.conditions.append("value IS NOT NULL AND local_day IS NOT NULL")
        days(q, column: "local_day", &sql)
        let limit = sql.bind(String(q.limit + 1))
        var page = Page(limit: q.limit, maxBytes: maxBytes, endpoint: .daily)
        try lease.connection.stream(
            "SELECT device, local_day::text, sum(value), avg(value), "
                + "min(coalesce(\(lease.schema).num(extra->'min'), value)), max(coalesce(\(lease.schema).num(extra->'max'), value)), "
                + "count(*), min(unit) "
                + "FROM \(lease.schema).records" + sql.whereClause
                + " GROUP BY local_day, device ORDER BY local_day, device LIMIT \(limit)::integer", sql.parameters
        ) { row in
            page.add(key: [row[1] ?? "", row[0] ?? ""]) {
                var w = JSONWriter(capacity: 256)
                w.beginObject()
                w.key("device"); w.string(row[0] ?? "")
                w.key("day"); w.string(row[1] ?? "")
                w.key("type"); w.string(type)
                w.key("how"); w.string(sum ? "sum" : "mean")
                number(&w, "value", sum ? row[2] : row[3])
                number(&w, "min", row[4])
                number(&w, "max", row[5])
                w.key("samples"); w.int(Int(row[6] ?? "0") ?? 0)
                optional(&w, "unit", row[7])
                w.endObject()
                return w.bytes
            }
        }
        return ReadResult(body: page.finish())
    }

    /// The devices, the days from and to (both inclusive) and the cursor's (day, device) of a
    /// query by local day; `column` is fixed text, the values are bound.
    static func days(_ q: ReadQuery, column: StaticString, _ sql: inout ParameterizedSQL) {
        if let d = q.devices { sql.conditions.append("device = ANY(\(sql.bind(ParameterizedSQL.textArray(d)))::text[])") }
        if let f = q.from { sql.conditions.append("\(column) >= \(sql.bind(f))::date") }
        if let t = q.to { sql.conditions.append("\(column) <= \(sql.bind(t))::date") }
        if let a = q.after { sql.conditions.append("(\(column), device) > (\(sql.bind(a[0]))::date, \(sql.bind(a[1])))") }
    }

    // MARK: sleep

    /// Nights from the `sleep_nights` view: each the local day of its evening, made from the
    /// app's summary of it where there is one, else from its segments.
    static func sleep(_ q: ReadQuery, _ lease: ReadPool.Lease, _ maxBytes: Int) throws(PGError) -> ReadResult {
        var sql = ParameterizedSQL()
        days(q, column: "night", &sql)
        let limit = sql.bind(String(q.limit + 1))
        var page = Page(limit: q.limit, maxBytes: maxBytes, endpoint: .sleep)
        try lease.connection.stream(
            "SELECT device, night::text, asleep_hours, in_bed_min, awake_min, core_min, deep_min, rem_min, "
                + "extract(epoch FROM bedtime)::text, extract(epoch FROM wake_time)::text, samples, made_from "
                + "FROM \(lease.schema).sleep_nights" + sql.whereClause + " ORDER BY night, device LIMIT \(limit)::integer",
            sql.parameters
        ) { row in
            page.add(key: [row[1] ?? "", row[0] ?? ""]) {
                var w = JSONWriter(capacity: 384)
                w.beginObject()
                w.key("device"); w.string(row[0] ?? "")
                w.key("night"); w.string(row[1] ?? "")
                number(&w, "asleep_hours", row[2])
                number(&w, "in_bed_min", row[3])
                number(&w, "awake_min", row[4])
                number(&w, "core_min", row[5])
                number(&w, "deep_min", row[6])
                number(&w, "rem_min", row[7])
                optional(&w, "bedtime", time(row[8]))
                optional(&w, "wake_time", time(row[9]))
                w.key("samples"); w.int(Int(row[10] ?? "0") ?? 0)
                optional(&w, "made_from", row[11])
                w.endObject()
                return w.bytes
            }
        }
        return ReadResult(body: page.finish())
    }

    // MARK: latest

    static func latest(_ q: ReadQuery, _ lease: ReadPool.Lease, _ maxBytes: Int) throws(PGError) -> ReadResult {
        var devices = q.devices
        if devices == nil {
            // Every device, found through the primary key's index one device at a time (not a
            // scan of every row).
            devices = try lease.connection.execute(
                "WITH RECURSIVE d(device) AS (SELECT min(device) FROM \(lease.schema).records UNION ALL "
                    + "SELECT (SELECT min(r.device) FROM \(lease.schema).records r WHERE r.device > d.device) FROM d WHERE d.device IS NOT NULL) "
                    + "SELECT device FROM d WHERE device IS NOT NULL LIMIT 1000"
            ).rows.compactMap { $0[0] }
        }
        var sql = ParameterizedSQL()
        let list = sql.bind(ParameterizedSQL.textArray(devices ?? []))
        if let a = q.after { sql.conditions.append("(d.device, t.type) > (\(sql.bind(a[0])), \(sql.bind(a[1])))") }
        let limit = sql.bind(String(q.limit + 1))
        var page = Page(limit: q.limit, maxBytes: maxBytes, endpoint: .latest)
        try lease.connection.stream(
            "SELECT d.device, t.type, r.value, r.text_value, r.unit, extract(epoch FROM r.start_at)::text, "
                + "extract(epoch FROM r.end_at)::text, r.source_app, r.source_device "
                + "FROM unnest(\(list)::text[]) AS d(device) CROSS JOIN \(lease.schema).types t "
                + "CROSS JOIN LATERAL (SELECT value, text_value, unit, start_at, end_at, source_app, source_device "
                + "FROM \(lease.schema).records x WHERE x.device = d.device AND x.type = t.type AND x.kind IN ('quantity', 'category') "
                + "AND x.start_at IS NOT NULL ORDER BY x.start_at DESC, x.end_at DESC NULLS LAST LIMIT 1) r"
                + sql.whereClause + " ORDER BY d.device, t.type LIMIT \(limit)::integer", sql.parameters
        ) { row in
            page.add(key: [row[0] ?? "", row[1] ?? ""]) {
                var w = JSONWriter(capacity: 256)
                w.beginObject()
                w.key("device"); w.string(row[0] ?? "")
                w.key("type"); w.string(row[1] ?? "")
                if let v = row[2].flatMap({ Double($0) }) { w.key("value"); w.double(v) } else { optional(&w, "value", row[3]) }
                optional(&w, "unit", row[4])
                optional(&w, "start", time(row[5]))
                optional(&w, "end", time(row[6]))
                if row[7] != nil || row[8] != nil {
                    w.key("source"); w.beginObject()
                    optional(&w, "app", row[7]); optional(&w, "device", row[8])
                    w.endObject()
                }
                w.endObject()
                return w.bytes
            }
        }
        return ReadResult(body: page.finish())
    }

    static func optional(_ w: inout JSONWriter, _ key: StaticString, _ value: String?) {
        guard let value else { return }
        w.key(key); w.string(value)
    }

    static func number(_ w: inout JSONWriter, _ key: StaticString, _ value: String?) {
        guard let v = value.flatMap({ Double($0) }) else { return }
        w.key(key); w.double(v)
    }
}

/// `{"data": [...], "limit": n, "next_cursor": "…" | null}`: at most `limit` rows and, past the
/// first, at most `maxBytes` of them; `next_cursor` goes on from the last row given when more
/// were there.
struct Page {
    var w = JSONWriter(capacity: 16 << 10)
    var next: String?
    let limit: Int
    let maxBytes: Int
    let endpoint: ReadAPI.Endpoint?
    private(set) var rows = 0
    private var lastKey: [String] = []

    init(limit: Int, maxBytes: Int = .max, endpoint: ReadAPI.Endpoint? = nil) {
        self.limit = limit
        self.maxBytes = maxBytes
        self.endpoint = endpoint
        w.beginObject()
        w.key("data")
        w.beginArray()
    }

    /// Adds the row `make` writes, keyed by `key` (its cursor); false, and the cursor set, when
    /// the page is full: the row past `limit` (asked for to know more are there), or one that
    /// would take the page past `maxBytes`.
    mutating func add(key: [String], _ make: () -> [UInt8]) -> Bool {
        guard rows < limit else { return full() }
        let row = make()
        if rows > 0 && w.bytes.count + row.count + 1 > maxBytes { return full() }
        w.raw(row)
        rows += 1
        lastKey = key
        return true
    }

    private mutating func full() -> Bool {
        if let endpoint { next = ReadCursor.encode(endpoint, lastKey) }
        return false
    }

    mutating func finish() -> [UInt8] {
        w.endArray()
        w.key("limit"); w.int(limit)
        w.key("next_cursor")
        if let next { w.string(next) } else { w.null() }
        w.endObject()
        return w.bytes
    }
}
