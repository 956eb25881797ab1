import FastJSON
import HealthgateCore
import HealthgateCrypto
import SinkPostgres
import Synchronization

/// The read API (`read_api:`): JSON over what the PostgreSQL sink keeps, behind read-only
/// tokens, each optionally limited to some devices. Every query is parameterized (the SQL is
/// made of fixed text only; what a client sends goes in parameters), paged by a cursor, capped
/// by `limit`, and cancelled by the statement timeout. See docs/read-api.md.
public final class ReadAPI: Sendable {
    let settings: ReadAPISettings
    let pool: ReadPool
    let requests: RequestLog?
    let logger: Logger

    /// The bytes of answers being made or sent (`read_api.max_buffered`).
    let budget: ByteBudget
    /// Room past `maxAnswerBytes` for one row more than the bound (the first row always goes in)
    /// and the page's own members.
    static let pageSlack = 2 << 20

    public init(settings: ReadAPISettings, requests: RequestLog?, logger: Logger) {
        budget = ByteBudget(limit: settings.maxBuffered + Self.pageSlack)
        self.settings = settings
        self.requests = requests
        self.logger = logger
        pool = ReadPool(access: settings.access, limit: settings.connections, statementTimeoutMs: settings.statementTimeoutMs)
    }

    /// The endpoints, with the parameters each takes.
    enum Endpoint: String, CaseIterable {
        case samples, workouts, daily, sleep, latest, batches

        /// `from` and `to` are local days (YYYY-MM-DD), not times.
        var takesDays: Bool { self == .daily || self == .sleep }

        var parameters: [String] {
            switch self {
            case .samples: ["device", "type", "kind", "from", "to", "limit", "cursor"]
            case .workouts: ["device", "from", "to", "limit", "cursor"]
            case .daily: ["device", "type", "from", "to", "limit", "cursor"]
            case .sleep: ["device", "from", "to", "limit", "cursor"]
            case .latest: ["device", "limit", "cursor"]
            case .batches: ["device", "limit", "cursor"]
            }
        }
    }

    /// The answer for a request under the prefix; nil for any other path.
    public func handle(_ request: HTTPRequest, path: String) -> HTTPResponse? {
        guard path == settings.prefix || path.hasPrefix(settings.prefix + "/") else { return nil }
        let rest = String(path.dropFirst(settings.prefix.count))
        guard request.method == "GET" || request.method == "HEAD" else {
            return problem(405, "Method not allowed", "The read API only reads: use GET.", headers: [HTTPHeader("Allow", "GET")])
        }
        if rest == "/openapi.json" {
            return HTTPResponse(
                status: 200, headers: [HTTPHeader("Content-Type", "application/json")],
                body: ReadAPIDocument.openAPI(prefix: settings.prefix))
        }
        guard let endpoint = Endpoint(rawValue: String(rest.dropFirst())), rest.hasPrefix("/") else {
            return problem(
                404, "Not found",
                "The read API has \(Endpoint.allCases.map { settings.prefix + "/" + $0.rawValue }.joined(separator: ", ")) "
                    + "and \(settings.prefix)/openapi.json.")
        }
        guard let token = authorize(request) else {
            return problem(
                401, "Unauthorized",
                "The read API takes `Authorization: Bearer` with one of its read tokens "
                    + "(read_api.tokens); a receiver's token does not read.",
                headers: [HTTPHeader("WWW-Authenticate", "Bearer realm=\"healthgate read API\"")])
        }
        var query: ReadQuery
        switch ReadQuery.parse(request.query, endpoint: endpoint, maxLimit: settings.maxLimit) {
        case .failure(let bad): return problem(400, "Bad request", bad.detail)
        case .success(let q): query = q
        }
        // The devices this request may see: the token's, narrowed to the one asked for.
        if let d = query.device {
            if let allowed = token.devices, !allowed.contains(d) {
                return problem(403, "Forbidden", "This token does not read device \"\(String(d.prefix(64)))\".")
            }
            query.devices = [d]
        } else if let allowed = token.devices {
            query.devices = allowed.sorted()
        }
        if endpoint == .batches { return batches(query) }
        // Room for a whole answer is taken first; past the budget of answers in flight, 503.
        let answerBytes = settings.maxAnswerBytes + Self.pageSlack
        guard budget.take(answerBytes) else {
            logger.warning("answers in flight would pass read_api.max_buffered (\(settings.maxBuffered) bytes); answering 503")
            return problem(
                503, "Busy",
                "The read API holds as many answers as it may at once (read_api.max_buffered); "
                    + "try again shortly.", headers: [HTTPHeader("Retry-After", "2")])
        }
        let result: ReadResult
        do {
            result = try pool.with { lease throws(PGError) in try ReadQueries.run(query, on: lease, maxBytes: settings.maxAnswerBytes) }
        } catch {
            budget.give(answerBytes)
            return unavailable(error)
        }
        // What the answer does not use is given back now; the rest when it has been sent.
        let body = request.method == "HEAD" ? [] : result.body
        budget.give(answerBytes - body.count)
        var response = HTTPResponse(
            status: 200,
            headers: [
                HTTPHeader("Content-Type", "application/json"),
                HTTPHeader("Cache-Control", "no-store")
            ], body: body)
        let budget = self.budget, held = body.count
        response.hold = ResponseHold { budget.give(held) }
        return response
    }

