import Foundation
import Glibc

/// `make bench` (`healthgate-bench --suite`): every sink (file, InfluxDB, PostgreSQL, MQTT) ×
/// bodies of 10 KB, 100 KB and 1 MB × 1, 8 and 64 senders, each run measured end to end and
/// beside its server's own ceiling measured in the same suite; then one markdown table, with the
/// machine it ran on and which targets it meets, printed, written to `--table`, and put into
/// `--readme` between its bench-suite markers.
enum Suite {
    struct Plan {
        var binary = ".build/release/healthgate"
        var sinks = BenchSink.allCases
        var bodies = [10_000, 100_000, 1_000_000]
        var senders = [1, 8, 64]
        /// The most one run sends for; it stops sooner once it has sent the sink's share.
        var seconds = 5.0
        var table: String?
        var readme: String?
        /// `--fluent-bit PATH` (`make bench FLUENT_BIT=…`): ingest side by side with it under wrk.
        var fluentBit: String?
        /// `--pairs N`: the file sink's 1 MB × 8 run taken N times with and without filter +
        /// convert + tag, in turn, for the transforms' target (the VM's speed drifts between runs
        /// by more than the gap measured: two pairs gave 0.79 and 1.02 within an hour).
        var pairs = 4
        /// The fleet's row (`--no-fleet`: none): with the postgres sink and 1 MB × 8 in the plan.
        var fleet = true

        /// Samples one run sends at most: about what the sink delivers in 5 to 10 s, so that
        /// the drain after the senders stop does not dominate the suite's time.
        func maxSamples(_ sink: BenchSink) -> Int {
            switch sink {
            case .file: 2_000_000
            case .influxdb: 600_000
            case .postgres: 400_000
            case .mqtt: 300_000
            case .http: 1_000_000
            }
        }
    }

    /// What a run is besides its load.
    enum RunKind: Equatable {
        /// The sink's plain route.
        case plain
        /// Through filter + convert + tag (the transforms' target).
        case transforms
        /// The senders done before the sink reaches its server; end to end is the drain alone.
        case backfill
    }

    /// One run of the suite: its body size, its senders, what it is.
    struct Scenario {
        let bodyBytes: Int
        let senders: Int
        var kind = RunKind.plain
        /// The server's own ceiling is measured again just before this run, for this run's ratio
        /// (InfluxDB's target: its ceiling moved by a third within an hour on this VM).
        var ceilingBefore = false
    }

    /// InfluxDB's 1 MB × 8 run, each just after a ceiling of its own, taken this many times: the
    /// target is read from the median ratio.
    static let influxPairs = 3

    struct Row {
        let sink: BenchSink
        let bodyBytes: Int
        let samplesPerBody: Int
        let senders: Int
        let kind: RunKind
        let m: Measurement
        var ceiling: Double?
        /// The CPU seconds a million records the sink's server used at its ceiling (influxd).
        var ceilingCPU: Double?
        /// The ceiling measured just before this run (`Scenario.ceilingBefore`), and its CPU.
        var ownCeiling: (rate: Double, cpu: Double?)?
    }

