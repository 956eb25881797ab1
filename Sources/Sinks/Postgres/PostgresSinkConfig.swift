import SinkKit
import YAMLConfig

/// `kind: postgres` — every record in PostgreSQL, stored by its key, for SQL and Grafana.
///
/// ```yaml
/// db:
///   kind: postgres
///   dsn: "postgres://healthgate@localhost:5432/health?sslmode=verify-full&sslrootcert=/etc/ssl/pg-ca.pem"
///                                   # or key=value: "host=localhost dbname=health user=healthgate"
///   password: ${PG_PASSWORD}        # kept out of the dsn (and so out of every message)
///   schema: healthgate              # made when missing; its tables and views are the sink's own
///   time_zone: Europe/Budapest      # the phone's local day when a record has no UTC offset
///   connect_timeout: 10s
///   statement_timeout: 60s
///   connections: 2                  # a big batch is written as two transactions at once (1: one at a time)
/// ```
public struct PostgresSinkConfig: Decodable, Sendable {
    public var kind: String
    public var dsn: String
    public var password: String?
    public var schema: String?
    public var time_zone: String?
    public var connect_timeout: ConfigDuration?
    public var statement_timeout: ConfigDuration?
    public var connections: Int?
    public var batch: BatchConfig?
    public var retry: RetryConfig?
    public var queue: QueueConfig?
}
