import Glibc
import Posix
import SinkPostgres

/// The fleet's shared PostgreSQL (`fleet.state`) for one part of it: one connection, made at
/// the first use (its tables created) and again after it broke. Threads take turns on it; the
/// lock is recursive, so that a transaction's statements run inside its `with`.
public final class FleetDatabase: @unchecked Sendable {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// The fleet's tables live in a schema of their own, named in every statement: a search
    /// path of `"$user", public` would otherwise put a table in the `healthgate` schema (the
    /// postgres sink's, when the user is called healthgate) for the machines that connect after
    /// it exists, and in `public` for those before: two tables where there must be one.
    public static let schemaName = "healthgate_fleet"

    /// A fleet table's qualified name.
    public static func table(_ name: String) -> String { "\(schemaName).\(name)" }

    let url: String
    /// Its `application_name`, and the start of its errors.
    let purpose: String
    /// `CREATE … IF NOT EXISTS` statements run on each new connection (after the schema's).
    let schema: [String]
    private var connection: PGConnection?
    /// The last failure to connect and when (monotonic seconds): for a second after it, callers
    /// are told it again at once, rather than each waiting for a database that is away.
    private var refused: (error: PGError, at: Double)?
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)

    public init(url: String, purpose: String, schema: [String]) {
        self.url = url
        self.purpose = purpose
        self.schema = schema
        var attr = pthread_mutexattr_t()
        pthread_mutexattr_init(&attr)
        pthread_mutexattr_settype(&attr, Int32(PTHREAD_MUTEX_RECURSIVE))
        pthread_mutex_init(mutex, &attr)
        pthread_mutexattr_destroy(&attr)
    }

    deinit {
        connection?.close()
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    public func close() {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        connection?.close()
        connection = nil
    }

    /// Runs `body` with the connection, made if there is none; a connection that broke is
    /// dropped (the next call makes a new one).
    package func with<R>(_ body: (PGConnection) throws -> R) throws(Failure) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        do {
            return try body(try connected())
        } catch {
            if connection?.isOK != true {
                connection?.close()
                connection = nil
            }
            if let e = error as? Failure { throw e }
            throw Failure(description: "\(purpose): \(error)")
        }
    }

    private func connected() throws(PGError) -> PGConnection {
        if let c = connection, c.isOK { return c }
        connection?.close()
        connection = nil
        if let refused, monotonicSeconds() - refused.at < 1 { throw refused.error }
        let c: PGConnection
        do {
            c = try PGConnection(
                dsn: url,
                extra: [
                    ("connect_timeout", "5"), ("application_name", "healthgate \(purpose)"),
                    ("options", "-c statement_timeout=10000")
                ])
        } catch {
            refused = (error, monotonicSeconds())
            throw error
        }
        refused = nil
        for statement in ["CREATE SCHEMA IF NOT EXISTS \(FleetDatabase.schemaName)"] + schema {
            do {
                try c.execute(statement)
            } catch {
                // Two machines creating it at once: one of them is told it exists.
                guard ["23505", "42P06", "42P07"].contains(error.sqlstate ?? "") else { throw error }
            }
        }
        connection = c
        return c
    }
}
