import Foundation
import Glibc

/// Ingest side by side with Fluent Bit, as issue 15 measures it: `wrk` (2 threads, 20
/// connections, 10 s) POSTs one ~100 KB JSON body of 480 samples again and again, first to
/// healthgate's ingest API (`/v1/ingest`, a bearer token; the records journaled and fdatasynced
/// before every 2xx, the file sink archiving them) and then to a Fluent Bit given by path (its
/// `http` input, the same 480 samples as a JSON array, its `file` output; memory buffer, no
/// fsync). Prints, for each, records/s and p99 time to answer, and their ratio. Run in `rounds`
/// alternating pairs (healthgate, then Fluent Bit, each started afresh after a `sync`): on a
/// shared VM one pair can land in a slow second of either, so the target is read from the
/// median pair, and every pair is printed.
enum SideBySide {
    struct Result {
        var requestsPerSecond = 0.0
        var p99ms = 0.0
        var errors = 0
        var peakRSSMB = 0
        var records: Double { requestsPerSecond * Double(SideBySide.samples) }
    }

    static let samples = 480
    static let wrkArguments = ["-t2", "-c20", "-d10s", "--latency"]
    static let rounds = 3

    /// The sample objects both are sent, each ~210 bytes.
    static func sampleObjects(count: Int = samples) -> [String] {
        let types = BenchMain.sampleTypes
        return (0..<count).map { i in
            let (type, unit, value) = types[i % types.count]
            let dataType =
                [
                    "heart_rate": "heartRate", "steps": "stepCount", "active_energy_burned": "activeEnergyBurned",
                    "distance_walking_running": "distanceWalkingRunning"
                ][type] ?? type
            return String(
                format:
                    #"{"source_uuid":"%08X-0000-4000-8000-%012d","data_type":"%@","ts":"2026-10-14T%02d:%02d:00Z","value":%@,"unit":"%@","source_device":"Apple Watch","source_bundle":"com.apple.health"}"#,
                i &* 2_654_435_761 & 0xFFFF_FFFF, i, dataType, (i / 60) % 24, i % 60, value, unit)
        }
    }

    /// An ingest API chunk (`POST /v1/ingest`) of these sample objects.
    static func ingestBody(_ objects: [String]) -> String {
        #"{"device_id":"bench-phone","time_zone":"UTC","samples":["# + objects.joined(separator: ",") + "]}"
    }

    /// Both runs, and the lines of markdown that say what they measured.
    static func run(healthgate: String, fluentBit: String, dir: String) -> (lines: [String], target: String) {
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let objects = sampleObjects()
        let hgBody = ingestBody(objects)
        let fbBody = "[" + objects.map { "{\"device_id\":\"bench-phone\"," + $0.dropFirst() }.joined(separator: ",") + "]"
        try? hgBody.write(toFile: dir + "/healthgate.json", atomically: true, encoding: .utf8)
        try? fbBody.write(toFile: dir + "/fluent-bit.json", atomically: true, encoding: .utf8)
        try? """
        -- POSTs the body in BENCH_BODY, with BENCH_AUTH as its Authorization when given.
        local f = assert(io.open(os.getenv("BENCH_BODY"), "rb"))
        wrk.method = "POST"
        wrk.body = f:read("*a")
        f:close()
        wrk.headers["Content-Type"] = "application/json"
        local auth = os.getenv("BENCH_AUTH")
        if auth and #auth > 0 then wrk.headers["Authorization"] = auth end
        """.write(toFile: dir + "/post.lua", atomically: true, encoding: .utf8)

        var pairs: [(hg: Result, fb: Result)] = []
        var fbRan = false
        for round in 0..<rounds {
            // What the rounds before left to write back is written now, not during this one.
            sync()
            sleep(1)
            let hg = runHealthgate(healthgate, dir: dir, round: round)
            sync()
            sleep(1)
            let fb = runFluentBit(fluentBit, dir: dir)
            fbRan = fbRan || fb != nil
            pairs.append((hg, fb ?? Result()))
        }
        let version = Suite.firstVersion([fluentBit, "--version"]) ?? "?"
        var lines = [
            "Ingest side by side with Fluent Bit \(version) (`make bench FLUENT_BIT=…`): `wrk \(wrkArguments.joined(separator: " "))` "
                + "POSTing one \(hgBody.utf8.count / 1000) KB body of \(samples) samples again and again; healthgate's ingest API "
                + "journals and fdatasyncs each before its 2xx and archives to the file sink, Fluent Bit's http input takes the "
                + "same samples as a JSON array into its file output (memory buffer, no fsync). \(rounds) pairs in turn, each server "
                + "started afresh after a `sync`; the target is read from the median pair.", "",
            "| | requests/s | records/s | p99 ms | peak RSS MB | failed |", "| --- | --- | --- | --- | --- | --- |"
        ]
        for (k, pair) in pairs.enumerated() {
            for (name, r) in [("healthgate", pair.hg), ("Fluent Bit", pair.fb)] {
                lines.append(
                    "| \(name), pair \(k + 1) | " + String(format: "%.0f", r.requestsPerSecond) + " | \(Suite.thousands(r.records)) | "
                        + String(format: "%.1f", r.p99ms) + " | \(r.peakRSSMB) | \(r.errors) |")
            }
        }
        func ratio(_ p: (hg: Result, fb: Result)) -> Double { p.fb.records > 0 ? p.hg.records / p.fb.records : 0 }
        let median = pairs.sorted { ratio($0) < ratio($1) }[pairs.count / 2]
        let p99 = pairs.map(\.hg.p99ms).sorted()[pairs.count / 2]
        let rss = pairs.map(\.hg.peakRSSMB).max() ?? 0
        let errors = pairs.map(\.hg.errors).reduce(0, +)
        let metIn = pairs.filter { ratio($0) >= 3 && $0.hg.p99ms < 50 }.count
        let met = fbRan && ratio(median) >= 3 && p99 < 50 && errors == 0 && rss <= 100
        let target =
            fbRan
            ? String(
                format:
                    "Ingest ≥ 3× Fluent Bit with p99 under 50 ms and peak RSS ≤ 100 MB (wrk, 100 KB bodies): %@ (the median of %d pairs: %.2f×, p99 %.1f ms; %d MB at most; both met in %d of the %d pairs: %@)",
                met ? "met" : "not met", pairs.count, ratio(median), p99, rss, metIn, pairs.count,
                pairs.map { String(format: "%.2f× at %.1f ms", ratio($0), $0.hg.p99ms) }.joined(separator: ", "))
            : "Ingest ≥ 3× Fluent Bit: not measured (\(fluentBit) did not start or did not listen)"
        return (lines, target)
    }

