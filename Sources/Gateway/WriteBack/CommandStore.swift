import FastJSON
import Fleet
import Glibc
import HealthgateCore
import Posix
import Storage

/// One write-back command (guide section 10) as the store keeps it.
public struct WriteCommand: Sendable, Equatable {
    public enum Value: Sendable, Equatable {
        case number(Double)
        case name(String)
    }

    public var receiver: String
    public var id: String
    public var version: Int
    /// `write` or `delete`.
    public var op: String
    public var type: String
    public var value: Value?
    public var unit: String?
    public var start: Timestamp?
    public var end: Timestamp?
    public var createdAt: Int64
    public var sentCount: Int
    public var lastSentAt: Int64?
    /// The version the last result was for, and what it said.
    public var resultVersion: Int?
    public var resultStatus: String?
    public var resultReason: String?

    /// Done once a result for its latest version has arrived.
    public var isDone: Bool { resultVersion == version }
}

/// The write-back commands, in SQLite under the data dir (in a fleet: in its shared
/// PostgreSQL, so that a command queued through one machine goes out through whichever the
/// phone reaches): `healthgate write` and `delete` add to it while `serve` runs; `serve` sends
/// what is pending in replies and records results.
public final class CommandStore: @unchecked Sendable {
    let db: any StateDatabase
    /// Where the commands are, for messages.
    public let path: String
    /// The tables' names (the fleet's are prefixed, in a database shared with others).
    let commandTable: String
    let resultTable: String

    /// The store a config uses: the fleet's when it has `fleet:`, else the data dir's.
    public static func open(dataDir: String, fleet: FleetSettings?) throws -> CommandStore {
        if let fleet { return CommandStore(fleetState: fleet.state) }
        return try CommandStore(dataDir: dataDir)
    }

    /// The fleet's store in `fleet.state` (connected at the first use).
    public init(fleetState url: String) {
        commandTable = FleetDatabase.table("commands")
        resultTable = FleetDatabase.table("command_results")
        db = FleetStateDatabase(
            url: url, purpose: "fleet commands",
            schema: [
                """
                CREATE TABLE IF NOT EXISTS \(commandTable) (
                    receiver text NOT NULL, id text NOT NULL, version integer NOT NULL, op text NOT NULL,
                    type text NOT NULL, value_num double precision, value_name text, unit text, start text, "end" text,
                    created_at bigint NOT NULL, sent_count integer NOT NULL DEFAULT 0, last_sent_at bigint,
                    result_version integer, result_status text, result_reason text, result_at bigint,
                    rowid bigserial, PRIMARY KEY (receiver, id))
                """,
                """
                CREATE TABLE IF NOT EXISTS \(resultTable) (
                    receiver text NOT NULL, id text NOT NULL, version integer NOT NULL, status text NOT NULL,
                    reason text, at bigint NOT NULL)
                """
            ])
        path = "the fleet's PostgreSQL (\(commandTable))"
    }

    public init(dataDir: String) throws {
        try FileIO.makeDirectories(dataDir, mode: 0o700)
        path = FileIO.join(dataDir, "commands.sqlite")
        commandTable = "commands"
        resultTable = "results"
        let db = try SQLite(path: path)
        self.db = db
        try db.execute(
            """
            CREATE TABLE IF NOT EXISTS commands (
                receiver TEXT NOT NULL, id TEXT NOT NULL, version INTEGER NOT NULL, op TEXT NOT NULL,
                type TEXT NOT NULL, value_num REAL, value_name TEXT, unit TEXT, start TEXT, "end" TEXT,
                created_at INTEGER NOT NULL, sent_count INTEGER NOT NULL DEFAULT 0, last_sent_at INTEGER,
                result_version INTEGER, result_status TEXT, result_reason TEXT, result_at INTEGER,
                PRIMARY KEY (receiver, id))
            """)
        try db.execute(
            """
            CREATE TABLE IF NOT EXISTS results (
                receiver TEXT NOT NULL, id TEXT NOT NULL, version INTEGER NOT NULL, status TEXT NOT NULL,
                reason TEXT, at INTEGER NOT NULL)
            """)
    }