    static func run(_ plan: Plan) {
        let dir = NSTemporaryDirectory() + "healthgate-suite-\(getpid())"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let started = Date()
        var rows: [Row] = []
        var ceilings: [BenchSink: (Double, String)] = [:]
        var ceilingCPU: [BenchSink: Double] = [:]
        var runNumber = 0
        for sink in plan.sinks {
            let target = BenchTarget(sink, dir: dir + "/\(sink.rawValue)")
            var archive: String?
            var scenarios = plan.bodies.flatMap { b in plan.senders.map { Scenario(bodyBytes: b, senders: $0) } }
            // The transforms' cost: the file sink's 1 MB × 8 run again through filter + convert +
            // tag, then both once more in turn (A B A B: the VM's speed drifts between runs by more
            // than the gap measured); the target compares their medians.
            if sink == .file && plan.bodies.contains(1_000_000) && plan.senders.contains(8) && plan.pairs > 0 {
                let plain = Scenario(bodyBytes: 1_000_000, senders: 8),
                    shaped = Scenario(bodyBytes: 1_000_000, senders: 8, kind: .transforms)
                scenarios += [shaped]
                for _ in 1..<plan.pairs { scenarios += [plain, shaped] }
            }
            // A backfill into InfluxDB: the same load journaled while the sink cannot reach influxd,
            // then delivered by a healthgate started again — the sink's drain alone beside the ceiling.
            if sink == .influxdb && plan.bodies.contains(1_000_000) && plan.senders.contains(8) {
                // The target's run, each after a ceiling of its own, taken `influxPairs` times.
                for i in scenarios.indices where scenarios[i].bodyBytes == 1_000_000 && scenarios[i].senders == 8 {
                    scenarios[i].ceilingBefore = true
                }
                for _ in 1..<influxPairs { scenarios += [Scenario(bodyBytes: 1_000_000, senders: 8, ceilingBefore: true)] }
                scenarios += [Scenario(bodyBytes: 1_000_000, senders: 8, kind: .backfill, ceilingBefore: true)]
            }
            for scenario in scenarios {
                var own: (rate: Double, cpu: Double?)?
                if scenario.ceilingBefore, let c = target.ceiling(archive: nil) {
                    own = (c.rate, target.ceilingCPUPerMillion)
                    print(String(format: "%@: the server's own ceiling, just before the next run: %.0f records/s", sink.rawValue, c.rate))
                }
                let (bodyBytes, senders) = (scenario.bodyBytes, scenario.senders)
                let transforms = scenario.kind == .transforms, backfill = scenario.kind == .backfill
                runNumber += 1
                target.reset()
                let samples = samplesFor(bytes: bodyBytes)
                let template = BenchMain.makeBody(samples: samples)
                let runDir = dir + "/run-\(runNumber)"
                let config = BenchMain.config(dataDir: runDir + "/data", transforms: transforms, sinkLine: target.sinkLine)
                // A backfill's first healthgate has the sink's line with its server out of reach.
                let first =
                    backfill
                    ? BenchMain.config(dataDir: runDir + "/data", transforms: transforms, sinkLine: target.unreachableSinkLine) : config
                let m = BenchMain.measure(
                    binary: plan.binary, config: first, dir: runDir, template: template,
                    connections: senders, seconds: plan.seconds, maxSamples: plan.maxSamples(sink), run: runNumber,
                    peer: target.serverPID, deliverAfter: backfill ? config : nil)
                var row = Row(sink: sink, bodyBytes: bodyBytes, samplesPerBody: samples, senders: senders, kind: scenario.kind, m: m)
                row.ownCeiling = own
                print(line(row))
                fflush(nil) // each run as it ends, also into a pipe or a file
                rows.append(row)
                if sink == .file && archive == nil { archive = keepArchive(runDir + "/data", into: dir) }
                try? FileManager.default.removeItem(atPath: runDir)
            }
            if let c = target.ceiling(archive: archive) {
                ceilings[sink] = c
                ceilingCPU[sink] = target.ceilingCPUPerMillion
                print(String(format: "%@: the server's own ceiling (%@): %.0f records/s", sink.rawValue, c.1, c.0))
            }
            target.stop()
        }
        for i in rows.indices {
            rows[i].ceiling = rows[i].ownCeiling?.rate ?? ceilings[rows[i].sink]?.0
            rows[i].ceilingCPU = rows[i].ownCeiling.map { $0.cpu } ?? ceilingCPU[rows[i].sink]
        }
        var fleetLines = ""
        if plan.fleet && plan.sinks.contains(.postgres) && plan.bodies.contains(1_000_000) && plan.senders.contains(8),
            let r = FleetBench.run(binary: plan.binary, dir: dir + "/fleet", seconds: plan.seconds, maxSamples: plan.maxSamples(.postgres))
        {
            let one = rows.first { $0.sink == .postgres && $0.bodyBytes == 1_000_000 && $0.senders == 8 && $0.kind == .plain }
            print(
                line(
                    Row(
                        sink: .postgres, bodyBytes: 1_000_000, samplesPerBody: samplesFor(bytes: 1_000_000), senders: 8, kind: .plain,
                        m: r.m)) + " (fleet)")
            fleetLines = FleetBench.report(r, oneMachine: one, postgresCeiling: ceilings[.postgres]?.0)
        }
        var sideBySide: (lines: [String], target: String)?
        if let fluentBit = plan.fluentBit {
            sideBySide = SideBySide.run(healthgate: plan.binary, fluentBit: fluentBit, dir: dir + "/side-by-side")
            for l in sideBySide!.lines { print(l) }
        }
        let text =
            report(
                rows, plan: plan, ceilings: ceilings, sideBySide: sideBySide,
                minutes: Date().timeIntervalSince(started) / 60) + fleetLines
        print("")
        print(text)
        if let path = plan.table { try? text.write(toFile: path, atomically: true, encoding: .utf8) }
        if let path = plan.readme { putIntoReadme(text, path: path) }
    }

