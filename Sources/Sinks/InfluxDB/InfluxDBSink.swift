import CZlib
import HealthgateCore
import HealthgateCrypto
import Posix
import YAMLConfig

/// Writes canonical records to InfluxDB (v1 `/write`, v2 `/api/v2/write`, v3 `/api/v3/write_lp`)
/// as line protocol in Syncky's schema (see `LineProtocolEncoder`), gzip-compressed, with the
/// Token auth the phone apps cannot send. A point is identified by measurement, tags and time,
/// so a record sent again overwrites its point instead of adding one. Outcomes as `BatchPoster`
/// says: a 400 narrows the batch down to the lines InfluxDB refuses, 413 halves, 401/403 keep.
public final class InfluxDBSink: Sink, @unchecked Sendable {
    public let name: String
    let writeURL: String
    let headers: [(String, String)]
    let encoder: LineProtocolEncoder
    let gzip: Bool
    let client: CurlClient
    let logger: Logger
    let clock: any Clock

    init(name: String, writeURL: String, headers: [(String, String)], encoder: LineProtocolEncoder, gzip: Bool,
         options: CurlClient.Options, logger: Logger, clock: any Clock = SystemClock()) {
        self.name = name
        self.writeURL = writeURL
        self.headers = headers
        self.encoder = encoder
        self.gzip = gzip
        self.client = CurlClient(options: options)
        self.logger = logger
        self.clock = clock
    }

    public static let build: SinkRegistry.Builder = { name, node, path, context throws(ConfigProblems) in
        let c = try YAMLDecoder().decode(InfluxDBSinkConfig.self, from: node, path: path)
        var problems: [ConfigProblem] = []
        func need(_ key: String, _ value: String?, _ api: InfluxDBSinkConfig.API) {
            if value?.isEmpty ?? true {
                problems.append(ConfigProblem(location: node.location, path: "\(path).\(key)",
                                              message: "api \(api.rawValue) needs \"\(key)\""))
            }
        }
        func refuse(_ key: String, _ value: String?, _ api: InfluxDBSinkConfig.API) {
            if value != nil {
                problems.append(ConfigProblem(location: node[key]?.location ?? node.location, path: "\(path).\(key)",
                                              message: "\"\(key)\" has no meaning for api \(api.rawValue)"))
            }
        }
        if !(c.url.hasPrefix("http://") || c.url.hasPrefix("https://")) {
            problems.append(ConfigProblem(location: node["url"]?.location, path: path + ".url",
                                          message: "the url must start with http:// or https:// (e.g. http://localhost:8086)"))
        }
        let api = c.api ?? .v2
        let precision = c.precision ?? .ns
        let base = c.url.hasSuffix("/") ? String(c.url.dropLast()) : c.url
        var headers: [(String, String)] = [("Content-Type", "text/plain; charset=utf-8")]
        var query: [(String, String)] = []
        switch api {
        case .v1:
            need("database", c.database, api); refuse("org", c.org, api); refuse("bucket", c.bucket, api); refuse("token", c.token, api)
            query = [("db", c.database ?? "")]
            if let rp = c.retention_policy { query.append(("rp", rp)) }
            query.append(("precision", precision == .ns ? "n" : precision == .us ? "u" : precision.rawValue))
            if let u = c.username {
                headers.append(("Authorization", "Basic " + Crypto.base64(Array("\(u):\(c.password ?? "")".utf8))))
            }
        case .v2:
            need("org", c.org, api); need("bucket", c.bucket, api); need("token", c.token, api)
            refuse("database", c.database, api); refuse("username", c.username, api)
            query = [("org", c.org ?? ""), ("bucket", c.bucket ?? ""), ("precision", precision.rawValue)]
            headers.append(("Authorization", "Token \(c.token ?? "")"))
        case .v3:
            need("database", c.database, api); need("token", c.token, api); refuse("org", c.org, api); refuse("bucket", c.bucket, api)
            query = [("db", c.database ?? ""), ("precision", ["ns": "nanosecond", "us": "microsecond", "ms": "millisecond", "s": "second"][precision.rawValue]!)]
            headers.append(("Authorization", "Bearer \(c.token ?? "")"))
        }
        let endpoint = ["v1": "/write", "v2": "/api/v2/write", "v3": "/api/v3/write_lp"][api.rawValue]!
        let url = base + endpoint + "?" + query.map { "\(PercentEncoding.encode($0.0))=\(PercentEncoding.encode($0.1))" }.joined(separator: "&")
        let gzip = c.gzip ?? true
        if gzip { headers.append(("Content-Encoding", "gzip")) }
        let common: SinkCommonConfig
        do throws(ConfigProblems) {
            common = try SinkCommonConfig.checked(batch: c.batch, retry: c.retry, queue: c.queue, node: node, path: path,
                                                  defaultMaxItems: 5000)
        } catch {
            throw ConfigProblems(problems: problems + error.problems)
        }
        if !problems.isEmpty { throw ConfigProblems(problems: problems) }
        let encoder = LineProtocolEncoder(measurement: c.measurement ?? "{type}", phoneTag: c.phone_tag ?? "phone",
                                          staticTags: (c.tags ?? [:]).sorted { $0.key < $1.key }.map { ($0.key, $0.value) },
                                          precision: precision)
        let sink = InfluxDBSink(name: name, writeURL: url, headers: headers, encoder: encoder, gzip: gzip,
                                options: CurlClient.Options(timeoutSeconds: c.timeout?.seconds ?? 30, caFile: c.ca_file),
                                logger: context.logger.child("sink \(name)"))
        return BuiltSink(sink: sink, common: common, summary: "influxdb \(api.rawValue) \(base)\(endpoint)")
    }

