import CanonicalJSON
import CDeflate
import Glibc
import FastJSON
import HTTPDelivery
import HealthgateCore
import HealthgateCrypto
import Posix
import SinkKit
import Storage
import YAMLConfig

/// Writes canonical records to InfluxDB (v1 `/write`, v2 `/api/v2/write`, v3 `/api/v3/write_lp`)
/// as line protocol in Syncky's schema (see `LineProtocolEncoder`), gzip-compressed, with the
/// Token auth the phone apps cannot send. A point is identified by measurement, tags and time,
/// so a record sent again overwrites its point instead of adding one. Outcomes as `BatchPoster`
/// says: a 400 narrows the batch down to the lines InfluxDB refuses, 413 halves, 401/403 and 404 (no such
/// endpoint, database or bucket) keep.
public final class InfluxDBSink: Sink {
    public let name: String
    let writeURL: String
    /// The write URL as shown in reasons and the log (made once).
    let shownURL: String
    let headers: [(String, String)]
    let encoder: LineProtocolEncoder
    /// The zlib level bodies are gzip'd at; nil: sent plain.
    let gzip: Int32?
    /// One connection per request in flight; deletes use the first.
    let clients: [CurlClient]
    var client: CurlClient { clients[0] }
    let logger: Logger
    let clock: any Clock
    /// How deletes reach the database: the API and what it needs.
    let deletes: Deletes
    let index: PointIndex

    struct Deletes: Sendable {
        var api: InfluxDBSinkConfig.API
        var base: String
        /// v1: `db` (and `rp`); v2: `org` and `bucket`.
        var query: [(String, String)]
        var headers: [(String, String)]
    }

    init(
        name: String, writeURL: String, headers: [(String, String)], encoder: LineProtocolEncoder, gzip: Int32?,
        options: CurlClient.Options, deletes: Deletes, indexPath: String, logger: Logger, clock: any Clock = SystemClock()
    ) {
        self.name = name
        self.writeURL = writeURL
        self.shownURL = SafeText.url(writeURL.split(separator: "?").first.map(String.init) ?? writeURL)
        self.headers = headers
        self.encoder = encoder
        self.gzip = gzip
        self.clients = (0..<InfluxDBSink.requestsInFlight).map { _ in CurlClient(options: options) }
        self.deletes = deletes
        self.index = PointIndex(path: indexPath)
        self.logger = logger
        self.clock = clock
    }

