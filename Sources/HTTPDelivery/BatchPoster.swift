import HealthgateCore
import SinkKit

/// Posts a batch of records over HTTP and says per record what happened, for sinks that talk
/// to an HTTP API (webhooks, InfluxDB): the status is classified by `HTTPOutcome` and a refused
/// part is narrowed down by `Bisection` (both in SinkKit, shared by every sink).
public struct BatchPoster {
    let sinkName: String
    /// The URL as shown in reasons and the log: `SafeText.url` of the real one.
    let url: String
    /// What to fix when credentials are refused, e.g. "sinks.influx.token".
    let credentialsHint: String
    /// What to fix when the endpoint is not one that takes writes, e.g. "sinks.influx.url and api".
    let endpointHint: String
    let client: CurlClient
    let logger: Logger
    let clock: any Clock

    public init(
        sinkName: String, url: String, credentialsHint: String, endpointHint: String? = nil, client: CurlClient,
        logger: Logger, clock: any Clock
    ) {
        self.endpointHint = endpointHint ?? "sinks.\(sinkName).url"
        self.sinkName = sinkName
        self.url = url
        self.credentialsHint = credentialsHint
        self.client = client
        self.logger = logger
        self.clock = clock
    }

    /// `request(range)` gives the URL, headers and body for those records.
    public func post(count: Int, request: (Range<Int>) -> (url: String, headers: [(String, String)], body: [UInt8])) -> SinkWriteResult {
        Bisection.run(count: count) { range in
            let (target, headers, body) = request(range)
            let response: CurlClient.Response
            do {
                response = try client.send("POST", url: target, headers: headers, body: body)
            } catch {
                return .keep(reason: "\(url): \(error)", retryAfterSeconds: nil)
            }
            return attempt(response)
        }
    }

    /// The outcome of one response.
    public func attempt(_ response: CurlClient.Response) -> Attempt {
        let status = response.status
        switch HTTPOutcome.classify(status) {
        case .accepted:
            return .accepted
        case .credentials:
            // Said by the delivery once a minute while it lasts, not at every try.
            let why =
                "\(status) from \(url): it refused healthgate's credentials; check \(credentialsHint). "
                + "The records wait in the queue and go out once it is fixed"
            return .keep(reason: why, retryAfterSeconds: nil)
        case .endpoint:
            let why =
                "\(status) from \(url)\(BatchPoster.snippet(response)): this is not an endpoint that takes these writes; "
                + "check \(endpointHint). The records wait in the queue and go out once it is fixed (healthgate reload)"
            return .keep(reason: why, retryAfterSeconds: nil)
        case .redirect:
            let why =
                "\(status) from \(url): it redirects to \(response.header("location") ?? "elsewhere"); "
                + "set sinks.\(sinkName).url to the final URL (healthgate does not follow redirects)"
            logger.error(why)
            return .keep(reason: why, retryAfterSeconds: nil)
        case .later:
            let after = response.header("retry-after").flatMap { HTTPOutcome.parseRetryAfter($0, now: clock.now()) }
            return .keep(reason: "\(status) from \(url)\(BatchPoster.snippet(response))", retryAfterSeconds: after)
        case .refused:
            return .refused(reason: "\(status) from \(url)\(BatchPoster.snippet(response))")
        }
    }

    /// The endpoint's answer, capped and scrubbed (`SafeText.answer`).
    public static func snippet(_ r: CurlClient.Response) -> String {
        let text = SafeText.answer(r.bodyText)
        return text.isEmpty ? "" : ": " + text
    }
}