    /// The gateway's own request log, newest first (not the database: requests are noted as
    /// they are answered, before any sink has the records).
    func batches(_ q: ReadQuery) -> HTTPResponse {
        let entries: [RequestLog.Entry]
        do {
            entries = try requests?.recent(devices: q.devices, before: q.after.flatMap { Int64($0[0]) }, limit: q.limit + 1) ?? []
        } catch {
            logger.error("the read API cannot read the request log: \(error)")
            return problem(
                503, "Request log unavailable", "The gateway cannot read its request log now; try again later.",
                headers: [HTTPHeader("Retry-After", "5")])
        }
        var page = Page(limit: q.limit)
        for e in entries.prefix(q.limit) {
            var w = JSONWriter(capacity: 256)
            w.beginObject()
            w.key("id"); w.int(e.id)
            w.key("time"); w.string(e.time.rfc3339())
            w.key("receiver"); w.string(e.receiver)
            if let d = e.device { w.key("device"); w.string(d) }
            if let r = e.requestID { w.key("request_id"); w.string(r) }
            w.key("status"); w.int(e.status)
            w.key("records"); w.int(e.records)
            w.key("refused"); w.int(e.refused)
            w.key("duplicates"); w.int(e.duplicates)
            if let n = e.note { w.key("note"); w.string(n) }
            w.endObject()
            page.w.raw(w.bytes)
        }
        if entries.count > q.limit, let last = entries.prefix(q.limit).last {
            page.next = ReadCursor.encode(.batches, [String(last.id)])
        }
        return HTTPResponse(
            status: 200, headers: [HTTPHeader("Content-Type", "application/json"), HTTPHeader("Cache-Control", "no-store")],
            body: page.finish())
    }

    /// The read token the request carries, compared in constant time with each.
    func authorize(_ request: HTTPRequest) -> ReadAPISettings.Token? {
        guard let given = Authenticator.bearer(request) else { return nil }
        var found: ReadAPISettings.Token?
        for t in settings.tokens where Crypto.constantTimeEqual(t.secret, given) { found = t }
        return found
    }

    func unavailable(_ failure: ReadPool.Failure) -> HTTPResponse {
        switch failure {
        case .busy:
            logger.warning("a read found all of the read API's \(settings.connections) database connection(s) busy")
            return problem(
                503, "Busy", "Every database connection of the read API is in use; try again shortly.",
                headers: [HTTPHeader("Retry-After", "2")])
        case .database(let e):
            if e.sqlstate == "57014" {
                logger.warning("a read was cancelled by read_api.statement_timeout")
                return problem(
                    503, "Query took too long",
                    "The query ran past read_api.statement_timeout; ask for a shorter "
                        + "time range or a smaller limit.", headers: [HTTPHeader("Retry-After", "5")])
            }
            if let state = e.sqlstate, state.hasPrefix("22") {
                // A value PostgreSQL cannot read as what it must be (the parameters are checked
                // first; this is the last word).
                // PostgreSQL's own words stay in the log: they are not the client's business.
                logger.warning("the read API: PostgreSQL refused a parameter: \(e)")
                return problem(400, "Bad request", "A parameter is not a value the database can read.")
            }
            if e.sqlstate == "42P01" {
                logger.warning("the read API's sink \(settings.sink) has not made its tables yet: \(e)")
                return problem(
                    503, "Not ready", "The PostgreSQL sink has not made its tables yet (it does when it first connects).",
                    headers: [HTTPHeader("Retry-After", "10")])
            }
            logger.error("the read API cannot read sink \(settings.sink)'s database: \(e)")
            return problem(
                503, "Database unavailable", "The gateway cannot read its PostgreSQL database now; try again later.",
                headers: [HTTPHeader("Retry-After", "5")])
        }
    }
}