    public static func build(name: String, node: YAMLNode, path: String, context: SinkBuildContext) throws(ConfigProblems) -> BuiltSink {
        let c = try YAMLDecoder().decode(InfluxDBSinkConfig.self, from: node, path: path)
        var problems: [ConfigProblem] = []
        func need(_ key: String, _ value: String?, _ api: InfluxDBSinkConfig.API) {
            if value?.isEmpty ?? true {
                problems.append(
                    ConfigProblem(
                        location: node.location, path: "\(path).\(key)",
                        message: "api \(api.rawValue) needs \"\(key)\""))
            }
        }
        func refuse(_ key: String, _ value: String?, _ api: InfluxDBSinkConfig.API) {
            if value != nil {
                problems.append(
                    ConfigProblem(
                        location: node[key]?.location ?? node.location, path: "\(path).\(key)",
                        message: "\"\(key)\" has no meaning for api \(api.rawValue)"))
            }
        }
        if !(c.url.hasPrefix("http://") || c.url.hasPrefix("https://")) {
            problems.append(
                ConfigProblem(
                    location: node["url"]?.location, path: path + ".url",
                    message: "the url must start with http:// or https:// (e.g. http://localhost:8086)"))
        }
        var templates = [("measurement", c.measurement ?? "")]
        for (k, v) in (c.tags ?? [:]).sorted(by: { $0.key < $1.key }) { templates.append(("tags.\(k)", v)) }
        for (key, template) in templates {
            let unknown = RecordTemplate(template, allowed: LineProtocolEncoder.fields).unknown
            if !unknown.isEmpty {
                problems.append(
                    ConfigProblem(
                        location: node[key.split(separator: ".").first.map(String.init) ?? key]?.location,
                        path: path + "." + key,
                        message: RecordTemplate.problem(unknown, allowed: LineProtocolEncoder.fields)))
            }
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
            query = [
                ("db", c.database ?? ""),
                ("precision", ["ns": "nanosecond", "us": "microsecond", "ms": "millisecond", "s": "second"][precision.rawValue]!)
            ]
            headers.append(("Authorization", "Bearer \(c.token ?? "")"))
        }
        let endpoint = ["v1": "/write", "v2": "/api/v2/write", "v3": "/api/v3/write_lp"][api.rawValue]!
        let url =
            base + endpoint + "?" + query.map { "\(PercentEncoding.encode($0.0))=\(PercentEncoding.encode($0.1))" }.joined(separator: "&")
        if let level = c.gzip_level, !(1...9).contains(level) {
            problems.append(
                ConfigProblem(
                    location: node["gzip_level"]?.location, path: path + ".gzip_level",
                    message: "gzip_level must be 1 (fastest) to 9 (smallest), not \(level)"))
        }
        // Level 1 by default: less than half of level 6's CPU for bodies a little bigger (the
        // sink's lines shrink about 10× at 1, 12× at 6); on a small box the CPU is what limits.
        // Not at all, unless asked, to a server on this machine: the body never crosses a wire,
        // and compressing it here and inflating it there is CPU both sides spend for nothing.
        let gzip: Int32? = (c.gzip ?? !isLoopback(url: c.url)) ? Int32(c.gzip_level ?? 1) : nil // out of 1…9 is refused below
        if gzip != nil { headers.append(("Content-Encoding", "gzip")) }
        let common = try SinkCommonConfig.checked(
            batch: c.batch, retry: c.retry, queue: c.queue, node: node, path: path,
            defaultMaxItems: 10_000, adding: problems)
        let encoder = LineProtocolEncoder(
            measurement: c.measurement ?? "{type}", phoneTag: c.phone_tag ?? "phone",
            tags: (c.tags ?? [:]).sorted { $0.key < $1.key }.map { ($0.key, $0.value) },
            precision: precision)
        var deleteQuery: [(String, String)] = []
        switch api {
        case .v1: deleteQuery = [("db", c.database ?? "")] + (c.retention_policy.map { [("rp", $0)] } ?? [])
        case .v2: deleteQuery = [("org", c.org ?? ""), ("bucket", c.bucket ?? "")]
        case .v3: deleteQuery = []
        }
        let options = CurlClient.Options(timeoutSeconds: c.timeout?.seconds ?? 30, caFile: c.ca_file)
        let writeHeaders = headers
        let deletes = Deletes(api: api, base: base, query: deleteQuery, headers: headers.filter { $0.0 == "Authorization" })
        return BuiltSink(
            kind: "influxdb", common: common,
            summary: "influxdb \(api.rawValue) \(SafeText.url(base + endpoint))"
        ) { ctx in
            InfluxDBSink(
                name: ctx.name, writeURL: url, headers: writeHeaders, encoder: encoder, gzip: gzip, options: options,
                deletes: deletes, indexPath: FileIO.join(ctx.stateDir, "points.sqlite"), logger: ctx.logger,
                clock: ctx.clock)
        }
    }

    /// Whether the url's host is this machine's loopback (`Loopback`): where `gzip` is off
    /// unless the config turns it on.
    public static func isLoopback(url: String) -> Bool {
        CurlClient.host(ofURL: url).map { Loopback.isLoopback(host: $0) } ?? false
    }

    /// Lines a request carries at most (InfluxDB's own advice is 5,000 a write).
    static let linesPerRequest = 5_000
    /// Requests in flight at once: while InfluxDB takes some, the sink encodes the next.
    static let requestsInFlight = 4

    /// Where each run's points go, noted on a helper thread as the runs go out.
    private lazy var noting = IndexWork(index: index, logger: logger)