    static let columns = """
        receiver, id, version, op, type, value_num, value_name, unit, start, "end", created_at, sent_count,
        last_sent_at, result_version, result_status, result_reason
        """

    static func command(_ r: [SQLite.Value]) -> WriteCommand {
        var value: WriteCommand.Value?
        if let d = r[5].double { value = .number(d) } else if let n = r[6].text { value = .name(n) }
        return WriteCommand(
            receiver: r[0].text ?? "", id: r[1].text ?? "", version: Int(r[2].int ?? 1), op: r[3].text ?? "",
            type: r[4].text ?? "", value: value, unit: r[7].text,
            start: r[8].text.flatMap { Timestamp.parseRFC3339($0)?.0 },
            end: r[9].text.flatMap { Timestamp.parseRFC3339($0)?.0 }, createdAt: r[10].int ?? 0,
            sentCount: Int(r[11].int ?? 0), lastSentAt: r[12].int, resultVersion: r[13].int.map { Int($0) },
            resultStatus: r[14].text, resultReason: r[15].text)
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Adds a write, or a new version of command `id` (which replaces the earlier one).
    @discardableResult
    public func write(
        receiver: String, id: String?, type: String, value: WriteCommand.Value, unit: String?,
        start: Timestamp, end: Timestamp, now: Int64
    ) throws -> WriteCommand {
        try db.transaction {
            let commandID = try id ?? nextID(receiver: receiver)
            let existing = try command(receiver: receiver, id: commandID)
            let version = (existing?.version ?? 0) + 1
            var num: SQLite.Value = .null
            var name: SQLite.Value = .null
            switch value {
            case .number(let d): num = .double(d)
            case .name(let n): name = .text(n)
            }
            try db.execute(
                """
                INSERT INTO \(commandTable) (receiver, id, version, op, type, value_num, value_name, unit, start, "end", created_at)
                VALUES (?, ?, ?, 'write', ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT(receiver, id) DO UPDATE SET version = excluded.version, op = 'write', type = excluded.type,
                    value_num = excluded.value_num, value_name = excluded.value_name, unit = excluded.unit,
                    start = excluded.start, "end" = excluded."end", sent_count = 0, last_sent_at = NULL
                """,
                [
                    .text(receiver), .text(commandID), .int(Int64(version)), .text(type), num, name,
                    unit.map { .text($0) } ?? .null, .text(start.rfc3339()), .text(end.rfc3339()), .int(now)
                ])
            return try command(receiver: receiver, id: commandID)!
        }
    }

    /// Queues the delete of what command `id` wrote: a new version with `op: delete`.
    @discardableResult
    public func delete(receiver: String, id: String, now: Int64) throws -> WriteCommand {
        try db.transaction {
            guard let existing = try command(receiver: receiver, id: id) else {
                throw Failure(description: "no command \(id) for receiver \(receiver) (see `healthgate status`)")
            }
            guard existing.op == "write" else {
                throw Failure(description: "command \(id) is already a delete (version \(existing.version))")
            }
            try db.execute(
                """
                UPDATE \(commandTable) SET version = version + 1, op = 'delete', value_num = NULL, value_name = NULL,
                    unit = NULL, start = NULL, "end" = NULL, sent_count = 0, last_sent_at = NULL
                WHERE receiver = ? AND id = ?
                """, [.text(receiver), .text(id)])
            return try command(receiver: receiver, id: id)!
        }
    }

    /// `c_1`, `c_2`, … the next number not used by this receiver.
    func nextID(receiver: String) throws -> String {
        let ids = try db.query("SELECT id FROM \(commandTable) WHERE receiver = ?", [.text(receiver)]).compactMap { $0[0].text }
        let highest = ids.compactMap { $0.hasPrefix("c_") ? Int($0.dropFirst(2)) : nil }.max() ?? 0
        return "c_\(highest + 1)"
    }

    public func command(receiver: String, id: String) throws -> WriteCommand? {
        try db.query(
            "SELECT \(CommandStore.columns) FROM \(commandTable) WHERE receiver = ? AND id = ?",
            [.text(receiver), .text(id)]
        ).first.map(CommandStore.command)
    }

    /// Every command of a receiver (or all), oldest first.
    public func all(receiver: String? = nil) throws -> [WriteCommand] {
        let rows =
            receiver == nil
            ? try db.query("SELECT \(CommandStore.columns) FROM \(commandTable) ORDER BY created_at, rowid", [])
            : try db.query(
                "SELECT \(CommandStore.columns) FROM \(commandTable) WHERE receiver = ? ORDER BY created_at, rowid",
                [.text(receiver!)])
        return rows.map(CommandStore.command)
    }

    /// Commands without a result for their latest version.
    public func pending(receiver: String) throws -> [WriteCommand] {
        try all(receiver: receiver).filter { !$0.isDone }
    }

    public func markSent(receiver: String, ids: [String], at: Int64) throws {
        try db.transaction {
            for id in ids {
                try db.execute(
                    "UPDATE \(commandTable) SET sent_count = sent_count + 1, last_sent_at = ? WHERE receiver = ? AND id = ?",
                    [.int(at), .text(receiver), .text(id)])
            }
        }
    }

    /// Records the results of one request in one transaction. A result for a command this
    /// receiver does not have is not stored (a phone could send any number of them): the ids
    /// of those come back, for the log. A result repeated within the request is stored once.
    public func record(
        receiver: String, results: [(id: String, version: Int, status: String, reason: String?)],
        at: Int64
    ) throws -> (recorded: Int, unknown: [String]) {
        try db.transaction {
            var recorded = 0
            var unknown: [String] = []
            var seen: Set<String> = []
            for r in results {
                guard seen.insert("\(r.id)\u{0}\(r.version)\u{0}\(r.status)").inserted else { continue }
                guard let c = try command(receiver: receiver, id: r.id) else { unknown.append(r.id); continue }
                try db.execute(
                    "INSERT INTO \(resultTable) (receiver, id, version, status, reason, at) VALUES (?, ?, ?, ?, ?, ?)",
                    [
                        .text(receiver), .text(r.id), .int(Int64(r.version)), .text(r.status),
                        r.reason.map { .text($0) } ?? .null, .int(at)
                    ])
                recorded += 1
                // A result for an older version says nothing of the latest one.
                if r.version >= (c.resultVersion ?? 0) && r.version <= c.version {
                    try db.execute(
                        """
                        UPDATE \(commandTable) SET result_version = ?, result_status = ?, result_reason = ?, result_at = ?
                        WHERE receiver = ? AND id = ?
                        """,
                        [
                            .int(Int64(r.version)), .text(r.status), r.reason.map { .text($0) } ?? .null, .int(at),
                            .text(receiver), .text(r.id)
                        ])
                }
            }
            return (recorded, unknown)
        }
    }
}

/// The commands message of guide section 10: `{"v":1,"type":"commands","commands":[…]}`, at most
/// 65,536 bytes (the app ignores a longer reply): commands that do not fit wait for the next reply.
enum CommandsMessage {
    static let maxBytes = 65_536

