import HealthgateCore
import Fleet
import Posix
import Storage
import Synchronization

/// The recent requests each receiver answered — what HealthSync calls sync batches: when, from
/// which receiver and device, what was answered, how many records were stored, set aside as bad,
/// or recognised as already stored (a HealthSync export sent again). For the read API's
/// `GET …/batches`, to diagnose a phone's sync. Kept in `data_dir/requests.db` (SQLite, WAL,
/// not synced per request: a crash may lose the last lines of this diagnostic log, never a
/// record), the newest `keep` requests; in a fleet, in its PostgreSQL, where every ingest machine
/// notes the requests it answered and the read API of any machine sees them all.
public final class RequestLog: @unchecked Sendable {
    public struct Entry: Sendable {
        public var id: Int64
        public var time: Timestamp
        public var receiver: String
        public var device: String?
        public var requestID: String?
        public var status: Int
        public var records: Int
        public var refused: Int
        public var duplicates: Int
        public var note: String?
    }

    private struct Writer {
        var sinceTrim = 0
        /// Failures to note, counted between two logged ones.
        var failures = 0
        var lastLogged: Int64?
    }

    let db: any StateDatabase
    let table: String
    /// The insert each answered request runs, its text made once.
    let insertSQL: String
    private let writer = Locked(Writer())
    let keep: Int
    let logger: Logger

    public init(path: String, keep: Int = 100_000, logger: Logger) throws(SQLite.Failure) {
        let db = try SQLite(path: path)
        try db.execute("PRAGMA synchronous=NORMAL")
        try db.execute(
            """
            CREATE TABLE IF NOT EXISTS requests (id INTEGER PRIMARY KEY, at_ns INTEGER NOT NULL, receiver TEXT NOT NULL,
              device TEXT, request_id TEXT, status INTEGER NOT NULL, records INTEGER NOT NULL, refused INTEGER NOT NULL,
              duplicates INTEGER NOT NULL, note TEXT)
            """)
        try db.execute("CREATE INDEX IF NOT EXISTS requests_device ON requests (device, id)")
        self.db = db
        table = "requests"
        insertSQL = RequestLog.insert(into: table)
        self.keep = keep
        self.logger = logger
    }

    /// The fleet's request log, in `fleet.state` (connected at the first use).
    public init(fleetState url: String, keep: Int = 100_000, logger: Logger) {
        table = FleetDatabase.table("requests")
        insertSQL = RequestLog.insert(into: table)
        db = FleetStateDatabase(
            url: url, purpose: "fleet request log",
            schema: [
                """
                CREATE TABLE IF NOT EXISTS \(table) (id bigserial PRIMARY KEY, at_ns bigint NOT NULL, receiver text NOT NULL,
                  device text, request_id text, status integer NOT NULL, records integer NOT NULL, refused integer NOT NULL,
                  duplicates integer NOT NULL, note text)
                """,
                "CREATE INDEX IF NOT EXISTS requests_device ON \(table) (device, id)"
            ])
        self.keep = keep
        self.logger = logger
    }

    static func insert(into table: String) -> String {
        "INSERT INTO \(table) (at_ns, receiver, device, request_id, status, records, refused, duplicates, note) "
            + "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
    }

    /// Notes one answered request. A failure to note it is logged, never the request's.
    public func note(
        time: Timestamp, receiver: String, device: String?, requestID: String?, status: Int,
        records: Int, refused: Int, duplicates: Int, note: String? = nil
    ) {
        func text(_ s: String?, _ max: Int) -> SQLite.Value { s.map { .text(String($0.prefix(max))) } ?? .null }
        let insert = [
            .int(time.unixNanoseconds), .text(receiver), text(device, 200), text(requestID, 200),
            .int(Int64(status)), .int(Int64(records)), .int(Int64(refused)), .int(Int64(duplicates)), text(note, 300)
        ]
        let logged: (String, Int)? = writer.withLock { w in
            do {
                try db.execute(insertSQL, insert)
                w.sinceTrim += 1
                if w.sinceTrim >= 1000 {
                    w.sinceTrim = 0
                    try db.execute("DELETE FROM \(table) WHERE id <= (SELECT max(id) FROM \(table)) - ?", [.int(Int64(keep))])
                }
                return nil
            } catch {
                // Once a minute at most, with how many failed since: a database that is away
                // must not flood the log.
                w.failures += 1
                let now = time.seconds
                if let last = w.lastLogged, now - last < 60 { return nil }
                w.lastLogged = now
                defer { w.failures = 0 }
                return ("\(error)", w.failures)
            }
        }
        if let (failure, count) = logged {
            logger.error("cannot note \(count == 1 ? "a request" : "\(count) requests") in the request log: \(failure)")
        }
    }