/// What one request asks for, checked.
struct ReadQuery {
    var endpoint: ReadAPI.Endpoint
    var device: String?
    /// The devices to read (nil: every device).
    var devices: [String]?
    var type: String?
    var kind: String?
    var from: String?
    var to: String?
    var limit: Int
    var after: [String]?

    struct Bad: Error {
        var detail: String
    }

    static func parse(_ raw: String, endpoint: ReadAPI.Endpoint, maxLimit: Int) -> Result<ReadQuery, Bad> {
        var q = ReadQuery(endpoint: endpoint, limit: min(100, maxLimit))
        var seen = Set<String>()
        for pair in raw.split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = PercentEncoding.decode(String(kv[0]))
            let value = kv.count > 1 ? PercentEncoding.decode(String(kv[1])) : ""
            guard endpoint.parameters.contains(name) else {
                return .failure(
                    Bad(
                        detail: "Unknown parameter \"\(String(name.prefix(64)))\": \(endpoint.rawValue) takes "
                            + endpoint.parameters.joined(separator: ", ") + "."))
            }
            guard seen.insert(name).inserted else { return .failure(Bad(detail: "Parameter \(name) is given twice.")) }
            guard !value.isEmpty else { return .failure(Bad(detail: "Parameter \(name) is empty.")) }
            guard value.utf8.count <= 512 else { return .failure(Bad(detail: "Parameter \(name) is longer than 512 bytes.")) }
            guard !value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
                return .failure(Bad(detail: "Parameter \(name) holds a control character."))
            }
            switch name {
            case "device":
                guard value.unicodeScalars.count <= 128 else { return .failure(Bad(detail: "device is at most 128 characters.")) }
                q.device = value
            case "type", "kind":
                guard value.utf8.count <= 100,
                    value.utf8.allSatisfy({ ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5F })
                else {
                    return .failure(Bad(detail: "\(name) is a name of lower-case letters, digits and _, at most 100 (e.g. heart_rate)."))
                }
                if name == "type" { q.type = value } else { q.kind = value }
            case "from", "to":
                guard let t = time(value, dayOnly: endpoint.takesDays) else {
                    return .failure(
                        Bad(
                            detail: endpoint.takesDays
                                ? "\(name) is a local day, YYYY-MM-DD (e.g. 2026-12-01)."
                                : "\(name) is a time, RFC 3339 (e.g. 2026-12-01T08:00:00Z; write + in an offset as %2B), or a day, YYYY-MM-DD (midnight UTC), in the years 1 to 9999."
                        ))
                }
                if name == "from" { q.from = t } else { q.to = t }
            case "limit":
                guard let n = Int(value), n >= 1 else {
                    return .failure(Bad(detail: "limit is a whole number from 1 (at most \(maxLimit))."))
                }
                q.limit = min(n, maxLimit)
            case "cursor":
                guard let a = ReadCursor.decode(value, endpoint: endpoint) else {
                    return .failure(Bad(detail: "cursor is not one this endpoint gave out (pass next_cursor as it came)."))
                }
                q.after = a
            default: break
            }
        }
        if endpoint == .daily && q.type == nil { q.type = "steps" }
        if let f = q.from, let t = q.to {
            let ff = f.count == 10 ? f + "T00:00:00Z" : f, tt = t.count == 10 ? t + "T00:00:00Z" : t
            if let a = Timestamp.parseRFC3339(ff)?.0, let b = Timestamp.parseRFC3339(tt)?.0, a > b {
                return .failure(Bad(detail: "from (\(f)) is after to (\(t))."))
            }
        }
        return .success(q)
    }

    /// The time (RFC 3339, normalized to UTC) or day a parameter names, as PostgreSQL reads it.
    static func time(_ s: String, dayOnly: Bool) -> String? {
        if s.utf8.count == 10, let t = Timestamp.parseRFC3339(s + "T00:00:00Z")?.0, inRange(t) {
            let day = String(t.rfc3339().prefix(10))
            return day == s ? (dayOnly ? s : t.rfc3339()) : nil
        }
        if dayOnly { return nil }
        guard let t = Timestamp.parseRFC3339(s)?.0, inRange(t) else { return nil }
        return t.rfc3339()
    }

    /// Years 1 to 9999 in UTC, what both sides write with four digits.
    static func inRange(_ t: Timestamp) -> Bool { t.seconds >= -62_135_596_800 && t.seconds <= 253_402_300_799 }
}