    static func encode(_ commands: [WriteCommand]) -> (body: [UInt8], included: [WriteCommand]) {
        var included: [WriteCommand] = []
        var body = Array(#"{"v":1,"type":"commands","commands":["#.utf8)
        for c in commands {
            let item = encode(c)
            if body.count + item.count + (included.isEmpty ? 0 : 1) + 2 > maxBytes { continue }
            if !included.isEmpty { body.append(0x2C) }
            body += item
            included.append(c)
        }
        body += Array("]}".utf8)
        return (body, included)
    }

    static func encode(_ c: WriteCommand) -> [UInt8] {
        var w = JSONWriter(capacity: 200)
        w.beginObject()
        w.key("command_id"); w.string(c.id)
        w.key("version"); w.int(c.version)
        w.key("op"); w.string(c.op)
        w.key("type"); w.string(c.type)
        if c.op == "write" {
            switch c.value {
            case .number(let d)?: w.key("value"); w.double(d)
            case .name(let n)?: w.key("value"); w.string(n)
            case nil: break
            }
            if let u = c.unit { w.key("unit"); w.string(u) }
            if let s = c.start { w.key("start"); w.string(s.rfc3339()) }
            if let e = c.end { w.key("end"); w.string(e.rfc3339()) }
        }
        w.endObject()
        return w.bytes
    }
}
