import CPQ
import Glibc
import HealthgateCore
import Posix
import SinkKit
import YAMLConfig

extension PostgresSink {
    /// Checks the config — the dsn through libpq's own parser, without connecting; the connection
    /// and the migrations happen when `serve` opens the sink.
    public static func build(name: String, node: YAMLNode, path: String, context: SinkBuildContext) throws(ConfigProblems) -> BuiltSink {
        let c = try YAMLDecoder().decode(PostgresSinkConfig.self, from: node, path: path)
        var problems = ConfigProblemList(node, path: path)
        var summary = "postgres"
        switch PostgresSink.parse(dsn: c.dsn) {
        case .failure(let why):
            problems.add(
                "dsn",
                "not a PostgreSQL connection string: \(why) (e.g. postgres://healthgate@localhost/health "
                    + "or host=localhost dbname=health user=healthgate)")
        case .success(let options):
            let user = options["user"].map { $0 + "@" } ?? ""
            let host = options["host"] ?? options["hostaddr"] ?? "localhost"
            summary += " \(user)\(host)\(options["port"].map { ":" + $0 } ?? "")/\(options["dbname"] ?? options["user"] ?? "")"
            if let mode = options["sslmode"] { summary += " sslmode=\(mode)" }
            if let cert = options["sslrootcert"], !cert.isEmpty, access(cert, R_OK) != 0 {
                problems.add("dsn", "sslrootcert \(cert) cannot be read")
            }
        }
        let schema = c.schema ?? "healthgate"
        let valid =
            schema.utf8.count <= 63 && schema.utf8.first.map { $0 == 0x5F || ($0 >= 0x61 && $0 <= 0x7A) } == true
            && schema.utf8.allSatisfy { $0 == 0x5F || ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) }
        if !valid {
            problems.add("schema", "\"\(schema)\" is not a schema name healthgate makes: lower-case letters, digits and _, at most 63")
        }
        if let tz = c.time_zone, let why = TimeZones.problem(tz) { problems.add("time_zone", why) }
        let connectTimeout = c.connect_timeout?.seconds ?? 10
        if connectTimeout < 2 { problems.add("connect_timeout", "connect_timeout is at least 2s (libpq's own minimum)") }
        let statementTimeout = c.statement_timeout?.seconds ?? 60
        if statementTimeout < 0.001 { problems.add("statement_timeout", "statement_timeout must be more than 0") }
        let connections = c.connections ?? 2
        if !(1...2).contains(connections) { problems.add("connections", "connections is 1 or 2") }
        let common = try SinkCommonConfig.checked(
            batch: c.batch, retry: c.retry, queue: c.queue, node: node, path: path,
            defaultMaxItems: 20_000, adding: problems.problems)
        let settings = Settings(
            name: name, dsn: c.dsn, password: c.password, schema: schema, timeZone: c.time_zone,
            connectTimeout: max(2, Int(connectTimeout.rounded(.up))),
            statementTimeoutMs: max(1, Int(statementTimeout * 1000)), connections: connections)
        return BuiltSink(
            kind: "postgres", common: common, summary: summary + ", schema \(schema)",
            readable: ReadAccess(
                dsn: c.dsn, password: c.password, schema: schema,
                connectTimeout: settings.connectTimeout)
        ) { ctx throws(SinkOpenError) in
            try PostgresSink(settings: settings, logger: ctx.logger, timeZones: SystemTimeZones())
        }
    }

    /// How the read API reaches what this sink keeps: the same database and schema.
    package struct ReadAccess: Sendable {
        package var dsn: String
        package var password: String?
        package var schema: String
        package var connectTimeout: Int
    }

    /// libpq's reading of a dsn (URL or key=value), without connecting: the options it sets.
    static func parse(dsn: String) -> Result<[String: String], ParseError> {
        var error: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(dsn, &error) else {
            defer { if let error { PQfreemem(error) } }
            return .failure(ParseError(error.map { PGConnection.text($0) } ?? "out of memory"))
        }
        defer { PQconninfoFree(options) }
        var out: [String: String] = [:]
        var p = options
        while let k = p.pointee.keyword {
            if let v = p.pointee.val { out[String(cString: k)] = String(cString: v) }
            p += 1
        }
        return .success(out)
    }

    struct ParseError: Error, CustomStringConvertible {
        var description: String
        init(_ d: String) { description = d }
    }
}