    /// One batch's outcomes as its requests are answered. Once a request must wait (a keep),
    /// every record after it waits too, even what a request in flight got in (InfluxDB
    /// overwrites a point written again, so sending it again later is harmless).
    final class Outcomes {
        var outcomes: [DeliveryOutcome]
        var halted: String?
        var retryAfter: Double?

        init(count: Int) {
            outcomes = Array(repeating: .accepted, count: count)
        }

        var result: SinkWriteResult {
            if outcomes.allSatisfy({ $0 == .accepted }) { return .accepted }
            if let halted,
                outcomes.allSatisfy({
                    if case .keep = $0 { return true }; return false
                })
            {
                return .keep(reason: halted, retryAfterSeconds: retryAfter)
            }
            return .perRecord(outcomes)
        }

        func keep(_ indices: some Sequence<Int>, _ reason: String) {
            if halted == nil { halted = reason }
            for i in indices { outcomes[i] = .keep(reason: reason) }
        }

        /// A request's answer, for the records it carried.
        func settle(_ result: SinkWriteResult, indices: [Int]) {
            switch result {
            case .accepted:
                if let halted { keep(indices, halted) }
            case .keep(let reason, let after):
                if halted == nil { retryAfter = after }
                keep(indices, halted ?? reason)
            case .perRecord(let perLine):
                for (k, o) in perLine.enumerated() {
                    if case .keep(let why) = o, halted == nil { halted = why }
                    if let halted { keep([indices[k]], halted) } else { outcomes[indices[k]] = o }
                }
            }
        }
    }

    /// A batch as line protocol: runs of at most `linesPerRequest` points and the deletes, in
    /// the batch's order, and the records that can be no point. Made without the sink's state,
    /// so the drainer makes it (`prepare`) while the batch before is written.
    struct Encoded: Sendable {
        enum Step: Sendable {
            case run(Run)
            case delete(index: Int, device: String, uuid: String)
        }
        var steps: [Step] = []
        var refused: [(index: Int, reason: String)] = []
    }

    static func encode(_ batch: SinkBatch, with encoder: LineProtocolEncoder) -> Encoded {
        var out = Encoded()
        let runLines = min(InfluxDBSink.linesPerRequest, batch.count)
        var run = Run(lines: runLines)
        // The device's name made once for the records that share it (a batch's come from a few phones).
        var lastDevice: (bytes: [UInt8], name: String)?
        func flush() {
            guard !run.indices.isEmpty else { return }
            out.steps.append(.run(run))
            run = Run(lines: runLines)
        }
        for (i, r) in batch.records.enumerated() {
            if r.op == .delete {
                flush()
                out.steps.append(.delete(index: i, device: r.device, uuid: r.uuid))
                continue
            }
            let before = run.body.count
            switch encoder.encode(r, into: &run.body) {
            case .line(let seriesEnd, let time):
                run.starts.append(before)
                run.indices.append(i)
                run.seriesEnds.append(seriesEnd)
                run.times.append(time)
                var device = ""
                r.withText(.device) { bytes in
                    let bytes = bytes ?? UnsafeRawBufferPointer(start: nil, count: 0)
                    if let last = lastDevice, last.bytes.count == bytes.count,
                        bytes.isEmpty || last.bytes.withUnsafeBytes({ memcmp($0.baseAddress!, bytes.baseAddress!, bytes.count) == 0 })
                    {
                        device = last.name
                    } else {
                        device = String(decoding: bytes, as: UTF8.self)
                        lastDevice = (Array(bytes), device)
                    }
                }
                let part = r.part
                r.withText(.uuid) {
                    run.keys.append(PointIndex.Key(device: device, uuid: $0 ?? UnsafeRawBufferPointer(start: nil, count: 0), part: part))
                }
            case .cannot(let why):
                run.body.removeSubrange(before...)
                out.refused.append((i, why))
            }
            if run.indices.count == InfluxDBSink.linesPerRequest { flush() }
        }
        flush()
        return out
    }

    public var prepare: (@Sendable (SinkBatch) -> any Sendable)? {
        let encoder = self.encoder
        return { InfluxDBSink.encode($0, with: encoder) }
    }