    /// The samples a native body of about `bytes` holds.
    static func samplesFor(bytes: Int) -> Int {
        let a = BenchMain.makeBody(samples: 100).bytes.count, b = BenchMain.makeBody(samples: 200).bytes.count
        let perSample = Double(b - a) / 100
        return max(1, Int((Double(bytes - (a - Int(perSample * 100)))) / perSample))
    }

    /// Copies the first archive file the file sink wrote (for the disk's ceiling).
    static func keepArchive(_ dataDir: String, into dir: String) -> String? {
        guard let walker = FileManager.default.enumerator(atPath: dataDir) else { return nil }
        for case let path as String in walker where path.hasSuffix(".ndjson") && path.contains("archive/") {
            let kept = dir + "/archive-sample.ndjson"
            try? FileManager.default.removeItem(atPath: kept)
            guard (try? FileManager.default.copyItem(atPath: dataDir + "/" + path, toPath: kept)) != nil else { continue }
            return kept
        }
        return nil
    }

    static func size(_ bytes: Int) -> String { bytes >= 1_000_000 ? "\(bytes / 1_000_000) MB" : "\(bytes / 1_000) KB" }

    static func thousands(_ v: Double) -> String {
        let n = Int(v.rounded())
        var s = String(n)
        var i = s.count - 3
        while i > 0 { s.insert(",", at: s.index(s.startIndex, offsetBy: i)); i -= 3 }
        return s
    }

    static func line(_ r: Row) -> String {
        String(
            format: "%@ %@ × %d%@: %d requests, %@ samples/s acknowledged, %@ end to end, p50/p99/p99.9 %.1f/%.1f/%.1f ms, "
                + "%.2f CPU s a million%@, peak RSS %d MB, %d failed",
            r.sink.rawValue, size(r.bodyBytes), r.senders,
            r.kind == .transforms ? " (transforms)" : r.kind == .backfill ? " (backfill)" : "", r.m.requests,
            thousands(r.m.ackRate), thousands(r.m.endToEndRate), r.m.percentile(0.5), r.m.percentile(0.99),
            r.m.percentile(0.999), r.m.cpuPerMillion,
            // Two decimals here (the table keeps one): runs of two builds are compared by these.
            r.m.peerCPUSeconds > 0 ? String(format: " (the server %.2f)", r.m.perMillion(r.m.peerCPUSeconds)) : "",
            r.m.peakRSSKiB / 1024, r.m.failures)
    }

