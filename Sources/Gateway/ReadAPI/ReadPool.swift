import HealthgateCore
import Posix
import SinkPostgres
import Synchronization

/// The read API's database connections: at most `limit`, made when wanted, kept while they
/// work. Every session is read-only (`default_transaction_read_only`), in UTC, and cancels a
/// statement after the timeout, so a request can neither write nor hold the database long.
final class ReadPool: Sendable {
    /// A connection out of the pool belongs to the one request that took it until it is given
    /// back; the pool only hands it over (hence unchecked).
    final class Lease: @unchecked Sendable {
        let connection: PGConnection
        let schema: String

        init(_ connection: PGConnection, schema: String) {
            self.connection = connection
            self.schema = schema
        }
    }

    private struct State {
        var idle: [Lease] = []
        var open = 0
    }

    private let access: PostgresSink.ReadAccess
    private let limit: Int
    private let statementTimeoutMs: Int
    private let state = Locked(State())
    private let freed = Monitor()

    init(access: PostgresSink.ReadAccess, limit: Int, statementTimeoutMs: Int) {
        self.access = access
        self.limit = limit
        self.statementTimeoutMs = statementTimeoutMs
    }

    enum Failure: Error {
        /// Every connection is busy for longer than a request should wait.
        case busy
        case database(PGError)
    }

    /// Runs `body` with a connection; a connection that broke is closed, not given back, and
    /// `body` runs once more on a new one (an idle connection goes stale when the server restarts).
    func with<R>(_ body: (Lease) throws(PGError) -> R) throws(Failure) -> R {
        var attempt = 0
        while true {
            attempt += 1
            let lease = try take()
            do {
                let r = try body(lease)
                give(lease)
                return r
            } catch {
                if lease.connection.isOK {
                    give(lease)
                    throw .database(error)
                }
                drop(lease)
                if attempt >= 2 { throw .database(error) }
            }
        }
    }

    /// A connection: an idle one, a new one while under the limit, or — all busy — one given
    /// back within a moment; else `busy` at once, so that reads never hold the HTTP threads
    /// that phones' uploads need.
    private func take() throws(Failure) -> Lease {
        let deadline = monotonicSeconds() + 0.5
        while true {
            let (lease, mayOpen): (Lease?, Bool) = state.withLock { s in
                if let l = s.idle.popLast() { return (l, false) }
                if s.open < limit {
                    s.open += 1
                    return (nil, true)
                }
                return (nil, false)
            }
            if let lease { return lease }
            if mayOpen {
                do {
                    return try connect()
                } catch {
                    state.withLock { $0.open -= 1 }
                    throw .database(error)
                }
            }
            let left = deadline - monotonicSeconds()
            if left <= 0 { throw .busy }
            freed.withLock { freed.wait(seconds: min(left, 0.05)) }
        }
    }

    private func connect() throws(PGError) -> Lease {
        var extra: [(String, String)] = [
            ("connect_timeout", "\(access.connectTimeout)"),
            ("application_name", "healthgate read API")
        ]
        if let p = access.password { extra.append(("password", p)) }
        let c = try PGConnection(dsn: access.dsn, extra: extra)
        try c.execute(
            "SELECT set_config('statement_timeout', $1, false), set_config('TimeZone', 'UTC', false), "
                + "set_config('default_transaction_read_only', 'on', false), set_config('extra_float_digits', '3', false), "
                + "set_config('DateStyle', 'ISO, YMD', false)", ["\(statementTimeoutMs)"])
        return Lease(c, schema: c.quoted(identifier: access.schema))
    }

    private func give(_ lease: Lease) {
        state.withLock { $0.idle.append(lease) }
        freed.withLock { freed.broadcast() }
    }

    private func drop(_ lease: Lease) {
        lease.connection.close()
        state.withLock { $0.open -= 1 }
        freed.withLock { freed.broadcast() }
    }
}
