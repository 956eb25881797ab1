import Foundation
import Gateway
import Glibc

/// The sinks the bench puts load through, each with a real server behind it (but `file`).
enum BenchSink: String, CaseIterable {
    case file, influxdb, postgres, mqtt, http

    /// What "end to end" means for it.
    var delivered: String {
        switch self {
        case .file: "archived and fsynced"
        case .influxdb: "written to InfluxDB"
        case .postgres: "committed in PostgreSQL"
        case .mqtt: "acknowledged by mosquitto"
        case .http: "answered 2xx by the webhook receiver"
        }
    }
}

/// What one run of load measured: from the senders' side (acknowledged requests, their time to
/// 2xx) and from the server's (delivered by the sink, its CPU time and peak RSS).
struct Measurement {
    var requests = 0
    var samples = 0
    var bytes = 0
    /// From the first request to the last answer.
    var ackSeconds = 0.0
    var delivered = 0
    /// The sink stopped delivering before it had every sample: its end-to-end rate is not one.
    var stalled = false
    /// From the first request until the sink had delivered every acknowledged sample.
    var endToEndSeconds = 0.0
    /// Times to 2xx in milliseconds, sorted.
    var latencies: [Double] = []
    var failures = 0
    var idleRSSKiB = 0
    var peakRSSKiB = 0
    /// The server's user + system time over the run.
    var cpuSeconds = 0.0
    /// The bench's own (the senders') and the sink's server's (influxd, mosquitto) over the run.
    var loadCPUSeconds = 0.0
    var peerCPUSeconds = 0.0

    var ackRate: Double { ackSeconds > 0 ? Double(samples) / ackSeconds : 0 }
    var megabytesPerSecond: Double { ackSeconds > 0 ? Double(bytes) / 1e6 / ackSeconds : 0 }
    var endToEndRate: Double { endToEndSeconds > 0 ? Double(delivered) / endToEndSeconds : 0 }
    var cpuPerMillion: Double { perMillion(cpuSeconds) }
    /// CPU seconds a million samples delivered.
    func perMillion(_ seconds: Double) -> Double { delivered > 0 ? seconds / Double(delivered) * 1e6 : 0 }

    /// The time to 2xx below which `fraction` of the requests were answered (nearest rank).
    func percentile(_ fraction: Double) -> Double {
        guard !latencies.isEmpty else { return 0 }
        let rank = Int((fraction * Double(latencies.count)).rounded(.up)) - 1
        return latencies[min(latencies.count - 1, max(0, rank))]
    }
}

/// A sink's server for the bench, started once, emptied between runs so that no run writes
/// over what an earlier one left; `ceiling` measures what the server itself takes.
final class BenchTarget {
    let sink: BenchSink
    let dir: String
    private(set) var sinkLine = #"archive: {kind: file, path: "archive/{device}/{date}.ndjson"}"#
    private var server: Process?
    /// The sink's line with its server out of reach (a port nothing listens on), for a backfill:
    /// the journal fills, the sink waits. The file and http sinks have none (the line as it is).
    var unreachableSinkLine: String {
        sink == .influxdb ? BenchTarget.influxSinkLine(port: BenchMain.freePort(), database: influxDatabase) : sinkLine
    }

    /// The process of the sink's server when it runs apart (influxd, mosquitto), for its CPU time.
    var serverPID: Int32? { server?.processIdentifier }
    /// The CPU seconds a million records its server used while `ceiling` measured it (influxd).
    private(set) var ceilingCPUPerMillion: Double?
    private var port: UInt16 = 0
    private var postgres: BenchMain.Postgres?
    /// The PostgreSQL the postgres sink writes to (a fleet's state goes there too).
    var postgresDSN: String? { postgres?.dsn }
    private var webhook: WebhookReceiver?