    /// The machine, the table and the targets, as markdown.
    static func report(
        _ rows: [Row], plan: Plan, ceilings: [BenchSink: (Double, String)],
        sideBySide: (lines: [String], target: String)? = nil, minutes: Double
    ) -> String {
        var out = "Produced by `make bench` on \(isoDate()) in \(max(1, Int(minutes.rounded()))) min. \(machine())\n\n"
        out +=
            "| sink | body (samples) | senders | requests | acknowledged samples/s | MB/s | end to end samples/s "
            + "| server's own ceiling, records/s | end to end / ceiling | time to 2xx p50 / p99 / p99.9 ms "
            + "| server CPU s a million samples | peak RSS MB | failed |\n"
        out += "|" + String(repeating: " --- |", count: 13) + "\n"
        // A run taken again for a target (the transforms' pairs, InfluxDB's runs beside their own
        // ceilings) is in the target's line, not the table: the table shows each run's first.
        for (i, r) in rows.enumerated() {
            if rows[..<i].contains(where: {
                $0.sink == r.sink && $0.bodyBytes == r.bodyBytes && $0.senders == r.senders && $0.kind == r.kind
            }) {
                continue
            }
            let ceiling = r.ceiling.map(thousands) ?? "—"
            // One decimal: 79.6 % is under the line, and "80 %" said it was on it.
            let share = r.ceiling.map { String(format: "%.1f %%", r.m.endToEndRate / $0 * 100) } ?? "—"
            out +=
                "| \(r.sink.rawValue)\(r.kind == .transforms ? " + filter, convert, tag" : r.kind == .backfill ? ", backfill (the drain alone)" : "") | \(size(r.bodyBytes)) (\(thousands(Double(r.samplesPerBody)))) "
                + "| \(r.senders) | \(r.m.requests) | \(thousands(r.m.ackRate)) | " + String(format: "%.1f", r.m.megabytesPerSecond)
                + " | \(thousands(r.m.endToEndRate))\(r.m.stalled ? " (stalled: \(thousands(Double(r.m.delivered))) of \(thousands(Double(r.m.samples))) delivered)" : "") | \(ceiling) | \(share) | "
                + String(format: "%.1f / %.1f / %.1f", r.m.percentile(0.5), r.m.percentile(0.99), r.m.percentile(0.999))
                + " | " + String(format: "%.1f", r.m.cpuPerMillion) + " | \(r.m.peakRSSKiB / 1024) | \(r.m.failures) |\n"
        }
        out +=
            "\nEnd to end: from the first request until the sink had delivered every acknowledged sample ("
            + BenchSink.allCases.map { "\($0.rawValue): \($0.delivered)" }.joined(separator: "; ") + "). "
            + "Each run is a fresh `healthgate serve` (fsync before every 2xx) with one Syncky receiver (signed native bodies) "
            + "and one route, warmed by one request delivered before the clock starts (not counted; a backfill's drain starts cold); "
            + "its senders post on keep-alive connections, each again as soon as it is answered, for "
            + String(format: "%.0f s", plan.seconds) + " or until the run has sent about what its sink delivers in 5–10 s ("
            + plan.sinks.map { "\($0.rawValue) \(thousands(Double(plan.maxSamples($0))))" }.joined(separator: ", ")
            + " samples), so time to 2xx is the senders' count over the throughput, not a paced latency. The ceilings, "
            + "measured in the same suite without healthgate: "
            + ceilings.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\($0.key.rawValue): \($0.value.1)" }.joined(separator: "; ")
            + " (InfluxDB's 1 MB × 8 rows: each beside the ceiling measured just before it; the target's runs in its line)"
            + ". p99.9 is the slowest answer when a run has fewer than 1,000 requests.\n\n"
        if let sideBySide { out += sideBySide.lines.joined(separator: "\n") + "\n\n" }
        out += "Targets:\n"
        for t in targets(rows) { out += "- \(t)\n" }
        out +=
            "- "
            + (sideBySide?.target ?? "Ingest ≥ 3× Fluent Bit with p99 under 50 ms: not measured (no Fluent Bit given: "
                + "`make bench FLUENT_BIT=/path/to/fluent-bit`)") + "\n"
        return out
    }

