import HealthgateCore

/// Posts a batch of records over HTTP and says per record what happened, for sinks that talk
/// to an HTTP API (webhooks, InfluxDB):
/// - 2xx: accepted.
/// - no connection, timeout, 5xx, 408, 429: kept (tried again later; `Retry-After` honoured).
/// - 401/403: kept — a config problem, not bad data — and said loudly with what to fix.
/// - 3xx: kept and said loudly: data is never sent where nobody configured.
/// - 413: the batch is halved until it fits; a single record that does not fit is rejected.
/// - other 4xx: the batch is halved to find the records the destination refuses; those are
///   rejected (with its answer), the rest accepted. Destinations that store by key take the
///   repeats this causes without harm.
struct BatchPoster {
    let sinkName: String
    /// The URL as shown in reasons and the log: `SafeText.url` of the real one.
    let url: String
    /// What to fix when credentials are refused, e.g. "sinks.influx.token".
    let credentialsHint: String
    let client: CurlClient
    let logger: Logger
    let clock: any Clock

    enum Sent {
        case allAccepted
        case allKept(String)
        case mixed
    }

    /// `request(range)` gives the URL, headers and body for those records; `indices` maps a
    /// position in the sent range back to the batch (records the encoder skipped are absent).
    func post(count: Int, request: (Range<Int>) -> (url: String, headers: [(String, String)], body: [UInt8])) -> SinkWriteResult {
        var outcomes = [DeliveryOutcome](repeating: .accepted, count: count)
        var retryAfter: Double?
        switch send(0..<count, request, &outcomes, &retryAfter) {
        case .allAccepted: return .accepted
        case .allKept(let reason): return .keep(reason: reason, retryAfterSeconds: retryAfter)
        case .mixed: return .perRecord(outcomes)
        }
    }

    private func send(_ range: Range<Int>, _ request: (Range<Int>) -> (url: String, headers: [(String, String)], body: [UInt8]),
                      _ outcomes: inout [DeliveryOutcome], _ retryAfter: inout Double?) -> Sent {
        let (target, headers, body) = request(range)
        let response: CurlClient.Response
        do {
            response = try client.send("POST", url: target, headers: headers, body: body)
        } catch {
            return keep(range, "\(url): \(error)", &outcomes)
        }
        let status = response.status
        switch status {
        case 200..<300:
            return .allAccepted
        case 401, 403:
            let why = "\(status) from \(url): it refused healthgate's credentials; check \(credentialsHint). "
                + "The records wait in the queue and go out once it is fixed"
            logger.error(why)
            return keep(range, why, &outcomes)
        case 300..<400:
            let why = "\(status) from \(url): it redirects to \(response.header("location") ?? "elsewhere"); "
                + "set sinks.\(sinkName).url to the final URL (healthgate does not follow redirects)"
            logger.error(why)
            return keep(range, why, &outcomes)
        case 408, 429, 500..<600:
            if let after = response.header("retry-after").flatMap(BatchPoster.parseRetryAfter(now: clock.now())) {
                retryAfter = max(retryAfter ?? 0, after)
            }
            return keep(range, "\(status) from \(url)\(BatchPoster.snippet(response))", &outcomes)
        default:
            // 413 or another 4xx: find the part the destination will not take.
            if range.count == 1 {
                outcomes[range.lowerBound] = .rejected(reason: "\(status) from \(url)\(BatchPoster.snippet(response))")
                return .mixed
            }
            let mid = range.lowerBound + range.count / 2
            let a = send(range.lowerBound..<mid, request, &outcomes, &retryAfter)
            let b = send(mid..<range.upperBound, request, &outcomes, &retryAfter)
            if case .allAccepted = a, case .allAccepted = b { return .allAccepted }
            if case .allKept(let r) = a, case .allKept = b { return .allKept(r) }
            return .mixed
        }
    }

    private func keep(_ range: Range<Int>, _ reason: String, _ outcomes: inout [DeliveryOutcome]) -> Sent {
        for i in range { outcomes[i] = .keep(reason: reason) }
        return .allKept(reason)
    }

    /// The endpoint's answer, capped and scrubbed (`SafeText.answer`).
    static func snippet(_ r: CurlClient.Response) -> String {
        let text = SafeText.answer(r.bodyText)
        return text.isEmpty ? "" : ": " + text
    }

    /// `Retry-After` as seconds (at most a day): a number, or an HTTP date
    /// (`Wed, 21 Oct 2015 07:28:00 GMT`).
    static func parseRetryAfter(now: Timestamp) -> (String) -> Double? {
        { value in
            var v = Substring(value)
            while v.first == " " { v.removeFirst() }
            while v.last == " " { v.removeLast() }
            if let s = Double(v), s >= 0 { return min(s, 86_400) }
            let parts = v.split(separator: " ")
            let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
            guard parts.count == 6, parts[5] == "GMT", let day = Int(parts[1]),
                  let month = months.firstIndex(of: String(parts[2])), let year = Int(parts[3]) else { return nil }
            let hms = parts[4].split(separator: ":").compactMap { Int($0) }
            guard hms.count == 3 else { return nil }
            let days = Timestamp.daysFromCivil(year: year, month: month + 1, day: day)
            let at = Int64(days) * 86_400 + Int64(hms[0] * 3600 + hms[1] * 60 + hms[2])
            return Double(max(0, min(at - now.seconds, 86_400)))
        }
    }
}