    /// The newest requests first, from before `before` (an id), of `devices` (nil: all).
    public func recent(devices: [String]?, before: Int64?, limit: Int) throws -> [Entry] {
        var conditions: [String] = []
        var values: [SQLite.Value] = []
        if let devices {
            // One placeholder per device: the text is fixed, the names are bound.
            conditions.append("device IN (" + Array(repeating: "?", count: max(1, devices.count)).joined(separator: ", ") + ")")
            values += devices.isEmpty ? [.null] : devices.map { .text($0) }
        }
        if let before {
            conditions.append("id < ?")
            values.append(.int(before))
        }
        values.append(.int(Int64(limit)))
        let rows = try db.query(
            "SELECT id, at_ns, receiver, device, request_id, status, records, refused, duplicates, note "
                + "FROM \(table)" + (conditions.isEmpty ? "" : " WHERE " + conditions.joined(separator: " AND "))
                + " ORDER BY id DESC LIMIT ?", values)
        return rows.map { r in
            let ns = r[1].int ?? 0
            return Entry(
                id: r[0].int ?? 0,
                time: Timestamp(seconds: ns / 1_000_000_000, nanoseconds: Int32(ns % 1_000_000_000)),
                receiver: r[2].text ?? "", device: r[3].text, requestID: r[4].text, status: Int(r[5].int ?? 0),
                records: Int(r[6].int ?? 0), refused: Int(r[7].int ?? 0), duplicates: Int(r[8].int ?? 0), note: r[9].text)
        }
    }

    /// A phone as the request log saw it: for the status page's devices.
    public struct Device: Sendable {
        public var receiver: String
        public var device: String
        public var lastSeen: Timestamp
        public var requests: Int
        public var records: Int
        /// The newest request of it that was refused (4xx or 5xx), with its note.
        public var lastRefusal: (time: Timestamp, status: Int, note: String?)?
    }

    /// The `limit` phones seen most recently, newest first.
    public func devices(limit: Int) throws -> [Device] {
        func time(_ ns: Int64) -> Timestamp { Timestamp(seconds: ns / 1_000_000_000, nanoseconds: Int32(ns % 1_000_000_000)) }
        let rows = try db.query(
            """
            SELECT receiver, device, max(at_ns), count(*), sum(records) FROM \(table) WHERE device IS NOT NULL
            GROUP BY receiver, device ORDER BY max(at_ns) DESC LIMIT ?
            """, [.int(Int64(limit))])
        let refused = try db.query(
            """
            SELECT receiver, device, at_ns, status, note FROM \(table) WHERE id IN
              (SELECT max(id) FROM \(table) WHERE status >= 400 AND device IS NOT NULL GROUP BY receiver, device)
            """, [])
        var last: [String: (Timestamp, Int, String?)] = [:]
        for r in refused {
            last[(r[0].text ?? "") + "\u{0}" + (r[1].text ?? "")] = (time(r[2].int ?? 0), Int(r[3].int ?? 0), r[4].text)
        }
        return rows.map { r in
            let receiver = r[0].text ?? "", device = r[1].text ?? ""
            return Device(
                receiver: receiver, device: device, lastSeen: time(r[2].int ?? 0), requests: Int(r[3].int ?? 0),
                records: Int(r[4].int ?? 0), lastRefusal: last[receiver + "\u{0}" + device].map { (time: $0.0, status: $0.1, note: $0.2) })
        }
    }
}