    /// The runs go out up to `requestsInFlight` at once, each on a helper thread with a
    /// connection of its own, while another notes where the run's points go in the point index
    /// — whatever InfluxDB answers: a delete of a point that is not there deletes nothing. A
    /// delete is applied where it stands, after every upsert before it is answered, and not at
    /// all once something waits, so "write, then delete" and "delete, then write again" both end
    /// as they should.
    public func write(_ batch: SinkBatch) -> SinkWriteResult {
        let encoded = batch.prepared as? Encoded ?? InfluxDBSink.encode(batch, with: encoder)
        let b = Outcomes(count: batch.count)
        for (i, why) in encoded.refused { b.outcomes[i] = .rejected(reason: why) }
        var inFlight: [Request] = []
        var slot = 0
        func settleOldest() {
            let r = inFlight.removeFirst()
            b.settle(r.wait(), indices: r.run.indices)
        }
        for step in encoded.steps {
            switch step {
            case .run(let run):
                if inFlight.count >= InfluxDBSink.requestsInFlight { settleOldest() }
                if let halted = b.halted {
                    b.keep(run.indices, halted)
                    continue
                }
                let request = Request(run: run, poster: poster(slot), url: writeURL, headers: headers, gzip: gzip)
                slot = (slot + 1) % clients.count
                request.start()
                inFlight.append(request)
                noting.add(
                    PointIndex.Run(
                        keys: run.keys, body: run.body, seriesStarts: run.starts,
                        seriesEnds: run.seriesEnds, times: run.times))
            case .delete(let i, let device, let uuid):
                while !inFlight.isEmpty { settleOldest() }
                noting.waitForAll() // the delete reads the index
                if let halted = b.halted {
                    b.keep([i], halted)
                    continue
                }
                b.outcomes[i] = delete(device: device, uuid: uuid)
                if case .keep(let why) = b.outcomes[i] { b.halted = why }
            }
        }
        while !inFlight.isEmpty { settleOldest() }
        noting.waitForAll() // the cursor moves past these records once this returns
        return b.result
    }

    /// `healthgate-bench --micro`'s InfluxDB lines: the records' points in Syncky's schema with a
    /// phone tag. Returns the bytes of line protocol made.
    public static func encodeBench(_ records: [Record]) -> Int {
        let encoder = LineProtocolEncoder(measurement: "{type}", phoneTag: "phone", tags: [], precision: .ns)
        var out: [UInt8] = []
        for r in records { _ = encoder.encode(r, into: &out) }
        return out.count
    }

    func poster(_ slot: Int) -> BatchPoster {
        BatchPoster(
            sinkName: name, url: shownURL, credentialsHint: "sinks.\(name).token (or username/password)",
            endpointHint: "sinks.\(name).url, api (v1 for InfluxDB 1.x) and its database or bucket (it must exist)",
            client: clients[slot], logger: logger, clock: clock)
    }

    /// Lines for one request: their bytes one after another, where each begins, whose record
    /// each is, and where its point lives (its series ends at `seriesEnds`, its time).
    struct Run: Sendable {
        var body: [UInt8] = []
        var starts: [Int] = []
        var indices: [Int] = []
        var seriesEnds: [Int] = []
        var times: [Int64] = []
        /// Whose point each line is: the point index's key.
        var keys: [PointIndex.Key] = []

        /// A run with room for `lines` lines (of some 250 bytes each).
        init(lines: Int) {
            body.reserveCapacity(lines * 256)
            starts.reserveCapacity(lines)
            indices.reserveCapacity(lines)
            seriesEnds.reserveCapacity(lines)
            times.reserveCapacity(lines)
            keys.reserveCapacity(lines)
        }

        /// The lines of `range`, gzip'd at the level given.
        func body(_ range: Range<Int>, gzip: Int32?) -> [UInt8] {
            let from = starts[range.lowerBound]
            let to = range.upperBound < starts.count ? starts[range.upperBound] : body.count
            let bytes = from == 0 && to == body.count ? body : Array(body[from..<to])
            return gzip.map { InfluxDBSink.gzip(bytes, level: $0) } ?? bytes
        }
    }

