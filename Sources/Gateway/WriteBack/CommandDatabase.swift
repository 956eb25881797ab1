import Fleet
import SinkPostgres
import Storage

/// What the command store keeps its commands in: SQLite under the data dir (one machine), or
/// the fleet's PostgreSQL, where every ingest machine sends and records the same commands.
/// The store's statements are written once, with `?` placeholders, for both.
protocol CommandDatabase: AnyObject {
    func execute(_ sql: String, _ values: [SQLite.Value]) throws
    func query(_ sql: String, _ values: [SQLite.Value]) throws -> [[SQLite.Value]]
    func transaction<R>(_ body: () throws -> R) throws -> R
}

extension SQLite: CommandDatabase {}

/// The commands in the fleet's PostgreSQL (`fleet.state`).
final class FleetCommandDatabase: CommandDatabase {
    let db: FleetDatabase

    init(url: String, commands: String, results: String) {
        db = FleetDatabase(
            url: url, purpose: "fleet commands",
            schema: [
                """
                CREATE TABLE IF NOT EXISTS \(commands) (
                    receiver text NOT NULL, id text NOT NULL, version integer NOT NULL, op text NOT NULL,
                    type text NOT NULL, value_num double precision, value_name text, unit text, start text, "end" text,
                    created_at bigint NOT NULL, sent_count integer NOT NULL DEFAULT 0, last_sent_at bigint,
                    result_version integer, result_status text, result_reason text, result_at bigint,
                    rowid bigserial, PRIMARY KEY (receiver, id))
                """,
                """
                CREATE TABLE IF NOT EXISTS \(results) (
                    receiver text NOT NULL, id text NOT NULL, version integer NOT NULL, status text NOT NULL,
                    reason text, at bigint NOT NULL)
                """
            ])
    }

    func execute(_ sql: String, _ values: [SQLite.Value]) throws { _ = try query(sql, values) }

    func query(_ sql: String, _ values: [SQLite.Value]) throws -> [[SQLite.Value]] {
        let text = FleetCommandDatabase.numbered(sql)
        let parameters: [String?] = values.map { v in
            switch v {
            case .null: return nil
            case .int(let i): return String(i)
            case .double(let d): return "\(d)"
            case .text(let s): return s
            case .blob(let b): return String(decoding: b, as: UTF8.self)
            }
        }
        return try db.with { c in
            let r = try c.execute(text, parameters)
            return r.rows.map { row in
                row.enumerated().map { i, cell in
                    guard let cell else { return .null }
                    switch r.types[i] {
                    case 20, 21, 23: return Int64(cell).map { .int($0) } ?? .text(cell)
                    case 700, 701, 1700: return Double(cell).map { .double($0) } ?? .text(cell)
                    default: return .text(cell)
                    }
                }
            }
        }
    }

    func transaction<R>(_ body: () throws -> R) throws -> R {
        try db.with { c in
            try c.execute("BEGIN")
            do {
                let r = try body()
                try c.execute("COMMIT")
                return r
            } catch {
                if c.isOK { _ = try? c.execute("ROLLBACK") }
                throw error
            }
        }
    }

    /// SQLite's `?` placeholders as PostgreSQL's `$1`, `$2`, … (the store's statements hold no
    /// `?` in a literal).
    static func numbered(_ sql: String) -> String {
        var out = ""
        var n = 0
        for ch in sql {
            if ch == "?" {
                n += 1
                out += "$\(n)"
            } else {
                out.append(ch)
            }
        }
        return out
    }
}
