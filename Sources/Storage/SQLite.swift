import CSQLite3
import Glibc

/// A small, safe wrapper over one SQLite connection: prepared statements with bound values,
/// errors with SQLite's message. One connection per process part; not shared across threads
/// without the owner's lock.
public final class SQLite: @unchecked Sendable {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
        public init(description: String) { self.description = description }
    }

    public enum Value: Equatable {
        case null
        case int(Int64)
        case double(Double)
        case text(String)
        /// Bytes, bound and read back as a BLOB.
        case blob([UInt8])

        public var text: String? { if case .text(let s) = self { return s }; return nil }
        public var int: Int64? { if case .int(let i) = self { return i }; return nil }
        public var blob: [UInt8]? { if case .blob(let b) = self { return b }; return nil }
        public var double: Double? {
            switch self {
            case .double(let d): return d
            case .int(let i): return Double(i)
            default: return nil
            }
        }
    }

    fileprivate var db: OpaquePointer?
    public let path: String

    /// `sharedAcrossThreads: false` for a connection one thread owns: SQLite then takes no
    /// mutex around each call (a statement run per record pays for it). `pageSize`: the page
    /// size of a database this creates (SQLite keeps an existing file's own).
    public init(path: String, sharedAcrossThreads: Bool = true, pageSize: Int? = nil) throws(Failure) {
        self.path = path
        // 0600 before SQLite opens it (its -wal and -shm files take the database's mode): what it
        // holds is this user's alone, whatever the umask.
        if path != ":memory:" {
            let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            if fd >= 0 {
                _ = fchmod(fd, 0o600) // one made 0644 by an earlier version too
                close(fd)
            }
        }
        var handle: OpaquePointer?
        let rc = sqlite3_open_v2(
            path, &handle,
            SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
                | (sharedAcrossThreads ? SQLITE_OPEN_FULLMUTEX : SQLITE_OPEN_NOMUTEX), nil)
        guard rc == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close(handle)
            throw Failure(description: "cannot open \(path): \(message)")
        }
        db = handle
        sqlite3_busy_timeout(handle, 5000)
        if let pageSize { try execute("PRAGMA page_size=\(pageSize)") }
        // WAL: `healthgate write` and `serve` use the store at once. FULL sync: each commit's WAL
        // frames are fsynced before it returns, so a commit survives a power cut, not only a
        // process crash (NORMAL would sync them only at checkpoints).
        try execute("PRAGMA journal_mode=WAL")
        try execute("PRAGMA synchronous=FULL")
    }

    deinit { sqlite3_close(db) }

    public func execute(_ sql: String, _ values: [Value] = []) throws(Failure) {
        _ = try query(sql, values)
    }

    /// Runs one statement and returns its rows.
    @discardableResult
    public func query(_ sql: String, _ values: [Value] = []) throws(Failure) -> [[Value]] {
        var stmt: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &stmt, nil) == SQLITE_OK else {
            throw Failure(description: "\(path): \(String(cString: sqlite3_errmsg(db))) in \(sql)")
        }
        defer { sqlite3_finalize(stmt) }
        SQLite.bind(values, to: stmt)
        var rows: [[Value]] = []
        while true {
            let rc = sqlite3_step(stmt)
            if rc == SQLITE_DONE { break }
            guard rc == SQLITE_ROW else {
                throw Failure(description: "\(path): \(String(cString: sqlite3_errmsg(db)))")
            }
            var row: [Value] = []
            for c in 0..<sqlite3_column_count(stmt) {
                switch sqlite3_column_type(stmt, c) {
                case SQLITE_INTEGER: row.append(.int(sqlite3_column_int64(stmt, c)))
                case SQLITE_FLOAT: row.append(.double(sqlite3_column_double(stmt, c)))
                case SQLITE_TEXT: row.append(.text(String(cString: sqlite3_column_text(stmt, c))))
                case SQLITE_BLOB:
                    let n = Int(sqlite3_column_bytes(stmt, c))
                    let p = sqlite3_column_blob(stmt, c)
                    row.append(.blob(n > 0 && p != nil ? Array(UnsafeRawBufferPointer(start: p, count: n)) : []))
                default: row.append(.null)
                }
            }
            rows.append(row)
        }
        return rows
    }

    /// A statement prepared once and run many times (with other values each time).
    public final class Statement {
        private let stmt: OpaquePointer
        private let owner: SQLite

        fileprivate init(_ stmt: OpaquePointer, owner: SQLite) {
            self.stmt = stmt
            self.owner = owner
        }

        deinit { sqlite3_finalize(stmt) }

        /// Binds text to parameter `i` (from 1; SQLite copies it), for `step`.
        public func bind(_ i: Int32, text: String) {
            sqlite3_bind_text(stmt, i, text, -1, hg_sqlite_transient())
        }

        /// Binds bytes to parameter `i` (from 1; SQLite copies them), for `step`.
        public func bind(_ i: Int32, blob: UnsafeRawBufferPointer) {
            sqlite3_bind_blob(stmt, i, blob.baseAddress, Int32(blob.count), hg_sqlite_transient())
        }

        /// Binds bytes to parameter `i` (from 1) without SQLite copying them, for the next `step`
        /// alone (it clears them): `blob` must stay valid until that `step` returns.
        public func bind(_ i: Int32, borrowing blob: UnsafeRawBufferPointer) {
            sqlite3_bind_blob(stmt, i, blob.baseAddress, Int32(blob.count), nil) // nil: SQLITE_STATIC
        }

        /// Binds an integer to parameter `i` (from 1), for `step`.
        public func bind(_ i: Int32, int: Int64) {
            sqlite3_bind_int64(stmt, i, int)
        }

        /// Runs the statement with what was bound to its end (for statements that return no
        /// rows) and makes it ready to run again; every parameter must be bound again.
        public func step() throws(Failure) {
            defer {
                sqlite3_reset(stmt)
                sqlite3_clear_bindings(stmt) // no borrowed bytes outlive the step
            }
            var rc = sqlite3_step(stmt)
            while rc == SQLITE_ROW { rc = sqlite3_step(stmt) }
            guard rc == SQLITE_DONE else {
                throw Failure(description: "\(owner.path): \(String(cString: sqlite3_errmsg(owner.db)))")
            }
        }

        /// Binds `values` and runs the statement to its end (for statements that return no rows).
        public func run(_ values: Value...) throws(Failure) {
            SQLite.bind(values, to: stmt)
            try step()
        }
    }

    /// `sql` prepared, to run many times.
    public func prepare(_ sql: String) throws(Failure) -> Statement {
        var stmt: OpaquePointer?
        guard sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &stmt, nil) == SQLITE_OK, let stmt else {
            throw Failure(description: "\(path): \(String(cString: sqlite3_errmsg(db))) in \(sql)")
        }
        return Statement(stmt, owner: self)
    }

    /// Binds `values` to the statement's parameters, in order (text copied by SQLite).
    fileprivate static func bind(_ values: [Value], to stmt: OpaquePointer?) {
        for (i, v) in values.enumerated() {
            let index = Int32(i + 1)
            switch v {
            case .null: sqlite3_bind_null(stmt, index)
            case .int(let x): sqlite3_bind_int64(stmt, index, x)
            case .double(let x): sqlite3_bind_double(stmt, index, x)
            case .text(let s): sqlite3_bind_text(stmt, index, s, -1, hg_sqlite_transient())
            case .blob(let b):
                b.withUnsafeBytes { _ = sqlite3_bind_blob(stmt, index, $0.baseAddress, Int32($0.count), hg_sqlite_transient()) }
            }
        }
    }

    /// One stored BLOB read or written in place, a part at a time (SQLite's incremental blob I/O:
    /// a binary search over a large blob reads a few pages, not all of it). Not past its size,
    /// which it cannot change; valid until its row is changed by a statement.
    public final class Blob {
        private let handle: OpaquePointer
        private let owner: SQLite
        /// Its size in bytes.
        public let count: Int

        fileprivate init(_ handle: OpaquePointer, owner: SQLite) {
            self.handle = handle
            self.owner = owner
            count = Int(sqlite3_blob_bytes(handle))
        }

        deinit { sqlite3_blob_close(handle) }

        /// Reads `into.count` bytes from `offset`.
        public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(Failure) {
            guard offset >= 0, offset + buffer.count <= count else {
                throw Failure(description: "\(owner.path): a read past a blob's end (\(offset) + \(buffer.count) of \(count))")
            }
            guard sqlite3_blob_read(handle, buffer.baseAddress, Int32(buffer.count), Int32(offset)) == SQLITE_OK else {
                throw Failure(description: "\(owner.path): \(String(cString: sqlite3_errmsg(owner.db)))")
            }
        }

        /// Writes `bytes` at `offset` (a blob opened to write).
        public func write(_ bytes: UnsafeRawBufferPointer, at offset: Int) throws(Failure) {
            guard offset >= 0, offset + bytes.count <= count else {
                throw Failure(description: "\(owner.path): a write past a blob's end (\(offset) + \(bytes.count) of \(count))")
            }
            guard sqlite3_blob_write(handle, bytes.baseAddress, Int32(bytes.count), Int32(offset)) == SQLITE_OK else {
                throw Failure(description: "\(owner.path): \(String(cString: sqlite3_errmsg(owner.db)))")
            }
        }
    }

    /// The BLOB in `column` of `table`'s row `row` (its rowid). The table and column names are
    /// the caller's own constants, never a sender's text.
    public func blob(table: StaticString, column: StaticString, row: Int64, writable: Bool = false) throws(Failure) -> Blob {
        var handle: OpaquePointer?
        let rc = sqlite3_blob_open(db, "main", table.description, column.description, row, writable ? 1 : 0, &handle)
        guard rc == SQLITE_OK, let handle else {
            sqlite3_blob_close(handle)
            throw Failure(description: "\(path): \(String(cString: sqlite3_errmsg(db))) (blob \(table).\(column) of row \(row))")
        }
        return Blob(handle, owner: self)
    }

    /// Runs `body` in one transaction (BEGIN IMMEDIATE: writers queue instead of failing).
    public func transaction<R>(_ body: () throws -> R) throws -> R {
        try execute("BEGIN IMMEDIATE")
        do {
            let r = try body()
            try execute("COMMIT")
            return r
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }
}
