import HealthgateCore
import SinkKit
import SinkPostgres
import YAMLConfig

/// `read_api:` — what the PostgreSQL sink keeps, read back over HTTP with read-only tokens.
///
/// ```yaml
/// read_api:
///   sink: db                  # a postgres sink of this config
///   path: /api/v1             # the prefix of every endpoint (default /api/v1)
///   tokens:
///     - {token: "${AGENT_TOKEN}"}                          # every device
///     - {token: "${ALICE_TOKEN}", devices: [alice-iphone]} # only these devices
///   max_limit: 1000           # the most rows one page holds (default 1000; `limit` defaults to 100)
///   connections: 4            # database connections for reading, at most (default 4; at most half of http.threads)
///   statement_timeout: 10s    # a query that runs longer is cancelled: 503 (default 10s, at most 60s)
///   max_answer_bytes: 4MiB    # a page ends early past this (its cursor goes on); default 4 MiB
///   max_buffered: 64MiB       # answers being made or sent, all together; past it 503 (default 64 MiB)
/// ```
/// Read tokens never ingest and ingest tokens never read: a read token equal to a receiver's
/// token is refused. Without a `read_api` block nothing is served under the prefix.
struct ReadAPIConfig: Decodable {
    var sink: String
    var path: String?
    var tokens: [ReadTokenConfig]
    var max_limit: Int?
    var connections: Int?
    var statement_timeout: ConfigDuration?
    var max_answer_bytes: ByteSize?
    var max_buffered: ByteSize?
}

struct ReadTokenConfig: Decodable {
    var token: String
    var devices: [String]?
}

/// A checked `read_api`: what `serve` answers with.
public struct ReadAPISettings: Sendable {
    public struct Token: Sendable {
        public var secret: [UInt8]
        /// nil: every device.
        public var devices: Set<String>?
    }

    public var sink: String
    public var prefix: String
    public var tokens: [Token]
    public var maxLimit: Int
    public var connections: Int
    public var statementTimeoutMs: Int
    /// The most bytes of rows one answer holds (its first row always goes in).
    public var maxAnswerBytes: Int
    /// The bytes all answers being made or sent may hold together.
    public var maxBuffered: Int
    package var access: PostgresSink.ReadAccess

    static let defaultPath = "/api/v1"

    /// Checks `node` against the sinks and receivers of the config; adds what is wrong to `problems`.
    static func check(
        _ node: YAMLNode, sinks: [(name: String, built: BuiltSink)],
        receivers: [(name: String, config: ReceiverConfig, receiver: any Receiver)], httpThreads: Int,
        problems: inout [ConfigProblem]
    ) -> ReadAPISettings? {
        let c: ReadAPIConfig
        do {
            c = try YAMLDecoder().decode(ReadAPIConfig.self, from: node, path: "read_api")
        } catch {
            problems += error.problems
            return nil
        }
        var list = ConfigProblemList(node, path: "read_api")
        let sinkNames = sinks.map(\.name)
        var access: PostgresSink.ReadAccess?
        if let s = sinks.first(where: { $0.name == c.sink }) {
            access = s.built.readable as? PostgresSink.ReadAccess
            if access == nil { list.add("sink", "sink \"\(c.sink)\" is kind \(s.built.kind); the read API reads a postgres sink") }
        } else {
            list.add("sink", "no sink is named \"\(c.sink)\"\(suggestion(c.sink, sinkNames))")
        }
        var prefix = c.path ?? defaultPath
        while prefix.count > 1 && prefix.hasSuffix("/") { prefix.removeLast() }
        if !prefix.hasPrefix("/") || prefix == "/" {
            list.add("path", "a path starts with / and is not / alone, e.g. /api/v1")
        } else if !prefix.utf8.allSatisfy({ ConfigLoader.isAlnum($0) || "/-_.".utf8.contains($0) }) {
            list.add("path", "a path is letters, digits, /, -, _ and .")
        }
        for own in ["/healthz", "/metrics", "/status"] where own == prefix || own.hasPrefix(prefix + "/") {
            list.add("path", "\(prefix) would hide the gateway's own \(own); choose another prefix, e.g. /api/v1")
        }
        for r in receivers {
            if let p = r.config.path, p == prefix || p.hasPrefix(prefix + "/") {
                list.add("path", "receiver \"\(r.name)\" listens on \(p), under the read API's \(prefix); give them apart paths")
            }
        }
        if c.tokens.isEmpty { list.add("tokens", "the read API needs at least one token") }
        let ingestTokens = receivers.compactMap { $0.config.auth?.token }
        var tokens: [Token] = []
        for (i, t) in c.tokens.enumerated() {
            if t.token.utf8.count < 16 {
                list.add("tokens", "token \(i + 1) is shorter than 16 characters: use a long random one (`openssl rand -hex 24`)")
            }
            if ingestTokens.contains(t.token) {
                list.add(
                    "tokens",
                    "token \(i + 1) is also a receiver's token: read tokens never ingest and ingest tokens never read, give it its own")
            }
            if tokens.contains(where: { $0.secret == Array(t.token.utf8) }) { list.add("tokens", "token \(i + 1) is given twice") }
            if let d = t.devices, d.isEmpty {
                list.add("tokens", "token \(i + 1) has an empty devices list (leave it out for every device)")
            }
            tokens.append(Token(secret: Array(t.token.utf8), devices: t.devices.map(Set.init)))
        }
        let maxLimit = c.max_limit ?? 1000
        if !(1...10_000).contains(maxLimit) { list.add("max_limit", "max_limit is 1 to 10000") }
        // Reads run on the HTTP threads the phones' uploads need: at most half of them read.
        let most = max(1, httpThreads / 2)
        let connections = c.connections ?? min(4, most)
        if !(1...most).contains(connections) {
            list.add(
                "connections",
                "connections is 1 to \(most) (half of http.threads, \(httpThreads), so that reads never hold every thread uploads need)")
        }
        let timeout = c.statement_timeout?.seconds ?? 10
        if timeout < 0.001 || timeout > 60 { list.add("statement_timeout", "statement_timeout is more than 0 and at most 60s") }
        let answer = Int(c.max_answer_bytes?.bytes ?? 4 << 20)
        if !((64 << 10)...(256 << 20)).contains(answer) { list.add("max_answer_bytes", "max_answer_bytes is 64KiB to 256MiB") }
        let buffered = Int(c.max_buffered?.bytes ?? Int64(max(64 << 20, answer * connections)))
        if buffered < answer { list.add("max_buffered", "max_buffered is at least max_answer_bytes (\(answer) bytes)") }
        problems += list.problems
        guard list.problems.isEmpty, let access else { return nil }
        return ReadAPISettings(
            sink: c.sink, prefix: prefix, tokens: tokens, maxLimit: maxLimit, connections: connections,
            statementTimeoutMs: max(1, Int(timeout * 1000)), maxAnswerBytes: answer, maxBuffered: buffered,
            access: access)
    }
}
