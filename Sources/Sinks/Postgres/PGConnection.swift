import CPQ
import Glibc

/// One libpq connection, owned by the sink's drainer thread (not `Sendable`). Statements are
/// sent as text with their parameters apart (`execute(_:_:)`, never spliced into the SQL);
/// bulk rows go through `copy(_:rows:)`. Errors carry PostgreSQL's SQLSTATE, which decides
/// what becomes of a batch (`PGError.outcome`).
package final class PGConnection {
    private var conn: OpaquePointer?

    /// Connects with libpq's own parsing of `dsn` (a URL or key=value pairs), then `extra`
    /// keywords (password, connect_timeout, application_name…), which win over the dsn's.
    package init(dsn: String, extra: [(String, String)]) throws(PGError) {
        let keywords = ["dbname"] + extra.map(\.0)
        let values = [dsn] + extra.map(\.1)
        conn = PGConnection.withCStrings(keywords) { k in
            PGConnection.withCStrings(values) { v in PQconnectdbParams(k, v, 1) }
        }
        guard let c = conn, PQstatus(c) == CONNECTION_OK else {
            let why = conn.map { PGConnection.text(PQerrorMessage($0)) } ?? "out of memory"
            if let c = conn { PQfinish(c) }
            conn = nil
            throw PGError(sqlstate: nil, message: why.isEmpty ? "could not connect" : why)
        }
        // NOTICEs ("schema … already exists, skipping") would go to stderr: they are not news.
        PQsetNoticeProcessor(c, { _, _ in }, nil)
    }

    deinit { close() }

    package func close() {
        if let c = conn { PQfinish(c) }
        conn = nil
    }

    /// False once the server or the network has gone (the next use should reconnect).
    package var isOK: Bool { conn.map { PQstatus($0) == CONNECTION_OK } ?? false }

    /// Runs one statement with text parameters ($1, $2, …); returns its rows as text (nil for
    /// NULL) and the count of rows it touched.
    @discardableResult
    package func execute(_ sql: String, _ parameters: [String?] = []) throws(PGError) -> PGRows {
        guard let c = conn else { throw PGError(sqlstate: "08003", message: "not connected") }
        let result: OpaquePointer? = PGConnection.withOptionalCStrings(parameters) { p in
            PQexecParams(c, sql, Int32(parameters.count), nil, p, nil, nil, 0)
        }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else { throw error(result) }
        return PGRows(result!)
    }

    /// Runs one query and hands its rows to `row` one at a time as they arrive (libpq's
    /// single-row mode: the whole result is never held); `row` returns false to stop, and the
    /// rest of the query is cancelled. The connection is left ready for the next statement.
    package func stream(_ sql: String, _ parameters: [String?] = [], row: ([String?]) -> Bool) throws(PGError) {
        guard let c = conn else { throw PGError(sqlstate: "08003", message: "not connected") }
        let sent = PGConnection.withOptionalCStrings(parameters) { p in
            PQsendQueryParams(c, sql, Int32(parameters.count), nil, p, nil, nil, 0)
        }
        guard sent == 1 else { throw PGError(sqlstate: nil, message: PGConnection.text(PQerrorMessage(c))) }
        _ = PQsetSingleRowMode(c)
        var stopped = false
        var first: PGError?
        // Every result is read, to the end, whatever happens: then the connection is clean.
        while let r = PQgetResult(c) {
            defer { PQclear(r) }
            switch PQresultStatus(r) {
            case PGRES_SINGLE_TUPLE:
                guard !stopped && first == nil else { continue }
                let f = PQnfields(r)
                var cells: [String?] = []
                cells.reserveCapacity(Int(f))
                for j in 0..<f { cells.append(PQgetisnull(r, 0, j) == 1 ? nil : String(cString: PQgetvalue(r, 0, j))) }
                if !row(cells) {
                    stopped = true
                    if let cancel = PQgetCancel(c) {
                        var buffer = [CChar](repeating: 0, count: 256)
                        _ = PQcancel(cancel, &buffer, Int32(buffer.count))
                        PQfreeCancel(cancel)
                    }
                }
            case PGRES_TUPLES_OK, PGRES_COMMAND_OK:
                break
            default:
                // After our own cancel, its "canceling statement" is expected, not an error.
                if !stopped && first == nil { first = error(r) }
            }
        }
        if let first { throw first }
    }

    /// `body` in one transaction: committed when it returns, rolled back when it throws (while
    /// the connection still stands).
    package func transaction<R>(_ body: () throws(PGError) -> R) throws(PGError) -> R {
        try execute("BEGIN")
        do {
            let r = try body()
            try execute("COMMIT")
            return r
        } catch {
            if isOK { _ = try? execute("ROLLBACK") }
            throw error
        }
    }

    /// `COPY … FROM STDIN` with `rows` in COPY's text format (see `PGCopyWriter`).
    @discardableResult
    func copy(_ sql: String, rows: [UInt8]) throws(PGError) -> Int {
        try beginCopy(sql)
        putCopy(rows)
        return try endCopy()
    }

    /// Starts `COPY … FROM STDIN`; rows follow with `putCopy` (the server reads them as they
    /// come, so encoding the next ones overlaps its work), and `endCopy` ends it.
    func beginCopy(_ sql: String) throws(PGError) {
        guard let c = conn else { throw PGError(sqlstate: "08003", message: "not connected") }
        copyFailed = false
        let start = PQexec(c, sql)
        defer { PQclear(start) }
        if PQresultStatus(start) != PGRES_COPY_IN { throw error(start) }
    }

    private var copyFailed = false

    func putCopy(_ rows: [UInt8]) {
        guard let c = conn, !copyFailed else { return }
        rows.withUnsafeBufferPointer { b in
            var offset = 0
            while offset < b.count && !copyFailed {
                let n = min(1 << 20, b.count - offset)
                let sent = b.baseAddress!.advanced(by: offset).withMemoryRebound(to: CChar.self, capacity: n) {
                    PQputCopyData(c, $0, Int32(n))
                }
                if sent != 1 { copyFailed = true }
                offset += n
            }
        }
    }

    /// Ends the COPY; the rows it took.
    @discardableResult
    func endCopy() throws(PGError) -> Int {
        guard let c = conn else { throw PGError(sqlstate: "08003", message: "not connected") }
        if PQputCopyEnd(c, nil) != 1 { copyFailed = true }
        var first: PGError?
        var count = 0
        while let r = PQgetResult(c) {
            if PQresultStatus(r) != PGRES_COMMAND_OK && first == nil { first = error(r) }
            if first == nil { count = Int(String(cString: PQcmdTuples(r))) ?? 0 }
            PQclear(r)
        }
        if let first { throw first }
        if copyFailed { throw PGError(sqlstate: nil, message: PGConnection.text(PQerrorMessage(c))) }
        return count
    }

    /// An identifier ("healthgate") quoted for SQL by libpq.
    package func quoted(identifier: String) -> String {
        guard let c = conn, let q = PQescapeIdentifier(c, identifier, identifier.utf8.count) else { return "\"invalid\"" }
        defer { PQfreemem(q) }
        return String(cString: q)
    }

    private func error(_ result: OpaquePointer?) -> PGError {
        let state = result.flatMap { PQresultErrorField($0, Int32(UInt8(ascii: "C"))) }.map { String(cString: $0) }
        var message =
            result.flatMap { PQresultErrorField($0, Int32(UInt8(ascii: "M"))) }.map { String(cString: $0) }
            ?? conn.map { PGConnection.text(PQerrorMessage($0)) } ?? ""
        if let d = result.flatMap({ PQresultErrorField($0, Int32(UInt8(ascii: "D"))) }) { message += " (\(String(cString: d)))" }
        return PGError(sqlstate: state, message: message.isEmpty ? "the statement failed" : message)
    }

    static func text(_ p: UnsafePointer<CChar>?) -> String {
        guard let p else { return "" }
        var s = String(cString: p)
        while s.hasSuffix("\n") { s.removeLast() }
        return s.replacing("\n", with: "; ")
    }

    static func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
        let copies = strings.map { strdup($0) }
        defer { for p in copies { free(p) } }
        var pointers: [UnsafePointer<CChar>?] = copies.map { UnsafePointer($0) }
        pointers.append(nil)
        return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
    }

    static func withOptionalCStrings<R>(_ strings: [String?], _ body: (UnsafePointer<UnsafePointer<CChar>?>?) -> R) -> R {
        let copies = strings.map { $0.map { strdup($0) } ?? nil }
        defer { for p in copies { free(p) } }
        let pointers: [UnsafePointer<CChar>?] = copies.map { $0.map { UnsafePointer($0) } }
        return pointers.withUnsafeBufferPointer { body(strings.isEmpty ? nil : $0.baseAddress) }
    }
}

