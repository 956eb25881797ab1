import FastJSON
import HealthgateCore
import Posix
import SinkKit
import YAMLConfig

/// Writes Home Assistant's long-term statistics (see `HomeAssistantSinkConfig`). Per batch: the
/// samples go into the `HourlyBook`, and the hours they changed (for a cumulative type, the
/// running sums after them too) are imported with `recorder/import_statistics`; the batch counts
/// as delivered once Home Assistant took every import. Importing an hour again replaces it, so a
/// batch written twice changes nothing.
///
/// At each connect (after either side restarted) the sink reads back what Home Assistant has of
/// the window and writes the hours it lacks or has otherwise: a Home Assistant restored from an
/// older backup is made whole again. A refused token or an unreachable Home Assistant keeps the
/// records in the sink's queue, shown as failing or unreachable.
public final class HomeAssistantSink: Sink {
    struct Settings: Sendable {
        var url: String
        var token: String
        var window: Int64
        var timeout: Double
        var names: [String: String]
        var include: [Glob]
        var exclude: [Glob]
    }

    let settings: Settings
    let book: HourlyBook
    let logger: Logger
    let clock: any Clock
    var connection: HAConnection?
    /// Why the last connect or import failed, and whether Home Assistant refused it (a token, a
    /// command: failing) rather than could not be reached.
    var failure: (why: String, refused: Bool)?
    var lastAttempt = -Double.infinity
    var lastCheck = -Double.infinity
    var samples = 0
    var hoursWritten = 0
    var importCalls = 0

    /// Rows per `import_statistics` (a month of hours is 720).
    static let rowsPerImport = 2_000
    /// Statistics read back per `statistics_during_period` at a connect.
    static let idsPerRead = 16
    /// How often an idle connection is asked whether Home Assistant is still there.
    static let checkInterval = 60.0

    init(settings: Settings, logger: Logger, clock: any Clock) {
        self.settings = settings
        self.book = HourlyBook(window: settings.window)
        self.logger = logger
        self.clock = clock
    }

    public static func build(name: String, node: YAMLNode, path: String, context: SinkBuildContext) throws(ConfigProblems) -> BuiltSink {
        let c = try YAMLDecoder().decode(HomeAssistantSinkConfig.self, from: node, path: path)
        var problems = ConfigProblemList(node, path: path)
        do {
            _ = try HAConnection.parse(c.url)
        } catch {
            problems.add("url", "\(error.description) (say where Home Assistant answers, e.g. http://homeassistant.local:8123)")
        }
        if c.token.isEmpty { problems.add("token", "give a long-lived access token (Home Assistant: your profile › Security)") }
        let window = c.history?.seconds ?? 30 * 86_400
        if window < 3_600 || window > 10 * 366 * 86_400 { problems.add("history", "history is from 1h to 10 years (e.g. 30d)") }
        for (key, names) in [("include", c.include), ("exclude", c.exclude)] {
            for n in names ?? [] where !n.contains("*") && !n.contains("?") && HAStatisticKind.of(type: n) == nil {
                problems.add(
                    key,
                    HealthTypes.configProblem(n, nearest: closestMatch)
                        ?? "\(n) is no quantity type: only quantities have hourly statistics")
            }
        }
        let common = try SinkCommonConfig.checked(
            batch: c.batch, retry: c.retry, queue: c.queue, node: node, path: path,
            defaultMaxItems: 5000, adding: problems.problems)
        let settings = Settings(
            url: c.url, token: c.token, window: Int64(window), timeout: c.timeout?.seconds ?? 10, names: c.names ?? [:],
            include: (c.include ?? ["*"]).map(Glob.init), exclude: (c.exclude ?? []).map(Glob.init))
        let summary =
            "homeassistant \(SafeText.url(c.url)), statistics of the last \(ConfigDuration(nanoseconds: Int64(window) * 1_000_000_000))"
        return BuiltSink(kind: "homeassistant", common: common, summary: summary) { ctx in
            HomeAssistantSink(settings: settings, logger: ctx.logger, clock: ctx.clock)
        }
    }

    func wanted(_ type: String) -> Bool {
        settings.include.contains { $0.matches(type) } && !settings.exclude.contains { $0.matches(type) }
    }

    // MARK: writing

    public func write(_ batch: SinkBatch) -> SinkWriteResult {
        let now = clock.now().seconds
        book.prune(now: now)
        let (taken, refused) = book.apply(batch.records.map(\.canonical), now: now, wanted: wanted)
        samples += taken
        if let why = connect(now: now) ?? flush() { return .keep(reason: why, retryAfterSeconds: nil) }
        if refused.isEmpty { return .accepted }
        var outcomes = [DeliveryOutcome](repeating: .accepted, count: batch.count)
        for (i, why) in refused { outcomes[i] = .rejected(reason: why) }
        return .perRecord(outcomes)
    }

    /// Connects when not connected, and then compares what Home Assistant has with the book.
    /// Returns why it cannot.
    func connect(now: Int64) -> String? {
        if connection != nil { return nil }
        lastAttempt = monotonicSeconds()
        do throws(HAConnection.Failure) {
            let c = try HAConnection(url: settings.url, token: settings.token, timeout: settings.timeout)
            try reconcile(c, now: now)
            connection = c
            lastCheck = monotonicSeconds()
            logger.info(
                "connected to Home Assistant \(c.haVersion)\(failure == nil ? "" : " again"); "
                    + "\(book.dirty.count) of \(book.series.count) statistic(s) to write")
            failure = nil
            return nil
        } catch {
            return failed(error)
        }
    }