    init(_ sink: BenchSink, dir: String) {
        self.sink = sink
        self.dir = dir
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        switch sink {
        case .file: break
        case .influxdb:
            // A real InfluxDB 1.x (Debian's influxd) on a free port.
            (server, port) = BenchMain.startInfluxd(dir: dir + "/influxd")
            sinkLine = BenchTarget.influxSinkLine(port: port, database: influxDatabase)
        case .mqtt:
            // Home Assistant states, and every record with publish_records, into a real mosquitto.
            (server, port) = BenchMain.startMosquitto(dir: dir + "/mosquitto")
            sinkLine = #"archive: {kind: mqtt, url: "mqtt://127.0.0.1:\#(port)", publish_records: true}"#
        case .postgres:
            // PostgreSQL 15 (Debian's) in a fresh cluster on a free port.
            let pg = BenchMain.Postgres(dir: dir + "/postgres")
            postgres = pg
            sinkLine = #"archive: {kind: postgres, dsn: "\#(pg.dsn)"}"#
        case .http:
            // A webhook receiver (NDJSON, 204) in this process, as n8n or Node-RED would be.
            guard let w = WebhookReceiver() else { fatalError("the bench's webhook receiver did not start") }
            webhook = w
            sinkLine = w.sinkLine
        }
    }

    private var influxDatabase = "health"
    private var runs = 0

    static func influxSinkLine(port: UInt16, database: String) -> String {
        #"archive: {kind: influxdb, url: "http://127.0.0.1:\#(port)", api: v1, database: \#(database), precision: s}"#
    }

    /// Empties what the last run wrote (the file sink's archive goes with healthgate's data dir).
    func reset() {
        switch sink {
        case .file, .mqtt, .http: break
        case .influxdb:
            // A database of its own for each run: influxd 1.6 answered every other run's writes
            // "database not found" after a DROP and CREATE of the same name in a row.
            BenchMain.influxQuery(port: port, "DROP DATABASE \(influxDatabase)")
            runs += 1
            influxDatabase = "health_\(runs)"
            BenchMain.influxQuery(port: port, "CREATE DATABASE \(influxDatabase)")
            sinkLine = BenchTarget.influxSinkLine(port: port, database: influxDatabase)
        case .postgres:
            postgres?.psql([
                "-d", "health", "-c",
                "DO $$ BEGIN IF to_regclass('healthgate.records') IS NOT NULL THEN "
                    + "TRUNCATE healthgate.records; END IF; END $$; CHECKPOINT"
            ])
        }
    }

    /// The server's own ceiling, in records a second, and how it was measured; `archive` is a
    /// file the file sink wrote (its lines are what the disk's ceiling writes).
    func ceiling(archive: String?) -> (rate: Double, how: String)? {
        switch sink {
        case .file:
            guard let archive, let rate = BenchMain.diskCeiling(lines: archive, dir: dir) else { return nil }
            return (rate, "the archive's own lines appended in 1 MiB writes, fdatasync after each")
        case .influxdb:
            guard let (rate, cpu) = BenchMain.influxCeiling(port: port, pid: server?.processIdentifier) else { return nil }
            ceilingCPUPerMillion = cpu
            return (rate, "points in gzip'd batches of 5,000 lines, one connection")
        case .mqtt:
            guard let rate = BenchMain.mosquittoCeiling(port: port) else { return nil }
            return (rate, "320-byte messages at QoS 1 in windows of 5,000, one client")
        case .postgres:
            guard let rate = postgres?.ceiling(rows: 200_000, batch: 20_000, dir: dir) else { return nil }
            return (rate, "COPY + upsert in batches of 20,000 rows, one connection")
        case .http:
            guard let rate = webhook?.ceiling() else { return nil }
            return (rate, "the sink's largest NDJSON body posted again and again, one keep-alive connection")
        }
    }

    func stop() {
        if let server {
            kill(server.processIdentifier, SIGTERM)
            server.waitUntilExit()
        }
        postgres?.stop()
        webhook?.stop()
    }
}