/// The rows of a result, as text.
package struct PGRows {
    package let rows: [[String?]]
    /// Rows an INSERT, UPDATE or DELETE touched.
    package let affected: Int
    /// Each column's type (its OID: 20 bigint, 23 integer, 701 double precision, 25 text…).
    package let types: [UInt32]

    init(_ r: OpaquePointer) {
        var rows: [[String?]] = []
        let n = PQntuples(r), f = PQnfields(r)
        types = (0..<f).map { UInt32(PQftype(r, $0)) }
        rows.reserveCapacity(Int(n))
        for i in 0..<n {
            var row: [String?] = []
            for j in 0..<f { row.append(PQgetisnull(r, i, j) == 1 ? nil : String(cString: PQgetvalue(r, i, j))) }
            rows.append(row)
        }
        self.rows = rows
        affected = Int(String(cString: PQcmdTuples(r))) ?? 0
    }

    package var first: String? { rows.first?.first ?? nil }
}

/// A PostgreSQL error: its SQLSTATE (nil when the connection itself failed) and message.
package struct PGError: Error, CustomStringConvertible {
    package var sqlstate: String?
    package var message: String

    package var description: String { sqlstate.map { "\(message) [SQLSTATE \($0)]" } ?? message }

    /// What a batch that met this error becomes.
    package enum Outcome: Equatable {
        /// Try again later, after connecting again when the connection is gone: the server or
        /// the network is away (08, 57 shutdown and cancel), a transient conflict (40001, 40P01),
        /// resources (53), or no SQLSTATE at all (the connection failed).
        case retry
        /// The data: some record of the batch is refused (22 data exception, 23 integrity):
        /// halve the batch to find it; it goes to the dead letters.
        case refuse
        /// Anything else (permissions, a table altered by hand, authentication): kept, and said
        /// loudly, since only a person can fix it.
        case fix
    }

    package var outcome: Outcome {
        guard let s = sqlstate, s.count == 5 else { return .retry }
        switch s.prefix(2) {
        case "08", "53", "57", "58": return .retry
        case "40": return s == "40001" || s == "40P01" ? .retry : .fix
        case "22", "23": return .refuse
        default: return .fix
        }
    }
}