    public func write(_ batch: SinkBatch) -> SinkWriteResult {
        var outcomes = [DeliveryOutcome](repeating: .accepted, count: batch.count)
        var lines: [[UInt8]] = []
        var sent: [Int] = []   // batch index of each line
        lines.reserveCapacity(batch.count)
        for (i, r) in batch.records.enumerated() {
            if r.op == .delete {
                // Deleting a point needs where it was written (measurement, tags, time), which a
                // delete does not carry: kept in the dead letters, where `healthgate replay` can
                // apply it once this sink keeps that index.
                outcomes[i] = .rejected(reason: "the influxdb sink does not apply deletions yet (delete of \(r.type) \(r.uuid))")
                continue
            }
            var line: [UInt8] = []
            switch encoder.encode(r, into: &line) {
            case .line:
                lines.append(line)
                sent.append(i)
            case .cannot(let why):
                outcomes[i] = .rejected(reason: why)
            }
        }
        if sent.isEmpty { return outcomes.allSatisfy({ $0 == .accepted }) ? .accepted : .perRecord(outcomes) }
        let poster = BatchPoster(sinkName: name, url: writeURL.split(separator: "?").first.map(String.init) ?? writeURL,
                                 credentialsHint: "sinks.\(name).token (or username/password)", client: client,
                                 logger: logger, clock: clock)
        let result = poster.post(count: sent.count) { range in
            var body: [UInt8] = []
            for k in range { body += lines[k] }
            return (writeURL, headers, gzip ? InfluxDBSink.gzip(body) : body)
        }
        switch result {
        case .accepted:
            return outcomes.allSatisfy({ $0 == .accepted }) ? .accepted : .perRecord(outcomes)
        case .keep(let reason, let after):
            if sent.count == batch.count { return .keep(reason: reason, retryAfterSeconds: after) }
            for i in sent { outcomes[i] = .keep(reason: reason) }
            return .perRecord(outcomes)
        case .perRecord(let perLine):
            for (k, o) in perLine.enumerated() { outcomes[sent[k]] = o }
            return .perRecord(outcomes)
        }
    }

    /// gzip (RFC 1952) of a body.
    static func gzip(_ data: [UInt8]) -> [UInt8] {
        var stream = z_stream()
        guard deflateInit2_(&stream, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION,
                            Int32(MemoryLayout<z_stream>.size)) == Z_OK else { return data }
        defer { deflateEnd(&stream) }
        var out = [UInt8](repeating: 0, count: Int(deflateBound(&stream, UInt(data.count))) + 32)
        var input = data
        let written: Int = input.withUnsafeMutableBufferPointer { inp in
            out.withUnsafeMutableBufferPointer { o in
                stream.next_in = inp.baseAddress
                stream.avail_in = UInt32(inp.count)
                stream.next_out = o.baseAddress
                stream.avail_out = UInt32(o.count)
                guard deflate(&stream, Z_FINISH) == Z_STREAM_END else { return -1 }
                return o.count - Int(stream.avail_out)
            }
        }
        guard written >= 0 else { return data }
        return Array(out[0..<written])
    }

    public func close() {}
}
