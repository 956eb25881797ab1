import HealthgateCore

/// One try of a part of a batch, as the destination answered it.
public enum Attempt: Sendable, Equatable {
    case accepted
    /// Try the part again later (network error, 5xx, 429, credentials); nothing of it is stored.
    case keep(reason: String, retryAfterSeconds: Double?)
    /// The destination refuses something in this part (a 4xx, a failed COPY): halve to find it.
    case refused(reason: String)
}

/// The halving that finds the records a destination refuses: a refused part is split in two
/// and each half tried on its own, down to single records, which are then rejected (to the
/// dead letters) while the rest is accepted. A part that must be kept stays kept. Shared by
/// every sink that writes batches in one request (http, influxdb, and the ones to come).
/// Destinations that store by key take the repeats this causes without harm.
public enum Bisection {
    public static func run(count: Int, _ attempt: (Range<Int>) -> Attempt) -> SinkWriteResult {
        guard count > 0 else { return .accepted }
        var outcomes = [DeliveryOutcome](repeating: .accepted, count: count)
        var retryAfter: Double?
        switch send(0..<count, attempt, &outcomes, &retryAfter) {
        case .allAccepted: return .accepted
        case .allKept(let reason): return .keep(reason: reason, retryAfterSeconds: retryAfter)
        case .mixed: return .perRecord(outcomes)
        }
    }

    enum Sent {
        case allAccepted
        case allKept(String)
        case mixed
    }

    private static func send(
        _ range: Range<Int>, _ attempt: (Range<Int>) -> Attempt, _ outcomes: inout [DeliveryOutcome],
        _ retryAfter: inout Double?
    ) -> Sent {
        switch attempt(range) {
        case .accepted:
            return .allAccepted
        case .keep(let reason, let after):
            if let after { retryAfter = max(retryAfter ?? 0, after) }
            for i in range { outcomes[i] = .keep(reason: reason) }
            return .allKept(reason)
        case .refused(let reason):
            if range.count == 1 {
                outcomes[range.lowerBound] = .rejected(reason: reason)
                return .mixed
            }
            let mid = range.lowerBound + range.count / 2
            let a = send(range.lowerBound..<mid, attempt, &outcomes, &retryAfter)
            let b = send(mid..<range.upperBound, attempt, &outcomes, &retryAfter)
            if case .allAccepted = a, case .allAccepted = b { return .allAccepted }
            if case .allKept(let r) = a, case .allKept = b { return .allKept(r) }
            return .mixed
        }
    }
}

/// What an HTTP status means for the records sent (QUEUES.md, "outcomes"):
/// - 2xx: accepted.
/// - 401/403: keep — a config problem, not bad data — said loudly with what to fix.
/// - 3xx: keep, said loudly: data is never sent where nobody configured.
/// - 408, 429, 5xx: keep, `Retry-After` honoured.
/// - 413 and other 4xx: refused — halve to find the records the destination will not take.
public enum HTTPOutcome: Sendable, Equatable {
    case accepted
    case credentials
    /// No such endpoint, database or bucket (404, 405, 410): the sink's config, not the records.
    case endpoint
    case redirect
    case later
    case refused

    public static func classify(_ status: Int) -> HTTPOutcome {
        switch status {
        case 200..<300: .accepted
        case 401, 403: .credentials
        case 404, 405, 410: .endpoint
        case 300..<400: .redirect
        case 408, 429, 500..<600: .later
        default: .refused
        }
    }

    /// `Retry-After` as seconds (at most a day): a number, or an HTTP date
    /// (`Wed, 21 Oct 2015 07:28:00 GMT`).
    public static func parseRetryAfter(_ value: String, now: Timestamp) -> Double? {
        var v = Substring(value)
        while v.first == " " { v.removeFirst() }
        while v.last == " " { v.removeLast() }
        if let s = Double(v), s >= 0 { return min(s, 86_400) }
        let parts = v.split(separator: " ")
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        guard parts.count == 6, parts[5] == "GMT", let day = Int(parts[1]),
            let month = months.firstIndex(of: String(parts[2])), let year = Int(parts[3])
        else { return nil }
        let hms = parts[4].split(separator: ":").compactMap { Int($0) }
        guard hms.count == 3 else { return nil }
        let days = Timestamp.daysFromCivil(year: year, month: month + 1, day: day)
        let at = Int64(days) * 86_400 + Int64(hms[0] * 3600 + hms[1] * 60 + hms[2])
        return Double(max(0, min(at - now.seconds, 86_400)))
    }
}
