import CanonicalJSON
import FastJSON
import Fleet
import Glibc
import HealthgateCore
import Pipeline
import Posix
import SinkKit
import Sinks

/// `healthgate replay FILE [--sink NAME]`: delivers the records of an NDJSON file again — an
/// archive of canonical records, or a sink's dead letters once their cause is fixed — with
/// each sink's own batching, retries and dead letters. `healthgate replay --journal [--since T]`
/// does the same with what the journal still holds (see `journal.retention`). Without
/// `--sink`, records take their routes (transforms included) as if they had just come in; with
/// it, they go to that sink as they are.
///
/// One writer per sink, ever: while `serve` runs, the records are handed to it over its control
/// socket (`ControlChannel`), which journals them durably and delivers them from its own
/// drainers, and replay reports their progress; when no `serve` runs, replay takes the data
/// dir's lock and runs the sinks itself.
struct ReplayCommand {
    let options: Options
    /// nil: the journal.
    let file: String?
    init(_ o: Options, file: String?) {
        options = o
        self.file = file
    }

    final class Target {
        var name: String
        var built: BuiltSink
        var sink: any Sink
        var routes: SinkRoutes? // nil: every record, as it is
        var delivery: BatchDelivery
        var deadLetters: DeadLetters
        var metrics: SinkMetrics

        init(
            name: String, built: BuiltSink, sink: any Sink, routes: SinkRoutes?, delivery: BatchDelivery,
            deadLetters: DeadLetters, metrics: SinkMetrics
        ) {
            self.name = name
            self.built = built
            self.sink = sink
            self.routes = routes
            self.delivery = delivery
            self.deadLetters = deadLetters
            self.metrics = metrics
        }
    }

    func run() throws -> Int32 {
        let source = try ConfigSource.resolve(options, credentials: .standIn)
        let logSink = StderrLogSink(minimum: .warning)
        let logger = Logger(component: "replay", sink: logSink)
        let t = try source.load(logger: logger)
        ConfigSource.announce("replay", source, t)
        if let file, !FileIO.exists(file) { throw UsageError("\(file): no such file") }
        if let fleet = t.fleet { return try runInFleet(fleet, t) }
        if file == nil && !options.flags.contains("--journal") {
            throw UsageError(
                "which file? `healthgate replay FILE.ndjson [--sink NAME]`, or `--journal [--since TIME]` (`--sink NAME` "
                    + "alone replays a fleet sink's dead-letter queue, and this config has no fleet:)")
        }
        var since: Timestamp?
        if let s = options.values["--since"] {
            guard let (t, _) = Timestamp.parseRFC3339(s) else {
                throw UsageError("--since takes an RFC 3339 time, e.g. 2026-11-29T00:00:00Z")
            }
            since = t
        }
        var chosen = t.sinks
        if let only = options.values["--sink"] {
            chosen = t.sinks.filter { $0.name == only }
            if chosen.isEmpty {
                throw UsageError("no sink is named \"\(only)\"\(suggestion(only, t.sinks.map(\.name)))")
            }
        }
        if chosen.isEmpty { throw UsageError("the config has no sinks to replay to") }
        // Replaying a sink's own dead letters: move them aside first, so that what is rejected
        // again starts a new file instead of being read again.
        var input = file ?? FileIO.join(t.dataDir, "journal")
        if file == nil && !FileIO.exists(input) {
            // A fresh data dir: no phone has delivered yet, so there is nothing to replay.
            print("the journal in \(t.dataDir) is empty (no request stored yet): nothing to replay")
            return 0
        }
        if let file {
            for s in t.sinks where realPath(file) == realPath(DeadLetters.path(sink: s.name, dataDir: t.dataDir)) {
                input = file + ".replaying-\(SystemClock().now().seconds)"
                if rename(file, input) != 0 { throw IOError("rename", file) }
                print("moved \(file) to \(input) while it is replayed")
            }
        }
        let serving = GatewayService.isServing(dataDir: t.dataDir)
        var handOff: HandOff?
        var lockFD: Int32 = -1
        defer { if lockFD >= 0 { close(lockFD) } }
        var targets: [Target] = []
        if serving {
            handOff = try HandOff(dataDir: t.dataDir, sink: options.values["--sink"])
            print("serve is running: the records are handed to it, and it delivers them")
        } else {
            // No serve: this process is the sinks' one writer while it runs.
            lockFD = try GatewayService.lock(dataDir: t.dataDir)
            targets = try openTargets(chosen, t, logger: logger)
        }
        let total = file == nil ? 0 : FileIO.fileSize(input) ?? 0
        let progress = Progress(total: total, tty: isatty(2) == 1)
        let parser = JSONParser()
        var unreadable = 0
        var read = 0
        var lineNumber = 0
        let chunks: (([ArraySlice<UInt8>], Int) throws -> Void) throws -> Void =
            file != nil
            ? { body in try forEachChunk(input, body) }
            : { body in
                var bytes = 0
                let newest = handOff?.journalAtStart ?? UInt64.max
                try Journal.scan(directory: input) { entry in
                    // What serve journals while this runs (these records among them) is not read again.
                    if entry.seq > newest { return }
                    bytes += entry.payload.count
                    if let since, entry.timeNanos < since.unixNanoseconds { return }
                    try body(entry.payload.split(separator: 0x0A, omittingEmptySubsequences: true), bytes)
                }
            }
        try chunks { lines, bytesSoFar in
            var records: [CanonicalRecord] = []
            for line in lines {
                lineNumber += 1
                if line.allSatisfy({ $0 == 0x20 || $0 == 0x0D || $0 == 0x09 }) { continue }
                if let r = decode(line, parser: parser) {
                    records.append(r)
                } else {
                    unreadable += 1
                    logSink.log(.warning, "replay", "\(input):\(lineNumber): not a canonical record or a dead letter with one; skipped")
                }
            }
            read += records.count
            if let handOff {
                try handOff.send(records)
            }
            for target in targets {
                var batch: [Record] = []
                if let routes = target.routes {
                    for r in records { _ = routes.process(Record(r), into: &batch) }
                } else {
                    batch = records.map(Record.init)
                }
                let size = target.built.common.batch.maxItems
                var start = 0
                while start < batch.count {
                    let part = Array(batch[start..<min(batch.count, start + size)])
                    _ = target.delivery.deliver(
                        part,
                        wait: { seconds in
                            usleep(useconds_t(seconds * 1e6)); return true
                        })
                    start += size
                }
            }
            progress.update(bytes: bytesSoFar, records: read)
        }
        progress.finish(records: read)
        if let handOff {
            try handOff.waitForDelivery(read: read)
        }
        for target in targets {
            target.sink.close()
            let rejected = target.metrics.rejected.load(ordering: .relaxed)
            print(
                "\(target.name): \(target.metrics.sent.load(ordering: .relaxed)) record(s) delivered"
                    + (rejected > 0 ? ", \(rejected) rejected again (in \(target.deadLetters.path))" : ""))
        }
        if unreadable > 0 { print("\(unreadable) line(s) of \(input) were not records and were skipped") }
        if let file, input != file {
            unlink(input)
        }
        return 0
    }

