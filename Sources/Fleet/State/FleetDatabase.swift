import Glibc
import SinkPostgres

/// The fleet's shared PostgreSQL (`fleet.state`) for one part of it: one connection, made at
/// the first use (its tables created) and again after it broke. Threads take turns on it; the
/// lock is recursive, so that a transaction's statements run inside its `with`.
public final class FleetDatabase: @unchecked Sendable {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    let url: String
    /// Its `application_name`, and the start of its errors.
    let purpose: String
    /// `CREATE … IF NOT EXISTS` statements run on each new connection.
    let schema: [String]
    private var connection: PGConnection?
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
        let c = try PGConnection(
            dsn: url,
            extra: [
                ("connect_timeout", "5"), ("application_name", "healthgate \(purpose)"),
                ("options", "-c statement_timeout=10000")
            ])
        for statement in schema {
            do {
                try c.execute(statement)
            } catch {
                // Two machines creating it at once: one of them is told it exists.
                guard error.sqlstate == "23505" || error.sqlstate == "42P07" else { throw error }
            }
        }
        connection = c
        return c
    }
}