    /// healthgate: the ingest API into the file sink, fsync before every 2xx; a data dir of its
    /// own each round, removed after it (10 s of archive is a few GB).
    static func runHealthgate(_ healthgate: String, dir: String, round: Int) -> Result {
        let data = "\(dir)/data-\(round)"
        let config = """
            listen: 127.0.0.1:0
            data_dir: \(data)
            receivers:
              app: {kind: ingest, auth: {type: bearer, token: \(token)}, max_body: 1MB}
            routes:
              - {name: archive, from: ["*"], to: [archive]}
            sinks:
              archive: {kind: file, path: "archive/{device}/{date}.ndjson"}
            """
        var hg = Result()
        if let (server, port) = BenchMain.startServe(binary: healthgate, config: config, dir: dir) {
            hg = wrk(url: "http://127.0.0.1:\(port)/v1/ingest", body: dir + "/healthgate.json", auth: "Bearer \(token)", dir: dir)
            hg.peakRSSMB = BenchMain.rssKiB(server.processIdentifier, "VmHWM") / 1024
            kill(server.processIdentifier, SIGTERM)
            server.waitUntilExit()
        }
        try? FileManager.default.removeItem(atPath: data)
        return hg
    }

    /// Fluent Bit: http input → file output, memory buffer, no fsync; nil when it did not start
    /// or did not listen. Its output is removed after it.
    static func runFluentBit(_ fluentBit: String, dir: String) -> Result? {
        let fbPort = BenchMain.freePort()
        try? FileManager.default.createDirectory(atPath: dir + "/fb-out", withIntermediateDirectories: true)
        try? """
        [SERVICE]
            flush        1
            log_level    warn
            http_server  off
        [INPUT]
            name         http
            listen       127.0.0.1
            port         \(fbPort)
            tag          bench
            storage.type memory
            http2        off
        [OUTPUT]
            name    file
            match   *
            path    \(dir)/fb-out
            file    bench.log
            format  plain
        """.write(toFile: dir + "/fluent-bit.conf", atomically: true, encoding: .utf8)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: fluentBit)
        p.arguments = ["-c", dir + "/fluent-bit.conf"]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        guard (try? p.run()) != nil else { return nil }
        var fb: Result?
        if waitForPort(fbPort) {
            var r = wrk(url: "http://127.0.0.1:\(fbPort)/", body: dir + "/fluent-bit.json", auth: "", dir: dir)
            r.peakRSSMB = BenchMain.rssKiB(p.processIdentifier, "VmHWM") / 1024
            fb = r
        }
        kill(p.processIdentifier, SIGTERM)
        p.waitUntilExit()
        try? FileManager.default.removeItem(atPath: dir + "/fb-out")
        return fb
    }

    static func waitForPort(_ port: UInt16) -> Bool {
        for _ in 0..<100 {
            if Connection(port: port).open() { return true }
            usleep(100_000)
        }
        return false
    }

    /// One wrk run, its requests/s, p99 and failures read from what it prints.
    static func wrk(url: String, body: String, auth: String, dir: String) -> Result {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/wrk")
        p.arguments = wrkArguments + ["-s", dir + "/post.lua", url]
        var env = ProcessInfo.processInfo.environment
        env["BENCH_BODY"] = body
        env["BENCH_AUTH"] = auth
        p.environment = env
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        guard (try? p.run()) != nil else {
            print("wrk did not start (apt-get install wrk)")
            return Result()
        }
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        return parse(text)
    }

    /// What wrk printed: `Requests/sec:`, the `99%` line of `--latency`, non-2xx answers and
    /// socket errors.
    static func parse(_ text: String) -> Result {
        var r = Result()
        for raw in text.split(separator: "\n") {
            let words = raw.split(separator: " ", omittingEmptySubsequences: true)
            guard let first = words.first else { continue }
            if first == "Requests/sec:", words.count > 1 { r.requestsPerSecond = Double(words[1]) ?? 0 }
            if first == "99%", words.count > 1 { r.p99ms = milliseconds(String(words[1])) }
            if raw.contains("Non-2xx or 3xx responses:"), let n = words.last.flatMap({ Int($0) }) { r.errors += n }
            if first == "Socket", raw.contains("errors:") {
                r.errors += words.compactMap { Int($0.trimmingCharacters(in: CharacterSet(charactersIn: ","))) }.reduce(0, +)
            }
        }
        return r
    }

    /// wrk's durations: `812.00us`, `4.89ms`, `1.02s`, `2.00m`.
    static func milliseconds(_ s: String) -> Double {
        for (unit, factor) in [("us", 0.001), ("ms", 1.0), ("s", 1000.0), ("m", 60_000.0)] where s.hasSuffix(unit) {
            return (Double(s.dropLast(unit.count)) ?? 0) * factor
        }
        return Double(s) ?? 0
    }
}
