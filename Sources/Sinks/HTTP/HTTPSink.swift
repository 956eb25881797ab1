import CanonicalJSON
import HTTPDelivery
import Posix
import HealthgateCore
import HealthgateCrypto
import SinkKit
import YAMLConfig

/// POSTs batches of canonical records to a URL and says per record what happened:
/// - 2xx: accepted.
/// - no connection, timeout, 5xx, 408, 429: kept (tried again later; `Retry-After` honoured).
/// - 401/403, 404/405/410: kept — a config problem (credentials, the URL), not bad data — with
///   what to fix; the sink shows as failing until a write goes through.
/// - 3xx: kept and said loudly: the URL moved, and data is never sent where nobody configured.
/// - 413: the batch is halved until it fits; a single record that does not fit is rejected.
/// - other 4xx: the batch is halved to find the records the endpoint refuses; those are
///   rejected (to the dead letters, with the endpoint's answer), the rest accepted.
/// With `hmac`, each request carries `X-Healthgate-Timestamp` and `X-Healthgate-Signature:
/// v1=<hex HMAC-SHA256(secret, timestamp + "." + body)>`, the scheme of Syncky's requests.
/// The body is the records' canonical lines (a JSON array of them, or NDJSON): each record's
/// journal line as it is, with what a route changed written anew.
public final class HTTPSink: Sink {
    public let name: String
    let url: String
    /// The URL as shown in reasons and the log (made once).
    let shownURL: String
    let format: HTTPSinkConfig.Format
    let headers: [(String, String)]
    let hmacSecret: [UInt8]?
    let client: CurlClient
    let logger: Logger
    let clock: any Clock

    public init(
        name: String, url: String, format: HTTPSinkConfig.Format, headers: [(String, String)],
        hmacSecret: String?, options: CurlClient.Options, logger: Logger, clock: any Clock
    ) {
        self.name = name
        self.url = url
        self.shownURL = SafeText.url(url)
        self.format = format
        self.headers = headers
        self.hmacSecret = hmacSecret.map { Array($0.utf8) }
        self.client = CurlClient(options: options)
        self.logger = logger
        self.clock = clock
    }

    public static func build(name: String, node: YAMLNode, path: String, context: SinkBuildContext) throws(ConfigProblems) -> BuiltSink {
        let c = try YAMLDecoder().decode(HTTPSinkConfig.self, from: node, path: path)
        var problems = ConfigProblemList(node, path: path)
        if !(c.url.hasPrefix("http://") || c.url.hasPrefix("https://")) {
            problems.add("url", "the url must start with http:// or https://")
        }
        var headers: [(String, String)] = []
        for (k, v) in (c.headers ?? [:]).sorted(by: { $0.key < $1.key }) {
            if ["content-type", "content-length", "authorization", "host"].contains(k.lowercased())
                || k.lowercased().hasPrefix("x-healthgate-")
            {
                problems.add("headers", "\"\(k)\" is set by healthgate itself; use `auth` for credentials")
            }
            headers.append((k, v))
        }
        switch c.auth {
        case nil:
            break
        case let a? where a.type == .bearer:
            if a.token?.isEmpty ?? true { problems.add("auth", "auth type bearer needs \"token\"") }
            if a.user != nil || a.password != nil { problems.add("auth", "bearer auth takes only \"token\"") }
            headers.append(("Authorization", "Bearer \(a.token ?? "")"))
        case let a?:
            if a.user?.isEmpty ?? true || a.password == nil { problems.add("auth", "auth type basic needs \"user\" and \"password\"") }
            if a.token != nil { problems.add("auth", "basic auth takes \"user\" and \"password\", not \"token\"") }
            let pair = Array("\(a.user ?? ""):\(a.password ?? "")".utf8)
            headers.append(("Authorization", "Basic \(Crypto.base64(pair))"))
        }
        let format = c.format ?? .json
        headers.append(("Content-Type", format == .json ? "application/json" : "application/x-ndjson"))
        let common = try SinkCommonConfig.checked(
            batch: c.batch, retry: c.retry, queue: c.queue, node: node, path: path,
            defaultMaxItems: 1000, adding: problems.problems)
        let url = c.url
        let finalHeaders = headers
        let secret = c.hmac?.secret
        let options = CurlClient.Options(timeoutSeconds: c.timeout?.seconds ?? 30, caFile: c.ca_file)
        // Its bodies are the records' lines: it reads no field of a record.
        return BuiltSink(kind: "http", common: common, summary: "http POST \(SafeText.url(c.url)) (\(format.rawValue))") { ctx in
            HTTPSink(
                name: ctx.name, url: url, format: format, headers: finalHeaders, hmacSecret: secret, options: options,
                logger: ctx.logger, clock: ctx.clock)
        }
    }

    public func write(_ batch: SinkBatch) -> SinkWriteResult {
        BatchPoster(
            sinkName: name, url: shownURL, credentialsHint: "sinks.\(name).auth (and headers)", client: client,
            logger: logger, clock: clock
        ).post(count: batch.count) { range in
            let body = encode(batch, range)
            var requestHeaders = headers
            if let secret = hmacSecret {
                let t = clock.now().seconds
                let mac = Crypto.hmacSHA256(key: secret, Array("\(t).".utf8), body)
                requestHeaders.append(("X-Healthgate-Timestamp", "\(t)"))
                requestHeaders.append(("X-Healthgate-Signature", "v1=" + Crypto.lowercaseHex(mac)))
            }
            requestHeaders.append(("X-Healthgate-Records", "\(range.count)"))
            return (url, requestHeaders, body)
        }
    }

    private func encode(_ batch: SinkBatch, _ range: Range<Int>) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(range.count * 320)
        if format == .json { out.append(0x5B) }
        for i in range {
            if format == .json && i > range.lowerBound { out.append(0x2C) }
            batch.appendLine(i, to: &out)
            if format == .json { out.removeLast() } // the line feed
        }
        if format == .json { out.append(0x5D) }
        return out
    }

    public func probe() -> Reachability { client.probe(url: url) }

    public func close() {
        client.close()
    }
}