    /// What the cores leave healthgate at 80 % of influxd's ceiling, beside what influxd itself
    /// and the load generator take of them, all in CPU seconds a million samples; and what it used.
    static func cpuBudget(_ r: Row, ceiling: Double, influxd: Double) -> String {
        let cores = Double(ProcessInfo.processInfo.activeProcessorCount)
        let all = cores * 1e6 / (0.8 * ceiling)
        let load = r.m.perMillion(r.m.loadCPUSeconds)
        return String(
            format: ". The CPU it takes, in CPU seconds a million samples: at 80 %% of the ceiling the %.0f cores give %.1f; "
                + "influxd used %.1f at its ceiling (%.1f in this run) and the load generator %.1f here, which leaves "
                + "healthgate — ingest and delivery together — %.1f; it used %.1f",
            cores, all, influxd, r.m.perMillion(r.m.peerCPUSeconds), load, max(0, all - influxd - load), r.m.cpuPerMillion)
    }

    /// Which of the issues' targets the rows meet, said plainly.
    static func targets(_ rows: [Row]) -> [String] {
        var said: [String] = []
        func row(_ sink: BenchSink, _ body: Int, _ senders: Int, _ kind: RunKind = .plain) -> Row? {
            rows.first { $0.sink == sink && $0.bodyBytes == body && $0.senders == senders && $0.kind == kind }
        }
        // Each pair: a ceiling, then the run; the target is the median pair's ratio.
        let runs = rows.filter {
            $0.sink == .influxdb && $0.bodyBytes == 1_000_000 && $0.senders == 8 && $0.kind == .plain && $0.ceiling != nil
        }
        func ratio(_ r: Row) -> Double { r.m.endToEndRate / r.ceiling! }
        if !runs.isEmpty {
            let r = runs.sorted { ratio($0) < ratio($1) }[runs.count / 2], c = r.ceiling!
            let share = ratio(r)
            let each = runs.map {
                String(format: "%.1f %% (%@ of %@)", ratio($0) * 100, thousands($0.m.endToEndRate), thousands($0.ceiling!))
            }
            said.append(
                String(
                    format: "InfluxDB end to end ≥ 80 %% of influxd's own ceiling (1 MB × 8): %@ (%.1f %%, the median of %d runs each "
                        + "just after a ceiling of its own: %@)",
                    share >= 0.8 ? "met" : "not met", share * 100, runs.count, each.joined(separator: ", "))
                    + (r.ceilingCPU.map { cpuBudget(r, ceiling: c, influxd: $0) } ?? "")
                    + (row(.influxdb, 1_000_000, 8, .backfill).map {
                        String(
                            format: "; a backfill — the same load journaled first, then delivered by itself — %.0f %% of the ceiling "
                                + "measured just before it (%@ samples/s, %.1f CPU s a million)",
                            $0.m.endToEndRate / ($0.ceiling ?? c) * 100,
                            thousands($0.m.endToEndRate), $0.m.cpuPerMillion)
                    } ?? ""))
        }
        func rates(_ kind: RunKind) -> [Double] {
            rows.filter { $0.sink == .file && $0.bodyBytes == 1_000_000 && $0.senders == 8 && $0.kind == kind }
                .map(\.m.endToEndRate)
        }
        let plain = rates(.plain), shaped = rates(.transforms)
        if !plain.isEmpty, !shaped.isEmpty, median(plain) > 0 {
            let ratio = median(shaped) / median(plain)
            let each = zip(plain, shaped).map { String(format: "%.2f", $1 / $0) }.joined(separator: ", ")
            let rates = zip(plain, shaped).map { "\(thousands($0)) / \(thousands($1))" }.joined(separator: ", ")
            said.append(
                String(
                    format: "Transforms within 10 %% of the plain run (file, 1 MB × 8, end to end, medians of %d runs each "
                        + "taken in turn): %@ (%.2f of plain; pair by pair %@; plain / through the three, samples/s: %@)",
                    min(plain.count, shaped.count), ratio >= 0.9 ? "met" : "not met", ratio, each, rates))
        }
        // Issue 15's load is ~100 KB bodies from 20 connections; 64 senders of 1 MB hold 64 MB of bodies in flight.
        let hundred = rows.filter { $0.bodyBytes == 100_000 && $0.kind == .plain }
        if let peak = hundred.map(\.m.peakRSSKiB).max() {
            let all = rows.map(\.m.peakRSSKiB).max() ?? peak
            said.append(
                "Peak RSS under load ≤ 100 MB with 100 KB bodies: \(peak / 1024 <= 100 ? "met" : "not met") (at most \(peak / 1024) MB; "
                    + "\(all / 1024) MB at most in the whole suite, where 64 senders of 1 MB bodies have 64 MB in flight)")
        }
        let files = hundred.filter { $0.sink == .file }
        if !files.isEmpty {
            let each = files.map {
                String(format: "%d %@ %.0f ms", $0.senders, $0.senders == 1 ? "sender" : "senders", $0.m.percentile(0.99))
            }
            let all = files.allSatisfy { $0.m.percentile(0.99) < 50 }
            said.append(
                "p99 time to 2xx under 50 ms with 100 KB bodies (file sink, signed Syncky bodies, closed loop): "
                    + "\(all ? "met" : "not met everywhere") (\(each.joined(separator: ", ")))")
        }
        return said
    }