/// `next_cursor`: the last row's sort key, with its endpoint, as base64url JSON. It holds
/// nothing secret (the keys of rows the client already has) and is checked when it comes back.
enum ReadCursor {
    static func encode(_ endpoint: ReadAPI.Endpoint, _ key: [String]) -> String {
        var w = JSONWriter(capacity: 128)
        w.beginArray()
        w.string(endpoint.rawValue)
        for k in key { w.string(k) }
        w.endArray()
        return Crypto.base64url(w.bytes)
    }

    static func decode(_ s: String, endpoint: ReadAPI.Endpoint) -> [String]? {
        guard let bytes = Crypto.base64urlDecode(s), let doc = try? JSONParser().parse(bytes), doc.root.kind == .array else { return nil }
        var parts: [String] = []
        for e in doc.root.elements {
            guard let s = e.string else { return nil }
            parts.append(s)
        }
        let arity = endpoint == .batches ? 1 : endpoint.takesDays || endpoint == .latest ? 2 : endpoint == .workouts ? 3 : 4
        guard parts.count == arity + 1, parts[0] == endpoint.rawValue else { return nil }
        let key = Array(parts.dropFirst())
        // Text parts go to the database as they are: no control character (a NUL cuts a C string).
        guard key.allSatisfy({ $0.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value != 0x7F } }) else { return nil }
        // Each part as what the query reads it as, so that a damaged cursor is a 400, not a
        // database error.
        switch endpoint {
        case .batches: guard Int64(key[0]) != nil else { return nil }
        case .daily, .sleep: guard ReadQuery.time(key[0], dayOnly: true) != nil else { return nil }
        case .samples, .workouts:
            guard isDatabaseTime(key[0]) else { return nil }
            if endpoint == .samples && Int32(key[3]) == nil { return nil }
        case .latest: break
        }
        return key
    }

    /// PostgreSQL's text of a timestamptz in UTC, as the pages give it out:
    /// `2026-12-01 08:00:00+00` or `2026-12-01 08:00:00.123456+00`.
    static func isDatabaseTime(_ s: String) -> Bool {
        let b = Array(s.utf8)
        guard b.count == 22 || (b.count > 23 && b.count <= 29 && b[19] == 0x2E), b[4] == 0x2D, b[7] == 0x2D, b[10] == 0x20,
            b[13] == 0x3A, b[16] == 0x3A, b[b.count - 3] == 0x2B, b[b.count - 2] == 0x30, b[b.count - 1] == 0x30
        else { return false }
        let digits = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18] + (b.count > 22 ? Array(20..<(b.count - 3)) : [])
        guard digits.allSatisfy({ b[$0] >= 0x30 && b[$0] <= 0x39 }) else { return false }
        // A real instant in years 1 to 9999 (month 13 or hour 25 would be PostgreSQL's error).
        let rfc = String(s.prefix(10)) + "T" + String(s.dropFirst(11).dropLast(3)) + "Z"
        guard let t = Timestamp.parseRFC3339(rfc)?.0, ReadQuery.inRange(t), b[17] <= 0x35 else { return false }
        return true
    }
}

/// Bytes taken from a limit and given back, by any thread.
final class ByteBudget: Sendable {
    let limit: Int
    private let used = Atomic<Int>(0)

    init(limit: Int) { self.limit = limit }

    /// Takes `n` bytes; false (and nothing taken) when they would pass the limit.
    func take(_ n: Int) -> Bool {
        if used.add(n, ordering: .relaxed).newValue > limit {
            used.subtract(n, ordering: .relaxed)
            return false
        }
        return true
    }

    func give(_ n: Int) { used.subtract(n, ordering: .relaxed) }
}