    /// In a fleet, records go back through the brokers (`FleetReplay`).
    private func runInFleet(_ fleet: FleetSettings, _ t: Topology) throws -> Int32 {
        let only = options.values["--sink"]
        if let only, !t.sinks.contains(where: { $0.name == only }) {
            throw UsageError("no sink is named \"\(only)\"\(suggestion(only, t.sinks.map(\.name)))")
        }
        guard let file else {
            guard let only, !options.flags.contains("--journal") else {
                throw UsageError(
                    "a fleet's records wait in its brokers' queues, not in a journal: `replay --sink NAME` takes a sink's "
                        + "dead-letter queue, `replay FILE` a file's records")
            }
            let parser = JSONParser()
            return try FleetReplay(fleet: fleet, sinks: t.sinks.map(\.name), decode: { decode($0, parser: parser) })
                .replayDeadLetters(sink: only)
        }
        let parser = JSONParser()
        let replay = FleetReplay(fleet: fleet, sinks: t.sinks.map(\.name), decode: { decode($0, parser: parser) })
        let c = try replay.connect()
        defer { c.close() }
        let progress = Progress(total: FileIO.fileSize(file) ?? 0, tty: isatty(2) == 1)
        var (read, unreadable) = (0, 0)
        try forEachChunk(file) { lines, bytesSoFar in
            var records: [CanonicalRecord] = []
            for line in lines where !line.allSatisfy({ $0 == 0x20 || $0 == 0x0D || $0 == 0x09 }) {
                if let r = decode(line, parser: parser) { records.append(r) } else { unreadable += 1 }
            }
            try replay.publish(records, sink: only, on: c)
            read += records.count
            progress.update(bytes: bytesSoFar, records: read)
        }
        progress.finish(records: read)
        print(
            "\(read) record(s) of \(file) are in \(only.map { "sink \($0)'s" } ?? "every sink's") queues; the deliver "
                + "machines deliver them")
        if unreadable > 0 { print("\(unreadable) line(s) of \(file) were not records and were skipped") }
        return 0
    }

