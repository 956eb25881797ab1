import Foundation
import Gateway
import Glibc
import HealthgateCore

/// `make soak` (`healthgate-bench --soak SECONDS`): mixed traffic for a long time from several
/// senders — Syncky phones (signed native bodies), a `/v1/ingest` client and a Health Auto
/// Export phone — into three sinks (an NDJSON archive, a real influxd, a real mosquitto) while
/// the sinks' servers go away and come back and healthgate itself is restarted. Every minute it
/// prints the server's RSS and open descriptors; at the end it checks that both stayed flat and
/// that every acknowledged sample is in the archive (by its uuid) and went out to each sink.
enum Soak {
    struct Plan {
        var seconds: Double
        var phones = 3
        var samplesPerBody = 100
        /// Seconds between one phone's requests.
        var every = 1.0
        /// A sink server down for `outage` seconds every `outageEvery`; healthgate restarted every `restartEvery`.
        var outageEvery = 300.0
        var outage = 45.0
        var restartEvery = 900.0

        /// A shorter soak keeps its outages and restarts, closer together.
        init(seconds: Double) {
            self.seconds = seconds
            if seconds < 3600 {
                outageEvery = max(20, seconds / 6)
                outage = min(45, outageEvery / 3)
                restartEvery = max(40, seconds / 2.5)
            }
        }
    }

    final class Tally: @unchecked Sendable {
        let lock = NSLock()
        /// The (phone, request) stamps of acknowledged Syncky bodies.
        var synckyAcked: [(Int, Int)] = []
        var ingestAcked = 0
        var haeAcked = 0
        var refused: [Int: Int] = [:]
        var unanswered = 0

        func ack(_ body: () -> Void) { lock.lock(); body(); lock.unlock() }
    }

    static func run(binary: String, plan: Plan) {
        let dir = NSTemporaryDirectory() + "healthgate-soak-\(getpid())"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        var (influxd, influxPort) = BenchMain.startInfluxd(dir: dir + "/influxd")
        var (mosquitto, mqttPort) = BenchMain.startMosquitto(dir: dir + "/mosquitto")
        let port = UInt16.random(in: 30_000...39_999)
        let config = """
            listen: 127.0.0.1:\(port)
            data_dir: \(dir)/data
            receivers:
              phone:
                kind: syncky
                path: /syncky
                auth: {type: bearer, token: \(token)}
                hmac: {secret: \(secret)}
              chunks: {kind: ingest, auth: {type: bearer, token: soak-ingest-token-0123456789}}
              hae: {kind: hae, device: soak-hae, auth: {type: bearer, token: soak-hae-token-0123456789}}
            routes:
              - {name: everything, from: ["*"], to: [archive, influx]}
              - {name: home, from: [phone], to: [mqtt]}
            sinks:
              archive: {kind: file, path: "archive/{receiver}.ndjson"}
              influx: {kind: influxdb, url: "http://127.0.0.1:\(influxPort)", api: v1, database: health, precision: s, retry: {initial: 200ms, max: 5s}}
              mqtt: {kind: mqtt, url: "mqtt://127.0.0.1:\(mqttPort)", retry: {initial: 200ms, max: 5s}}
            """
        try! config.write(toFile: dir + "/soak.yaml", atomically: true, encoding: .utf8)
        var server = startServe(binary: binary, config: dir + "/soak.yaml", port: port)
        say(
            "soak: \(Int(plan.seconds)) s, \(plan.phones) Syncky phones (\(plan.samplesPerBody) samples a body every "
                + "\(plan.every) s), an ingest client and a Health Auto Export phone; influxd and mosquitto down for "
                + "\(Int(plan.outage)) s every \(Int(plan.outageEvery)) s (in turn), healthgate restarted every \(Int(plan.restartEvery)) s"
        )

        let tally = Tally()
        let stopAt = Date().addingTimeInterval(plan.seconds)
        let group = DispatchGroup()
        let template = BenchMain.makeBody(samples: plan.samplesPerBody)
        for phone in 0..<plan.phones {
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                var body = template
                let conn = Connection(port: port)
                var n = 0
                while Date() < stopAt {
                    body.stamp(connection: phone, request: n)
                    let status = conn.post(BenchMain.signedHead(body.bytes), body.bytes)
                    let request = n
                    tally.ack {
                        switch status {
                        case 200: tally.synckyAcked.append((phone, request))
                        case nil: tally.unanswered += 1
                        case let s?: tally.refused[s, default: 0] += 1
                        }
                    }
                    n += 1 // a refused or unanswered body is not sent again: its uuids are new next time
                    usleep(useconds_t(plan.every * 1e6))
                }
            }
        }
        // The ingest client: chunks of 50 samples, a second apart, each sample's uuid its own.
        sender(
            group, port: port, until: stopAt, every: 1, path: "/v1/ingest", token: "soak-ingest-token-0123456789",
            tally: tally, acknowledged: { $0.ingestAcked += 50 }
        ) { n in
            let samples = (0..<50).map { i in
                #"{"source_uuid":"soak-\#(n)-\#(i)","data_type":"stepCount","ts":"\#(Timestamp(seconds: 1_790_000_000 + Int64(n * 50 + i)).rfc3339())","value":\#(i),"unit":"count"}"#
            }
            return #"{"device_id":"soak-ingest","samples":["# + samples.joined(separator: ",") + "]}"
        }
        // The Health Auto Export phone: 20 step counts every two seconds, each at its own minute.
        sender(
            group, port: port, until: stopAt, every: 2, path: "/api/data", token: "soak-hae-token-0123456789",
            tally: tally, acknowledged: { $0.haeAcked += 20 }
        ) { n in
            let points = (0..<20).map { i in
                let t = Timestamp(seconds: 1_780_000_000 + Int64((n * 20 + i) * 60)).rfc3339()
                return #"{"date":"\#(t.prefix(10)) \#(t.dropFirst(11).prefix(8)) +0000","qty":\#(i + 1)}"#
            }
            return #"{"data":{"metrics":[{"name":"step_count","units":"count","data":["# + points.joined(separator: ",") + "]}]}}"
        }