    /// The point index's rows of each run sent, written in order on a helper thread that lives
    /// as long as the sink (from the first `add` to `stop`, only the helper touches the index but
    /// between a `wait` that found everything noted and the next `add`). A failure is logged: the
    /// points are in InfluxDB, only a later delete of them will not find them.
    final class IndexWork {
        let index: PointIndex
        let logger: Logger
        private let monitor = Monitor()
        private var queue: [PointIndex.Run] = []
        /// Runs added, and runs noted, since the sink opened.
        private var added = 0
        private var noted = 0
        private var closed = false
        private var thread: pthread_t?

        init(index: PointIndex, logger: Logger) {
            self.index = index
            self.logger = logger
        }

        /// Queues a run's rows.
        func add(_ rows: PointIndex.Run) {
            if thread == nil && !closed {
                switch startThread({ self.run() }) {
                case .success(let t): thread = t
                case .failure: // no thread to be had: noted on this one
                    note([rows])
                    monitor.withLock {
                        added += 1; noted += 1
                    }
                    return
                }
            }
            monitor.withLock {
                queue.append(rows)
                added += 1
                monitor.broadcast()
            }
        }

        /// Notes the runs queued, all those waiting at once (one transaction: under load the
        /// runs of the requests in flight queue while one is written).
        private func run() {
            while true {
                let next: [PointIndex.Run] = monitor.withLock {
                    while queue.isEmpty && !closed { monitor.wait() }
                    var taken: [PointIndex.Run] = []
                    swap(&taken, &queue)
                    return taken
                }
                guard !next.isEmpty else { return }
                note(next)
                monitor.withLock {
                    noted += next.count
                    monitor.broadcast()
                }
            }
        }

        private func note(_ runs: [PointIndex.Run]) {
            do {
                try index.record(runs: runs)
            } catch let e as PointIndex.SealFailure {
                logger.warning(SafeText.error(e))
            } catch {
                logger.error(
                    "cannot note where \(runs.reduce(0) { $0 + $1.count }) point(s) went (\(SafeText.error(error))); "
                        + "deleting them later will not find them")
            }
        }

        /// Waits until every run added is noted.
        func waitForAll() {
            monitor.withLock {
                while noted < added { monitor.wait() }
            }
        }

        /// Notes what is queued and ends the helper.
        func stop() {
            monitor.withLock {
                closed = true
                monitor.broadcast()
            }
            if let t = thread { pthread_join(t, nil) }
            thread = nil
        }
    }

    /// One request on a helper thread (fork and join: between `start` and `wait` only the
    /// helper touches it and its connection).
    final class Request {
        let run: Run
        let poster: BatchPoster
        let url: String
        let headers: [(String, String)]
        let gzip: Int32?
        private var posting: Forked<SinkWriteResult>?

        init(run: Run, poster: BatchPoster, url: String, headers: [(String, String)], gzip: Int32?) {
            self.run = run
            self.poster = poster
            self.url = url
            self.headers = headers
            self.gzip = gzip
        }

        func start() {
            posting = Forked { [self] in
                poster.post(count: run.indices.count) { range in (url, headers, run.body(range, gzip: gzip)) }
            }
        }

        /// Waits for the answer.
        func wait() -> SinkWriteResult { posting!.join() }
    }