    private func failed(_ error: HAConnection.Failure) -> String {
        if failure?.why != error.description { logger.warning(error.description) }
        failure = (error.description, error.refused)
        if !error.refused { connection = nil }
        return error.description
    }

    /// Reads back Home Assistant's hours of every series the book has, from the window's first.
    func reconcile(_ c: HAConnection, now: Int64) throws(HAConnection.Failure) {
        let ids = book.series.keys.sorted()
        let parser = JSONParser()
        let start = Timestamp(seconds: book.firstHour(now: now)).rfc3339()
        var i = 0
        while i < ids.count {
            let chunk = Array(ids[i..<min(ids.count, i + HomeAssistantSink.idsPerRead)])
            i += chunk.count
            let statisticIDs = chunk.map { HAStatisticIDs.id(device: $0.device, type: $0.type) }
            let bytes = try c.call("recorder/statistics_during_period") { w in
                w.key("start_time"); w.string(start)
                w.key("statistic_ids"); w.beginArray(); for s in statisticIDs { w.string(s) }; w.endArray()
                w.key("period"); w.string("hour")
                w.key("types"); w.beginArray(); for t in ["sum", "mean", "min", "max"] { w.string(t) }; w.endArray()
            }
            guard let doc = try? parser.parse(bytes) else {
                throw HAConnection.Failure(description: "Home Assistant's statistics are not JSON")
            }
            for (id, statisticID) in zip(chunk, statisticIDs) {
                var have: [Int64: HourlyBook.Row] = [:]
                for row in doc.root[statisticID].map({ Array($0.elements) }) ?? [] {
                    guard let ms = row["start"]?.double else { continue }
                    let hour = Int64((ms / 1000).rounded())
                    have[hour] = HourlyBook.Row(
                        start: hour, sum: row["sum"]?.double, mean: row["mean"]?.double, min: row["min"]?.double, max: row["max"]?.double)
                }
                book.reconcile(id, with: have)
            }
        }
    }

    /// Imports every changed series' rows; returns why it could not.
    func flush() -> String? {
        guard let c = connection else { return failure?.why ?? "not connected to Home Assistant" }
        for id in book.dirty.keys.sorted() {
            let rows = book.changedRows(of: id)
            guard let kind = book.series[id]?.kind else { continue }
            let statisticID = HAStatisticIDs.id(device: id.device, type: id.type)
            let name = "\(HAStatisticIDs.title(id.type)) (\(displayName(id.device)))"
            var at = 0
            while at < rows.count {
                let part = rows[at..<min(rows.count, at + HomeAssistantSink.rowsPerImport)]
                do throws(HAConnection.Failure) {
                    _ = try c.call("recorder/import_statistics") { w in
                        w.key("metadata")
                        kind.writeMetadata(id: statisticID, name: name, haVersion: c.haVersion, to: &w)
                        w.key("stats")
                        w.beginArray()
                        for row in part { HomeAssistantSink.write(row, to: &w) }
                        w.endArray()
                    }
                } catch {
                    return failed(error)
                }
                importCalls += 1
                at += part.count
            }
            hoursWritten += rows.count
            book.written(id)
        }
        failure = nil
        return nil
    }

    static func write(_ row: HourlyBook.Row, to w: inout JSONWriter) {
        w.beginObject()
        w.key("start"); w.string(Timestamp(seconds: row.start).rfc3339())
        if let sum = row.sum {
            w.key("state"); w.double(sum)
            w.key("sum"); w.double(sum)
        }
        if let mean = row.mean, let min = row.min, let max = row.max {
            w.key("mean"); w.double(mean)
            w.key("min"); w.double(min)
            w.key("max"); w.double(max)
        }
        w.endObject()
    }

    func displayName(_ device: String) -> String {
        settings.names[device] ?? book.receivers[device].flatMap { settings.names[$0] } ?? device
    }

    // MARK: the rest of a sink's life

    /// Connects again after a failure (which also writes what reconnecting found missing), and
    /// now and then asks an idle connection whether Home Assistant is still there: one that
    /// restarted is compared with the book anew.
    public func idle() {
        let now = clock.now().seconds
        book.prune(now: now)
        let t = monotonicSeconds()
        if connection == nil {
            guard t - lastAttempt >= 10 else { return }
            _ = connect(now: now)
        } else if t - lastCheck >= HomeAssistantSink.checkInterval {
            lastCheck = t
            do throws(HAConnection.Failure) {
                _ = try connection?.call("get_config")
            } catch {
                _ = failed(error)
                _ = connect(now: now)
            }
        }
        if connection != nil && !book.dirty.isEmpty { _ = flush() }
    }

    public func probe() -> Reachability {
        if connection == nil && monotonicSeconds() - lastAttempt >= 10 { _ = connect(now: clock.now().seconds) }
        guard let f = failure else { return connection == nil ? .unknown : .reachable }
        return f.refused ? .failing(f.why) : .unreachable(f.why)
    }

    public func close() { connection = nil }

    public func saveState(of devices: DeviceScope) -> [UInt8]? { book.save(of: devices) }

    public func restoreState(_ bytes: [UInt8], of devices: DeviceScope) throws(SinkOpenError) {
        do {
            try book.restore(bytes, of: devices)
        } catch {
            throw SinkOpenError("\(error)")
        }
    }

    public func report() -> SinkReport? {
        SinkReport(
            detail: connection.map { "Home Assistant \($0.haVersion), \(book.series.count) statistic(s)" },
            counters: [("samples", samples), ("hours_written", hoursWritten), ("imports", importCalls)])
    }
}