        // The outages and restarts, and the server's RSS and descriptors every 10 s.
        let started = Date()
        var samples: [(t: Double, rssMB: Int, fds: Int)] = []
        var nextOutage = plan.outageEvery, nextRestart = plan.restartEvery, outages = 0, restarts = 0
        var lastPrint = -60.0
        while group.wait(timeout: .now() + 10) == .timedOut {
            let t = Date().timeIntervalSince(started)
            let pid = server.processIdentifier
            samples.append((t, BenchMain.rssKiB(pid, "VmRSS") / 1024, openDescriptors(pid)))
            if t - lastPrint >= 60 {
                lastPrint = t
                let a = tally.lock.withLock { (tally.synckyAcked.count * plan.samplesPerBody + tally.ingestAcked + tally.haeAcked) }
                say(
                    String(
                        format: "  %5.0f s: RSS %d MB, %d descriptors, %d samples acknowledged", t, samples.last!.rssMB,
                        samples.last!.fds, a))
            }
            if t >= nextOutage && t + plan.outage < plan.seconds {
                nextOutage += plan.outageEvery
                outages += 1
                if outages % 2 == 1 {
                    kill(influxd.processIdentifier, SIGKILL)
                    influxd.waitUntilExit()
                    Thread.sleep(forTimeInterval: plan.outage)
                    (influxd, influxPort) = BenchMain.startInfluxd(dir: dir + "/influxd", port: influxPort)
                } else {
                    kill(mosquitto.processIdentifier, SIGKILL)
                    mosquitto.waitUntilExit()
                    Thread.sleep(forTimeInterval: plan.outage)
                    (mosquitto, mqttPort) = BenchMain.startMosquitto(dir: dir + "/mosquitto", port: mqttPort)
                }
            }
            if t >= nextRestart && t + 60 < plan.seconds {
                nextRestart += plan.restartEvery
                restarts += 1
                kill(server.processIdentifier, SIGTERM)
                server.waitUntilExit()
                server = startServe(binary: binary, config: dir + "/soak.yaml", port: port)
            }
        }

        // Drained: nothing waits in any sink.
        let drainDeadline = Date().addingTimeInterval(300)
        var waiting = -1
        while Date() < drainDeadline {
            waiting = BenchMain.metric(port, "healthgate_sink_records_waiting")
            if waiting == 0 { break }
            sleep(1)
        }
        let sent: [(String, Int)] = ["archive", "influx", "mqtt"].map {
            ($0, BenchMain.metric(port, "healthgate_sink_records_sent_total", sink: $0))
        }
        kill(server.processIdentifier, SIGTERM)
        server.waitUntilExit()

        // Every acknowledged sample in the archive, by its uuid.
        let (acked, ingest, hae, refused, unanswered) = tally.lock.withLock {
            (tally.synckyAcked, tally.ingestAcked, tally.haeAcked, tally.refused, tally.unanswered)
        }
        var expected = Set<String>()
        expected.reserveCapacity(acked.count * plan.samplesPerBody)
        for (phone, request) in acked {
            let tag = String(format: "%08x", (phone << 24) | (request & 0xFFFFFF))
            for i in 0..<plan.samplesPerBody { expected.insert(tag + String(format: "-0000-4000-8000-%012d", i)) }
        }
        let archived = uuids(in: dir + "/data/archive", prefix: "phone")
        let missing = expected.subtracting(archived).count
        let ingestArchived = uuids(in: dir + "/data/archive", prefix: "chunks").count
        let haeArchived = uuids(in: dir + "/data/archive", prefix: "hae").count