    /// Removes every point written under the record's key (all parts), then forgets them.
    func delete(device: String, uuid: String) -> DeliveryOutcome {
        let points: [PointIndex.Point]
        do {
            points = try index.points(device: device, uuid: uuid)
        } catch {
            return .keep(reason: "cannot read the point index: \(error)")
        }
        // A delete of something this sink never wrote (deleted before it was sent, say) has
        // nothing to do.
        if points.isEmpty { return .accepted }
        for p in points {
            let request: (url: String, body: [UInt8], headers: [(String, String)])
            switch deletes.api {
            case .v3:
                return .rejected(reason: "InfluxDB 3 has no API to delete single points; delete \(p.measurement) at \(p.timeNanos) by hand")
            case .v1:
                var where_ = ["time = \(p.timeNanos)"]
                for (k, v) in p.tags {
                    where_.append(
                        "\"\(k.replacing("\"", with: "\\\""))\" = '\(v.replacing("\\", with: "\\\\").replacing("'", with: "\\'"))'")
                }
                let q = "DELETE FROM \"\(p.measurement.replacing("\"", with: "\\\""))\" WHERE " + where_.joined(separator: " AND ")
                let query = (deletes.query + [("q", q)]).map { "\(PercentEncoding.encode($0.0))=\(PercentEncoding.encode($0.1))" }
                request = (deletes.base + "/query?" + query.joined(separator: "&"), [], deletes.headers)
            case .v2:
                let start = Timestamp(seconds: p.timeNanos / 1_000_000_000, nanoseconds: Int32(p.timeNanos % 1_000_000_000))
                let stop = Timestamp(seconds: (p.timeNanos + 1) / 1_000_000_000, nanoseconds: Int32((p.timeNanos + 1) % 1_000_000_000))
                var predicate = "_measurement=\"\(p.measurement.replacing("\"", with: "\\\""))\""
                for (k, v) in p.tags { predicate += " AND \(k)=\"\(v.replacing("\"", with: "\\\""))\"" }
                var w = JSONWriter(capacity: 128 + predicate.utf8.count)
                w.beginObject()
                w.key("start"); w.string(start.rfc3339())
                w.key("stop"); w.string(stop.rfc3339())
                w.key("predicate"); w.string(predicate)
                w.endObject()
                let query = deletes.query.map { "\(PercentEncoding.encode($0.0))=\(PercentEncoding.encode($0.1))" }
                request = (
                    deletes.base + "/api/v2/delete?" + query.joined(separator: "&"), w.bytes,
                    deletes.headers + [("Content-Type", "application/json")]
                )
            }
            let response: CurlClient.Response
            do {
                response = try client.send("POST", url: request.url, headers: request.headers, body: request.body)
            } catch {
                return .keep(reason: "\(SafeText.url(deletes.base)): \(error)")
            }
            switch response.status {
            case 200..<300 where !response.bodyText.contains("\"error\""):
                continue
            case 401, 403, 408, 429, 500..<600:
                return .keep(
                    reason:
                        "\(response.status) from \(SafeText.url(deletes.base)) deleting \(p.measurement)\(BatchPoster.snippet(response))")
            default:
                return .rejected(
                    reason:
                        "\(response.status) from \(SafeText.url(deletes.base)) deleting \(p.measurement)\(BatchPoster.snippet(response))")
            }
        }
        do {
            try index.remove(device: device, uuid: uuid)
        } catch {
            logger.error("deleted the points of \(uuid) but cannot forget them in the index (\(error))")
        }
        return .accepted
    }

    /// gzip (RFC 1952) of a body, at `level` (1 fastest … 9 smallest, as zlib's; the config
    /// allows no other). By libdeflate: the whole batch at once, ~1.35× zlib's speed at level 1.
    public static func gzip(_ data: [UInt8], level: Int32 = 1) -> [UInt8] {
        // Fails only without memory for the compressor (or with a level the config refuses):
        // never sent as something else under a gzip header.
        guard let compressor = libdeflate_alloc_compressor(level) else { preconditionFailure("gzip: no compressor for level \(level)") }
        defer { libdeflate_free_compressor(compressor) }
        let bound = libdeflate_gzip_compress_bound(compressor, data.count)
        let out = [UInt8](unsafeUninitializedCapacity: bound) { o, count in
            count = data.withUnsafeBytes { libdeflate_gzip_compress(compressor, $0.baseAddress, $0.count, o.baseAddress, bound) }
        }
        precondition(!out.isEmpty, "gzip: the output bound was too small") // libdeflate's bound always suffices
        return out
    }

    public func probe() -> Reachability { client.probe(url: deletes.base) }

    public func close() {
        noting.stop()
        for c in clients { c.close() }
        index.close()
    }
}