    /// The chosen sinks, opened here (no serve runs: this process holds the data dir's lock).
    private func openTargets(_ chosen: [(name: String, built: BuiltSink)], _ t: Topology, logger: Logger) throws -> [Target] {
        let clock = SystemClock()
        return try chosen.map { s in
            let metrics = SinkMetrics(name: s.name)
            let dead = DeadLetters(
                sink: s.name, dataDir: t.dataDir, metrics: metrics, logger: logger, clock: clock,
                maxBytes: t.deadLetters.maxBytes)
            let stateDir = SinkDrainer.stateDirectory(sink: s.name, dataDir: t.dataDir)
            try FileIO.makeDirectories(stateDir, mode: 0o700)
            let sink = try s.built.open(
                SinkContext(
                    name: s.name, dataDir: t.dataDir, stateDir: stateDir, clock: clock,
                    logger: logger.child("sink \(s.name)")))
            return Target(
                name: s.name, built: s.built, sink: sink,
                routes: options.values["--sink"] == nil
                    ? SinkRoutes(
                        routes: t.routes.filter { $0.to.contains(s.name) }, sink: s.name, clock: clock,
                        timeZones: SystemTimeZones(), logger: logger)
                    : nil,
                delivery: BatchDelivery(
                    sink: sink, name: s.name, retry: s.built.common.retry, metrics: metrics,
                    deadLetters: dead, logger: logger, clock: clock),
                deadLetters: dead, metrics: metrics)
        }
    }

    /// A canonical record, or the record inside a dead letter.
    private func decode(_ line: ArraySlice<UInt8>, parser: JSONParser) -> CanonicalRecord? {
        let bytes = Array(line)
        guard let doc = try? parser.parse(bytes) else { return nil }
        let root = doc.root
        if let inner = root["record"], inner.kind == .object, root["reason"] != nil {
            return try? CanonicalCodec.decode(inner)
        }
        return try? CanonicalCodec.decode(root)
    }

    /// Calls `body` with the complete lines of each 4 MB chunk of the file.
    private func forEachChunk(_ path: String, _ body: ([ArraySlice<UInt8>], Int) throws -> Void) throws {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 { throw IOError("open", path) }
        defer { close(fd) }
        var carry: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4 << 20)
        var done = 0
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw IOError("read", path)
            }
            done += max(n, 0)
            var data = carry
            data.append(contentsOf: buffer[0..<max(n, 0)])
            var lines: [ArraySlice<UInt8>] = []
            var start = 0
            for i in data.indices where data[i] == 0x0A {
                lines.append(data[start..<i])
                start = i + 1
            }
            if n == 0 {
                if start < data.count { lines.append(data[start...]) }
                try body(lines, done)
                return
            }
            carry = Array(data[start...])
            try body(lines, done)
        }
    }

    private func realPath(_ p: String) -> String {
        guard let r = realpath(p, nil) else { return p }
        defer { free(r) }
        return String(cString: r)
    }
}

/// A progress bar on a terminal (records, rate, ETA), redrawn at most ten times a second; a
/// line per tenth otherwise (a log, a pipe); a summary at the end either way.
final class Progress {
    let total: Int
    let tty: Bool
    private var lastTenth = -1
    private let started = monotonicSeconds()
    private var lastDrawn = -Double.infinity

    init(total: Int, tty: Bool) {
        self.total = total
        self.tty = tty
    }

    func update(bytes: Int, records: Int) {
        let fraction = total > 0 ? min(1, Double(bytes) / Double(total)) : 1
        let elapsed = max(0.001, monotonicSeconds() - started)
        let rate = Double(records) / elapsed
        if tty {
            let now = monotonicSeconds()
            guard now - lastDrawn >= 0.1 || fraction >= 1 else { return }
            lastDrawn = now
            let width = 30
            let filled = Int(fraction * Double(width))
            let bar = String(repeating: "#", count: filled) + String(repeating: " ", count: width - filled)
            let eta = fraction > 0 && fraction < 1 ? ", ETA " + formatSeconds(elapsed / fraction - elapsed) : ""
            printErr("\r[\(bar)] \(Int(fraction * 100))%  \(records) records, \(Int(rate.rounded())) records/s\(eta)   ", newline: false)
        } else if Int(fraction * 10) > lastTenth {
            lastTenth = Int(fraction * 10)
            printErr("replay: \(Int(fraction * 100))%, \(records) records")
        }
    }

    func finish(records: Int) {
        if tty { printErr("") }
        let elapsed = max(0.001, monotonicSeconds() - started)
        printErr("replay: \(records) records in \(formatSeconds(elapsed)) (\(Int((Double(records) / elapsed).rounded())) records/s)")
    }
}