        let settled = samples.filter { $0.t >= min(600, plan.seconds / 4) }
        let rss = settled.map(\.rssMB), fds = settled.map(\.fds)
        let total = acked.count * plan.samplesPerBody + ingest + hae
        say(
            String(
                format: "soak over %.0f s: %d samples acknowledged (%d Syncky, %d ingest, %d HAE), %d outages, %d restarts of healthgate",
                Date().timeIntervalSince(started), total, acked.count * plan.samplesPerBody, ingest, hae, outages, restarts))
        say(
            "refused: \(refused.isEmpty ? "none" : refused.map { "\($0.value) × \($0.key)" }.joined(separator: ", ")); "
                + "unanswered (connection lost, mostly during the restarts; not counted as acknowledged): \(unanswered)")
        say(
            "sent by the sinks (this last run of healthgate): "
                + sent.map { (name: String, n: Int) in "\(name) \(n)" }.joined(separator: ", ")
                + "; waiting at the end: \(waiting)")
        say(
            "the archive: \(expected.count - missing) of \(expected.count) acknowledged Syncky samples (missing \(missing)); "
                + "ingest \(ingestArchived) of \(ingest); HAE \(haeArchived) of \(hae)")
        if let lo = rss.min(), let hi = rss.max(), let flo = fds.min(), let fhi = fds.max() {
            say("after the first \(Int(settled.first?.t ?? 0)) s: RSS \(lo)–\(hi) MB, open descriptors \(flo)–\(fhi)")
        }
        let lost = missing > 0 || ingestArchived < ingest || haeArchived < hae || waiting != 0
        say(lost ? "SOAK FAILED: acknowledged samples are missing or still waiting" : "soak: nothing acknowledged was lost")
        // Flat: the last quarter's peak within a quarter (and 10 MB) of the first settled
        // quarter's, and no more descriptors than then, give or take a few connections.
        let quarter = max(1, settled.count / 4)
        let early = settled.prefix(quarter), late = settled.suffix(quarter)
        let grew =
            (late.map(\.rssMB).max() ?? 0) > (early.map(\.rssMB).max() ?? 0) * 5 / 4 + 10
            || (late.map(\.fds).min() ?? 0) > (early.map(\.fds).max() ?? 0) + 8
        say(grew ? "SOAK FAILED: RSS or descriptors grew (first quarter vs last, above)" : "soak: RSS and descriptors stayed flat")
        let failed = lost || grew
        kill(influxd.processIdentifier, SIGTERM)
        kill(mosquitto.processIdentifier, SIGTERM)
        influxd.waitUntilExit()
        mosquitto.waitUntilExit()
        try? FileManager.default.removeItem(atPath: dir)
        exit(failed ? 1 : 0)
    }

    /// A line to stdout at once (print's is buffered when stdout is a file: a soak's progress
    /// would show only at its end).
    static func say(_ line: String) {
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
    }

    /// A sender on a connection of its own: the JSON body `body(n)` for its n-th request every
    /// `every` seconds until `until`, with Bearer `token`; a 2xx counted by `acknowledged`.
    static func sender(
        _ group: DispatchGroup, port: UInt16, until: Date, every: Double, path: String, token: String,
        tally: Tally, acknowledged: @escaping @Sendable (Tally) -> Void, body: @escaping @Sendable (Int) -> String
    ) {
        group.enter()
        Thread.detachNewThread {
            defer { group.leave() }
            let conn = Connection(port: port)
            var n = 0
            while Date() < until {
                let bytes = Array(body(n).utf8)
                let head =
                    "POST \(path) HTTP/1.1\r\nHost: soak\r\nContent-Type: application/json\r\n"
                    + "Authorization: Bearer \(token)\r\nContent-Length: \(bytes.count)\r\n\r\n"
                let status = conn.post(Array(head.utf8), bytes)
                tally.ack {
                    switch status {
                    case let s? where s / 100 == 2: acknowledged(tally)
                    case nil: tally.unanswered += 1
                    case let s?: tally.refused[s, default: 0] += 1
                    }
                }
                n += 1
                usleep(useconds_t(every * 1e6))
            }
        }
    }

    static func startServe(binary: String, config: String, port: UInt16) -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: binary)
        p.arguments = ["serve", "--config", config]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try! p.run()
        let c = Connection(port: port)
        for _ in 0..<200 where c.get("/healthz") == nil { usleep(50_000) }
        return p
    }

    static func openDescriptors(_ pid: Int32) -> Int {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []).count
    }

    /// The distinct uuids of the NDJSON records in the files of `dir` whose names start with
    /// `prefix` (the file and its rotated pieces).
    static func uuids(in dir: String, prefix: String) -> Set<String> {
        var out = Set<String>()
        let key = Array(#""uuid":""#.utf8)
        for name in (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? [] where name.hasPrefix(prefix) {
            guard let data = FileManager.default.contents(atPath: dir + "/" + name) else { continue }
            for line in data.split(separator: 0x0A) {
                // "uuid":"…": the canonical record's field, as healthgate's one encoder writes it.
                guard let r = line.firstRange(of: key) else { continue }
                let rest = line[r.upperBound...]
                guard let end = rest.firstIndex(of: UInt8(ascii: "\"")) else { continue }
                out.insert(String(decoding: rest[..<end], as: UTF8.self))
            }
        }
        return out
    }
}