    static func median(_ v: [Double]) -> Double {
        let s = v.sorted()
        guard !s.isEmpty else { return 0 }
        return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
    }

    static func isoDate() -> String {
        let f = DateFormatter()
        f.dateFormat = "yyyy-MM-dd"
        f.timeZone = TimeZone(identifier: "UTC")
        return f.string(from: Date())
    }

    /// The CPU, cores, memory, kernel and OS, and the servers' versions.
    static func machine() -> String {
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model =
            cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }?
            .split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "unknown CPU"
        let meminfo = (try? String(contentsOfFile: "/proc/meminfo", encoding: .utf8)) ?? ""
        let memKiB =
            meminfo.split(separator: "\n").first { $0.hasPrefix("MemTotal") }?
            .split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        let os =
            ((try? String(contentsOfFile: "/etc/os-release", encoding: .utf8)) ?? "").split(separator: "\n")
            .first { $0.hasPrefix("PRETTY_NAME=") }?.dropFirst(12).trimmingCharacters(in: CharacterSet(charactersIn: "\"")) ?? "Linux"
        var u = utsname()
        uname(&u)
        let kernel = withUnsafeBytes(of: &u.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        let versions = [
            ("influxd", ["/usr/bin/influxd", "version"]), ("mosquitto", ["/usr/sbin/mosquitto", "-h"]),
            ("PostgreSQL", [BenchMain.Postgres.binDir() + "/postgres", "--version"])
        ]
        .compactMap { name, cmd in firstVersion(cmd).map { "\(name) \($0)" } }
        return
            "\(model), \(ProcessInfo.processInfo.activeProcessorCount) cores, \(String(format: "%.1f", Double(memKiB) / 1024 / 1024)) GiB of memory, "
            + "\(os), Linux \(kernel); " + versions.joined(separator: ", ")
            + "; the load generator runs on the same cores as healthgate and the servers."
    }

    /// The first version-looking word a command prints.
    static func firstVersion(_ command: [String]) -> String? {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: command[0])
        p.arguments = Array(command.dropFirst())
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        guard (try? p.run()) != nil else { return nil }
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        let words = text.split { $0 == " " || $0 == "\n" || $0 == "," }.map { $0.hasPrefix("v") ? $0.dropFirst() : $0 }
        return words.first { $0.first?.isNumber == true && $0.contains(".") }.map(String.init)
    }

    static let begin = "<!-- bench-suite:begin -->", end = "<!-- bench-suite:end -->"

    /// Replaces what stands between the bench-suite markers of the file `--readme` names (docs/benchmarks.md) with `text`.
    static func putIntoReadme(_ text: String, path: String) {
        guard let readme = try? String(contentsOfFile: path, encoding: .utf8),
            let a = readme.range(of: begin), let b = readme.range(of: end), a.upperBound <= b.lowerBound
        else {
            print("\(path) has no \(begin) … \(end) markers: the table is not put into it")
            return
        }
        let updated = readme[..<a.upperBound] + "\n" + text + readme[b.lowerBound...]
        try? String(updated).write(toFile: path, atomically: true, encoding: .utf8)
        print("the table is in \(path)")
    }
}
