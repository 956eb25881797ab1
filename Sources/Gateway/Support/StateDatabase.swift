import Fleet
import SinkPostgres
import Storage

/// Where a part of the gateway keeps its small tables: SQLite under the data dir (one machine),
/// or the fleet's PostgreSQL, where every machine reads and writes the same rows (write-back
/// commands, the request log). Their statements are written once, with `?` placeholders, for both.
protocol StateDatabase: AnyObject {
    func execute(_ sql: String, _ values: [SQLite.Value]) throws
    func query(_ sql: String, _ values: [SQLite.Value]) throws -> [[SQLite.Value]]
    func transaction<R>(_ body: () throws -> R) throws -> R
}

extension SQLite: StateDatabase {}

/// Tables in the fleet's PostgreSQL (`fleet.state`), created at the first connection.
final class FleetStateDatabase: StateDatabase {
    let db: FleetDatabase

    init(url: String, purpose: String, schema: [String]) {
        db = FleetDatabase(url: url, purpose: purpose, schema: schema)
    }

    func execute(_ sql: String, _ values: [SQLite.Value]) throws { _ = try query(sql, values) }

    func query(_ sql: String, _ values: [SQLite.Value]) throws -> [[SQLite.Value]] {
        let text = FleetStateDatabase.numbered(sql)
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
                    // A numeric is what `sum` of a bigint gives: whole ones read as integers.
                    case 1700: return Int64(cell).map { .int($0) } ?? Double(cell).map { .double($0) } ?? .text(cell)
                    case 700, 701: return Double(cell).map { .double($0) } ?? .text(cell)
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

    /// SQLite's `?` placeholders as PostgreSQL's `$1`, `$2`, … (the statements hold no
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