extension BenchMain {
    /// Starts `healthgate serve` on `config`, posts `template` (stamped per request) from
    /// `connections` keep-alive connections for `seconds` or until `maxSamples` are
    /// acknowledged, waits until the sink named `archive` has delivered them all, and stops it.
    /// `rate` > 0 paces each connection on a fixed schedule (an open loop). With `deliverAfter`
    /// (a backfill: `config`'s sink cannot reach its server), the server is stopped once the
    /// senders are done and started again on `deliverAfter`, the same data dir, its sink then
    /// reaching its server: end to end, CPU and peak RSS are that second process's, from its
    /// start until it has delivered every acknowledged sample (the journal's drain alone).
    static func measure(
        binary: String, config: String, dir: String, template: Body, connections: Int, seconds: Double,
        rate: Double = 0, maxSamples: Int = .max, run: Int = 0, peer: Int32? = nil,
        deliverAfter: String? = nil, fleetDeliver: String? = nil
    ) -> Measurement {
        let perBody = template.uuidOffsets.count
        // A run of so many samples has every request made — stamped and signed — before healthgate
        // starts, as the ceiling's own writer makes its batches before its clock starts: neither
        // load generator spends the run preparing what it sends (a phone does that on the phone,
        // not on the gateway's cores). What the senders still spend (sending, reading answers) is
        // the "load generator" figure. A run bounded by time alone stamps and signs as it goes.
        let planned = maxSamples == .max ? 0 : (maxSamples + perBody - 1) / perBody
        let prebuilt: [(head: [UInt8], body: [UInt8])]? =
            planned > 0 && planned * template.bytes.count <= 1 << 30
            ? (0..<planned).map { k in
                var body = template
                body.stamp(connection: k >> 24, request: k & 0xFF_FFFF, run: run)
                return (signedHead(body.bytes), body.bytes)
            }
            : nil
        // A fleet: the senders post to an ingest machine; a deliver machine (its own data dir)
        // says what the sink delivered; the CPU is theirs together.
        guard
            var (server, port) = startServe(
                binary: binary, config: config, dir: dir, arguments: fleetDeliver == nil ? [] : ["--role", "ingest"])
        else {
            fatalError("healthgate serve did not start")
        }
        let deliverer = fleetDeliver.map { c in
            guard let d = startServe(binary: binary, config: c, dir: dir + "/deliver", arguments: ["--role", "deliver"]) else {
                fatalError("healthgate serve --role deliver did not start")
            }
            return d
        }
        var metricsPort = deliverer?.1 ?? port
        func cpu(_ pid: Int32) -> Double { cpuSeconds(pid) + (deliverer.map { cpuSeconds($0.0.processIdentifier) } ?? 0) }
        var pid = server.processIdentifier
        usleep(300_000)
        var m = Measurement()
        m.idleRSSKiB = rssKiB(pid, "VmRSS")
        // One request, delivered, before the clock starts: healthgate warm — its type registry
        // loaded, its heap grown, its sink connected — as the server it is measured beside is (a
        // gateway runs for days; a run of ~1.5 s from a cold start counted its start-up). Not
        // counted anywhere. Not for a backfill (its first process cannot deliver), nor with
        // BENCH_COLD=1 (runs from a cold start, as before 2026-12-05).
        var warmDelivered = 0
        if deliverAfter == nil && ProcessInfo.processInfo.environment["BENCH_COLD"] != "1" {
            var warm = template
            warm.stamp(connection: 255, request: 0, run: run)
            _ = Connection(port: port).post(signedHead(warm.bytes), warm.bytes)
            let deadline = Date().addingTimeInterval(30)
            while sinkSent(port: metricsPort) < perBody && Date() < deadline { usleep(5_000) }
            warmDelivered = max(0, sinkSent(port: metricsPort))
        }
        var cpuBefore = cpu(pid)
        var loadBefore = cpuSeconds(getpid())
        var peerBefore = peer.map { cpuSeconds($0) } ?? 0

        let interval = rate > 0 ? Double(perBody * connections) / rate : 0
        let latencies = LatencyLog()
        let failures = LatencyLog()
        let budget = SampleBudget(maxSamples)
        let stopAt = Date().addingTimeInterval(seconds)
        let group = DispatchGroup()
        var started = Date()
        let serverPort = port
        for c in 0..<connections {
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                var body = template
                let conn = Connection(port: serverPort)
                var n = 0
                var next = Date().addingTimeInterval(interval * Double(c) / Double(max(1, connections)))
                while Date() < stopAt, let k = budget.take(perBody) {
                    if interval > 0 {
                        let wait = next.timeIntervalSinceNow
                        if wait > 0 { usleep(useconds_t(wait * 1e6)) }
                        next = next.addingTimeInterval(interval)
                    }
                    let head: [UInt8]
                    if let prebuilt, k < prebuilt.count {
                        head = prebuilt[k].head
                        body.bytes = prebuilt[k].body
                    } else {
                        body.stamp(connection: c, request: n, run: run)
                        head = signedHead(body.bytes)
                    }
                    n += 1
                    let t0 = DispatchTime.now().uptimeNanoseconds
                    guard let status = conn.post(head, body.bytes) else { failures.add(0); continue }
                    let dt = Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e6
                    if status == 200 { latencies.add(dt) } else { failures.add(Double(status)) }
                }
            }
        }
        m.peakRSSKiB = m.idleRSSKiB
        while group.wait(timeout: .now() + 0.1) == .timedOut { m.peakRSSKiB = max(m.peakRSSKiB, rssKiB(pid, "VmRSS")) }
        m.ackSeconds = Date().timeIntervalSince(started)
        m.latencies = latencies.sorted
        m.requests = m.latencies.count
        m.samples = m.requests * perBody
        m.bytes = m.requests * template.bytes.count
        m.failures = failures.count
        if let live = deliverAfter {
            kill(pid, SIGTERM)
            server.waitUntilExit()
            started = Date()
            loadBefore = cpuSeconds(getpid())
            peerBefore = peer.map { cpuSeconds($0) } ?? 0
            guard let again = startServe(binary: binary, config: live, dir: dir) else { fatalError("healthgate serve did not start again") }
            (server, port) = again
            metricsPort = port
            pid = server.processIdentifier
            cpuBefore = 0
            m.peakRSSKiB = 0
        }
        // End to end: until the sink has delivered every acknowledged sample.
        // At most 300 s, and 60 s without a sample more delivered is a stalled sink (its server
        // gone, say): the run ends there, its end-to-end rate what was delivered.
        // Asked (`/metrics`, ~0.4 ms of healthgate's CPU each) as seldom as the end allows to be
        // seen within 2 ms: half the time the rate so far says is left, between 2 and 100 ms —
        // every 20 ms, its 50 answers a second took ~2 % of a core from the run they measure.
        let drainDeadline = Date().addingTimeInterval(300)
        let drainStarted = Date()
        var progressed = (count: -1, at: Date())
        var first = -1
        while Date() < drainDeadline {
            m.peakRSSKiB = max(m.peakRSSKiB, rssKiB(pid, "VmRSS"))
            m.delivered = sinkSent(port: metricsPort) - warmDelivered
            if m.delivered >= m.samples { break }
            if first < 0 { first = m.delivered }
            if m.delivered != progressed.count {
                progressed = (m.delivered, Date())
            } else if Date().timeIntervalSince(progressed.at) > 60 {
                print("healthgate-bench: the sink delivered nothing for 60 s (\(m.delivered) of \(m.samples) samples): run ended")
                m.stalled = true
                break
            }
            let elapsed = Date().timeIntervalSince(drainStarted)
            let rate = elapsed > 0 && m.delivered > first ? Double(m.delivered - first) / elapsed : 0
            let left = rate > 0 ? Double(m.samples - m.delivered) / rate : 0.02
            usleep(useconds_t(min(0.1, max(0.002, left / 2)) * 1e6))
        }
        m.endToEndSeconds = Date().timeIntervalSince(started)
        m.peakRSSKiB = max(m.peakRSSKiB, rssKiB(pid, "VmHWM"))
        m.cpuSeconds = cpu(pid) - cpuBefore
        m.loadCPUSeconds = cpuSeconds(getpid()) - loadBefore
        m.peerCPUSeconds = peer.map { cpuSeconds($0) - peerBefore } ?? 0
        kill(pid, SIGTERM)
        server.waitUntilExit()
        if let (d, _) = deliverer {
            kill(d.processIdentifier, SIGTERM)
            d.waitUntilExit()
        }
        return m
    }

    /// Starts `healthgate serve` on `config` (written to `dir`/bench.yaml) and waits until it
    /// says where it listens; nil when it ends first.
    static func startServe(binary: String, config: String, dir: String, arguments: [String] = []) -> (Process, UInt16)? {
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try! config.write(toFile: dir + "/bench.yaml", atomically: true, encoding: .utf8)
        let server = Process()
        server.executableURL = URL(fileURLWithPath: binary)
        server.arguments = ["serve", "--config", dir + "/bench.yaml"] + arguments
        let out = Pipe()
        server.standardOutput = out
        // BENCH_SERVE_STDERR=path keeps the servers' logs (appended), to see why a run stalls.
        server.standardError =
            ProcessInfo.processInfo.environment["BENCH_SERVE_STDERR"].flatMap { path -> FileHandle? in
                _ = FileManager.default.createFile(atPath: path, contents: nil)
                return FileHandle(forWritingAtPath: path).map {
                    $0.seekToEndOfFile(); return $0
                }
            } ?? FileHandle.nullDevice
        try! server.run()
        var port: UInt16 = 0
        var text = ""
        while port == 0 {
            let d = out.fileHandleForReading.availableData
            if d.isEmpty {
                guard server.isRunning else {
                    print("healthgate serve did not start: \(text)")
                    return nil
                }
                usleep(10_000)
                continue
            }
            text += String(decoding: d, as: UTF8.self)
            for line in text.split(separator: "\n") where line.hasPrefix("listening on ") {
                port = line.split(separator: ":").last.flatMap { UInt16($0) } ?? 0
            }
        }
        out.fileHandleForReading.readabilityHandler = { h in _ = h.availableData }
        return (server, port)
    }

    /// The disk's own ceiling: the first MiB of `lines` (an archive the file sink wrote)
    /// appended to a file of its own in 1 MiB writes with an fdatasync after each, for 3 s; in
    /// lines a second.
    static func diskCeiling(lines path: String, dir: String) -> Double? {
        guard let data = FileManager.default.contents(atPath: path), !data.isEmpty else { return nil }
        var chunk = [UInt8](data.prefix(1 << 20))
        if let last = chunk.lastIndex(of: 0x0A) { chunk.removeSubrange((last + 1)...) }
        let linesInChunk = chunk.reduce(0) { $0 + ($1 == 0x0A ? 1 : 0) }
        guard linesInChunk > 0 else { return nil }
        let target = dir + "/disk-ceiling.ndjson"
        let fd = open(target, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0o600)
        guard fd >= 0 else { return nil }
        defer { close(fd); unlink(target) }
        let started = Date()
        var written = 0
        while Date().timeIntervalSince(started) < 3 {
            let n = chunk.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            guard n == chunk.count, fdatasync(fd) == 0 else { return nil }
            written += linesInChunk
        }
        return Double(written) / Date().timeIntervalSince(started)
    }
}

/// How many samples the senders of a run may still send, shared between them.
final class SampleBudget: @unchecked Sendable {
    private let lock = NSLock()
    private var left: Int
    private var taken = 0

    init(_ samples: Int) { left = samples }

    /// Takes `n` if any are left: the how-manieth take this is (from 0), or nil.
    func take(_ n: Int) -> Int? {
        lock.lock()
        defer { lock.unlock() }
        guard left > 0 else { return nil }
        left -= n
        taken += 1
        return taken - 1
    }
}
