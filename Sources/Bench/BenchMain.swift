import HealthgateCrypto
import Foundation
import HTTPDelivery
import SinkInfluxDB
import SinkMQTT
import SinkPostgres
import Gateway
import Glibc

let token = "bench_token_0123456789abcdefghijklmnopqrstuvwxyz"
let secret = "whsec_benchbenchbenchbenchbenchbenchbenchben"

enum BenchMain {
    /// One run with the options' load into one sink, printed, beside the sink's server's own
    /// ceiling when it has one.
    static func run(_ o: BenchOptions) {
        let dir = NSTemporaryDirectory() + "healthgate-bench-\(getpid())"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let sink: BenchSink = o.influx ? .influxdb : o.mqtt ? .mqtt : o.postgres ? .postgres : o.http ? .http : .file
        let target = BenchTarget(sink, dir: dir)
        defer { target.stop() }
        let template = makeBody(samples: o.samplesPerBody)
        print(
            "healthgate bench: \(o.connections) connections × \(Int(o.seconds)) s, bodies of "
                + "\(template.bytes.count) bytes with \(o.samplesPerBody) samples, "
                + (o.influx
                    ? "into InfluxDB 1.x (influxd on loopback)"
                    : o.mqtt
                        ? "into mosquitto (mqtt sink, QoS 1, states and every record)"
                        : o.postgres
                            ? "into PostgreSQL 15 (postgres sink: COPY and upsert)"
                            : o.http ? "into a webhook receiver (http sink, NDJSON)" : "file sink with fsync")
                + (o.transforms ? ", through filter + convert + tag" : "")
                + (o.copies > 0 ? ", and \(o.copies) NDJSON archive(s) beside it" : "")
                + (o.rate > 0 ? ", paced to \(Int(o.rate)) samples/s" : ", each sending as soon as it is answered"))
        let config = BenchMain.config(dataDir: dir + "/data", transforms: o.transforms, sinkLine: target.sinkLine, copies: o.copies)
        let m = measure(
            binary: o.binary, config: config, dir: dir, template: template, connections: o.connections,
            seconds: o.seconds, rate: o.rate)
        print(
            String(
                format: "acknowledged: %d requests, %d samples in %.1f s: %.0f samples/s, %.1f MB/s",
                m.requests, m.samples, m.ackSeconds, m.ackRate, m.megabytesPerSecond))
        print(
            "end to end (\(sink.delivered)): "
                + String(format: "%d samples in %.1f s: %.0f samples/s", m.delivered, m.endToEndSeconds, m.endToEndRate))
        if !m.latencies.isEmpty {
            print(
                String(
                    format: "time to 2xx: p50 %.1f ms, p99 %.1f ms, p99.9 %.1f ms, max %.1f ms",
                    m.percentile(0.5), m.percentile(0.99), m.percentile(0.999), m.latencies.last!))
        }
        print("server RSS: idle \(m.idleRSSKiB / 1024) MB, peak \(m.peakRSSKiB / 1024) MB; failed requests: \(m.failures)")
        print(
            String(
                format: "server CPU: %.1f s over %.1f s (%.0f%% of the machine's %d cores), %.1f s a million samples",
                m.cpuSeconds, m.endToEndSeconds,
                m.cpuSeconds / m.endToEndSeconds / Double(ProcessInfo.processInfo.activeProcessorCount) * 100,
                ProcessInfo.processInfo.activeProcessorCount, m.cpuPerMillion))
        if sink != .file, let (rate, how) = target.ceiling(archive: nil) {
            print(
                String(
                    format: "the server's own ceiling (%@, no healthgate): %.0f records/s; healthgate end to end: %.0f%% of it",
                    how, rate, m.endToEndRate / rate * 100))
        }
    }

    /// The config the bench serves: one syncky receiver, one route (through filter + convert +
    /// tag with `transforms`), one sink (and `copies` file sinks beside it).
    static func config(dataDir: String, transforms: Bool, sinkLine: String, copies: Int = 0) -> String {
        let names = ["archive"] + (0..<copies).map { "copy\($0 + 1)" }
        let transformLines =
            transforms
            ? """
                transforms:
                  - filter: {types: [heart_rate, steps, "active_energy_*", "distance_*"], values: {heart_rate: {min: 25, max: 250}}}
                  - convert: {distance: km, energy: kJ}
                  - tag: {person: bench, household: home}
            """ : ""
        return """
            listen: 127.0.0.1:0
            data_dir: \(dataDir)
            receivers:
              phone:
                kind: syncky
                path: /syncky
                auth: {type: bearer, token: \(token)}
                hmac: {secret: \(secret)}
                max_body: 2MB   # the research's 4,800-sample body is 1.05 MB; the app itself stops at 1,000,000 bytes
            routes:
              - name: archive
                from: ["*"]
            \(transformLines)
                to: [\(names.joined(separator: ", "))]
            sinks:
              \(sinkLine)
            \(names.dropFirst().map { "  \($0): {kind: file, path: \"\($0)/{device}/{date}.ndjson\"}" }.joined(separator: "\n"))
            """
    }

    /// A PostgreSQL 15 cluster of its own (as the postgres user when run as root, which
    /// PostgreSQL requires), fsync as Debian ships it (on).
    final class Postgres {
        let dir: String
        let port = BenchMain.freePort()
        let bin: String
        let process = Process()
        var asPostgres: [String] { getuid() == 0 ? ["--reuid=postgres", "--regid=postgres", "--init-groups", "--"] : [] }
        var dsn: String { "postgres://healthgate@127.0.0.1:\(port)/health" }

        init(dir: String) {
            self.dir = dir
            bin = Postgres.binDir()
            try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            if getuid() == 0 { _ = Postgres.run("/bin/chown", ["postgres:postgres", dir]) }
            _ = command([bin + "/initdb", "-D", dir + "/data", "-A", "trust", "-U", "healthgate", "-E", "UTF8"])
            var server = [bin + "/postgres", "-D", dir + "/data", "-p", "\(port)", "-h", "127.0.0.1", "-k", dir]
            if let log = ProcessInfo.processInfo.environment["BENCH_PG_LOG_MS"] { server += ["-c", "log_min_duration_statement=\(log)"] }
            process.executableURL = URL(fileURLWithPath: asPostgres.isEmpty ? server[0] : "/usr/bin/setpriv")
            process.arguments = asPostgres.isEmpty ? Array(server.dropFirst()) : asPostgres + server
            process.standardError =
                ProcessInfo.processInfo.environment["BENCH_PG_LOG_MS"] != nil
                ? FileHandle(forWritingAtPath: "/tmp/bench-pg.log") : FileHandle.nullDevice
            process.standardOutput = FileHandle.nullDevice
            try! process.run()
            for _ in 0..<100 where Postgres.run(bin + "/pg_isready", ["-q", "-h", "127.0.0.1", "-p", "\(port)"]) != 0 { usleep(100_000) }
            _ = psql(["-d", "postgres", "-c", "CREATE DATABASE health"])
        }

        /// Where Debian's newest PostgreSQL keeps its programs.
        static func binDir() -> String {
            ((try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql"))?.sorted().last)
                .map { "/usr/lib/postgresql/\($0)/bin" } ?? "/usr/lib/postgresql/15/bin"
        }

        @discardableResult
        func command(_ c: [String]) -> Int32 {
            asPostgres.isEmpty ? Postgres.run(c[0], Array(c.dropFirst())) : Postgres.run("/usr/bin/setpriv", asPostgres + c)
        }

        @discardableResult
        func psql(_ args: [String]) -> Int32 {
            Postgres.run(bin + "/psql", ["-q", "-h", "127.0.0.1", "-p", "\(port)", "-U", "healthgate", "-v", "ON_ERROR_STOP=1"] + args)
        }

        static func run(_ exe: String, _ args: [String]) -> Int32 {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: exe)
            p.arguments = args
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            guard (try? p.run()) != nil else { return -1 }
            p.waitUntilExit()
            return p.terminationStatus
        }

        /// PostgreSQL's own ceiling in the same run: the same kind of rows, written the way the
        /// sink writes them — batches of `batch` through COPY into a temporary table and one
        /// INSERT … ON CONFLICT … DO UPDATE … WHERE changed, a transaction each, from one
        /// connection (psql's \copy) — without healthgate.
        func ceiling(rows: Int, batch: Int, dir: String) -> Double? {
            // The sink's own table (its indexes and generated column too), empty, beside it.
            let columns = PostgresSink.columns.joined(separator: ", ")
            let rest = PostgresSink.columns.dropFirst(3)
            let set = rest.map { "\($0) = EXCLUDED.\($0)" }.joined(separator: ", ")
            let old = rest.map { "r.\($0)" }.joined(separator: ", "), new = rest.map { "EXCLUDED.\($0)" }.joined(separator: ", ")
            var script = """
                CREATE TABLE ceiling (LIKE healthgate.records INCLUDING ALL);
                CREATE TEMP TABLE incoming AS SELECT \(columns) FROM ceiling WITH NO DATA;

                """
            let batches = (rows + batch - 1) / batch
            for b in 0..<batches {
                var data = ""
                for i in 0..<batch {
                    let n = b * batch + i
                    // uuids in no order, as the bench's bodies send them (HealthKit's are random).
                    data += String(
                        format: "d_benchbenchbenchbench0\t%08x-0000-4000-8000-%012d\t0\tquantity\theart_rate\t"
                            + "2026-10-14T%02d:%02d:00Z\t2026-10-14T%02d:%02d:59Z\t2026-10-14T%02d:%02d:00\t72\tcount/min\t"
                            + "com.apple.Health\tApple Watch\tphone\n",
                        Body.scramble(UInt32(b)) ^ Body.scramble(UInt32(i) &* 0x9E37_79B9), i, (n / 60) % 24, n % 60, (n / 60) % 24, n % 60,
                        (n / 60) % 24, n % 60)
                }
                try! data.write(toFile: dir + "/ceiling-\(b).tsv", atomically: false, encoding: .utf8)
                script += """
                    BEGIN;
                    \\copy incoming (device, uuid, part, kind, type, start_at, end_at, local_start, value, unit, source_app, source_device, receiver) FROM '\(dir)/ceiling-\(b).tsv'
                    INSERT INTO ceiling AS r (\(columns)) SELECT \(columns) FROM incoming
                      ON CONFLICT (device, uuid, part) DO UPDATE SET \(set), updated_at = now()
                      WHERE (\(old)) IS DISTINCT FROM (\(new));
                    TRUNCATE incoming;
                    COMMIT;

                    """
            }
            try! script.write(toFile: dir + "/ceiling.sql", atomically: false, encoding: .utf8)
            // What healthgate's run left dirty is written out first, so the ceiling does not pay for it.
            psql(["-d", "health", "-c", "CHECKPOINT"])
            let started = Date()
            let rc = psql(["-d", "health", "-f", dir + "/ceiling.sql"])
            let s = Date().timeIntervalSince(started)
            psql(["-d", "health", "-c", "DROP TABLE ceiling"])
            guard rc == 0 else {
                print("PostgreSQL's own ceiling: psql failed (\(rc))")
                return nil
            }
            return Double(batches * batch) / s
        }

        func stop() {
            kill(process.processIdentifier, SIGINT) // fast shutdown
            process.waitUntilExit()
        }
    }

    /// A mosquitto of its own on `given` or a free port, listening when this returns (a broker
    /// that cannot bind its port exits at once: it is started again on another).
    static func startMosquitto(dir: String, port given: UInt16? = nil) -> (Process, UInt16) {
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        for _ in 0..<5 {
            let port = given ?? freePort()
            try! "listener \(port) 127.0.0.1\nallow_anonymous true\npersistence false\n"
                .write(toFile: dir + "/mosquitto.conf", atomically: true, encoding: .utf8)
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/sbin/mosquitto")
            p.arguments = ["-c", dir + "/mosquitto.conf"]
            p.standardError = FileHandle.nullDevice
            try! p.run()
            var listening = false
            for _ in 0..<100 {
                listening = Connection(port: port).open()
                if !p.isRunning || listening { break }
                usleep(50_000)
            }
            if p.isRunning && listening { return (p, port) }
            if p.isRunning { p.terminate() }
            p.waitUntilExit()
            if given != nil { usleep(500_000) } // the port is the caller's: wait for it to be free
        }
        fatalError("healthgate-bench: mosquitto would not start (tried 5 times); is /usr/sbin/mosquitto installed?")
    }

    /// A loopback port nothing listens on, from the kernel. (A random one could be in the
    /// ephemeral range and taken by a client's connection: a suite's broker once exited at once
    /// on such a port and its MQTT rows delivered nothing.)
    static func freePort() -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = loopback(port: 0)
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) == 0 && getsockname(fd, $0, &len) == 0 }
        }
        precondition(ok, "healthgate-bench: no free loopback port")
        return UInt16(bigEndian: addr.sin_port)
    }

    /// 127.0.0.1:`port`.
    static func loopback(port: UInt16) -> sockaddr_in {
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = port.bigEndian
        return addr
    }

    /// The broker's own ceiling in the same run: one client publishing 320-byte messages at
    /// QoS 1 in windows of 5,000 and waiting for every acknowledgement, as the sink does.
    static func mosquittoCeiling(port: UInt16) -> Double? {
        var o = MQTTClient.Options(host: "127.0.0.1", port: Int(port), clientID: "bench-ceiling")
        o.timeoutSeconds = 30
        guard let c = try? MQTTClient(options: o), (try? c.connect()) != nil else {
            print("mosquitto's own ceiling: could not connect")
            return nil
        }
        let payload = [UInt8](repeating: 0x61, count: 320)
        let started = Date()
        var sent = 0
        while Date().timeIntervalSince(started) < 5 {
            var mids: [Int32] = []
            for i in 0..<5_000 {
                guard let mid = try? c.publish(topic: "bench/\(i % 50)", payload: payload, qos: 1, retain: false) else { break }
                mids.append(mid)
            }
            guard (try? c.waitForAcks(mids, qos: 1)) != nil else { break }
            sent += mids.count
        }
        let s = Date().timeIntervalSince(started)
        c.disconnect()
        return Double(sent) / s
    }

    /// The samples a bench body holds, in turn: type, unit, value.
    static let sampleTypes = [
        ("heart_rate", "count/min", "72"), ("steps", "count", "412"),
        ("active_energy_burned", "kcal", "1.375"), ("distance_walking_running", "m", "18.42")
    ]

    /// InfluxDB's own ceiling in the same run: the same kind of points as the sink writes
    /// (heart rate, steps, energy, distance, with their tags), in gzip'd batches of 5,000 lines
    /// made beforehand, posted one after another on one connection into a database of their own,
    /// no healthgate; in points a second, and the CPU seconds a million points influxd (`pid`) used.
    static func influxCeiling(port: UInt16, pid: Int32?) -> (rate: Double, cpuPerMillion: Double)? {
        influxQuery(port: port, "CREATE DATABASE ceiling")
        let types = BenchMain.sampleTypes
        var bodies: [[UInt8]] = []
        var t = 1_760_400_000
        for _ in 0..<240 {
            var lines = ""
            for i in 0..<5_000 {
                let (type, unit, value) = types[i % types.count]
                lines +=
                    "\(type),device=Apple\\ Watch,phone=d_benchbenchbenchbench0,source=com.apple.Health,unit=\(unit) value=\(value) \(t)\n"
                t += 1
            }
            bodies.append(InfluxDBSink.gzip(Array(lines.utf8)))
        }
        let client = CurlClient()
        let headers = [("Content-Type", "text/plain; charset=utf-8"), ("Content-Encoding", "gzip")]
        let url = "http://127.0.0.1:\(port)/write?db=ceiling&precision=s"
        let started = Date()
        let cpuBefore = pid.map { cpuSeconds($0) } ?? 0
        var points = 0
        for body in bodies where Date().timeIntervalSince(started) < 8 {
            guard let r = try? client.send("POST", url: url, headers: headers, body: body), r.status == 204 else {
                print("InfluxDB's own ceiling: a write failed")
                return nil
            }
            points += 5_000
        }
        let rate = Double(points) / Date().timeIntervalSince(started)
        let cpu = pid.map { cpuSeconds($0) - cpuBefore } ?? 0
        influxQuery(port: port, "DROP DATABASE ceiling")
        return (rate, points > 0 ? cpu / Double(points) * 1e6 : 0)
    }

    static func startInfluxd(dir: String, port given: UInt16? = nil) -> (Process, UInt16) {
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let port = given ?? freePort()
        let rpc = freePort() // its own each start: nothing keeps it (a restart on `given` once took port + 1, never checked free)
        try! """
        reporting-disabled = true
        bind-address = "127.0.0.1:\(rpc)"
        [meta]
          dir = "\(dir)/meta"
        [data]
          dir = "\(dir)/data"
          wal-dir = "\(dir)/wal"
        [http]
          bind-address = "127.0.0.1:\(port)"
          log-enabled = false
        [monitor]
          store-enabled = false
        """.write(toFile: dir + "/influxdb.conf", atomically: true, encoding: .utf8)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/influxd")
        p.arguments = ["-config", dir + "/influxdb.conf"]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try! p.run()
        let c = Connection(port: port)
        for _ in 0..<300 {
            if c.get("/ping") != nil { break }
            usleep(100_000)
        }
        influxQuery(port: port, "CREATE DATABASE health")
        return (p, port)
    }

    /// An InfluxQL statement to the influxd on `port` (databases made and dropped between runs).
    static func influxQuery(port: UInt16, _ statement: String) {
        let q = statement.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        _ = Connection(port: port).post(Array("POST /query?q=\(q) HTTP/1.1\r\nHost: bench\r\nContent-Length: 0\r\n\r\n".utf8), [])
    }

    static func rssKiB(_ pid: Int32, _ field: String) -> Int {
        guard let s = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return 0 }
        for line in s.split(separator: "\n") where line.hasPrefix(field + ":") {
            return Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
        }
        return 0
    }

    /// User plus system CPU time of a process, in seconds.
    static func cpuSeconds(_ pid: Int32) -> Double {
        guard let s = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = s.lastIndex(of: ")")
        else { return 0 }
        let fields = s[s.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let u = Double(fields[11]), let k = Double(fields[12]) else { return 0 }
        return (u + k) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// What the bench's sink (`archive`) has delivered so far.
    static func sinkSent(port: UInt16) -> Int { max(0, metric(port, "healthgate_sink_records_sent_total", sink: "archive")) }

    /// A metric's value from `/metrics`: of one sink, or summed over every sink; -1 when unanswered.
    static func metric(_ port: UInt16, _ name: String, sink: String? = nil) -> Int {
        guard let text = Connection(port: port).get("/metrics") else { return -1 }
        var total = 0
        for line in text.split(separator: "\n") where line.hasPrefix(name + "{") {
            if let sink, !line.hasPrefix(name + "{sink=\"\(sink)\"}") { continue }
            total += Int(line.split(separator: " ").last ?? "0") ?? 0
        }
        return total
    }

    /// The head of a Syncky request for `body`, signed now, with the bench receiver's token.
    static func signedHead(_ body: [UInt8]) -> [UInt8] {
        let t = Int64(Date().timeIntervalSince1970)
        let mac = Crypto.hmacSHA256(key: Array(secret.utf8), Array("\(t).".utf8), body)
        return Array(
            ("POST /syncky HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nX-Syncky-Format: native\r\n"
                + "X-Syncky-Timestamp: \(t)\r\nX-Syncky-Signature: v1=\(Crypto.lowercaseHex(mac))\r\n"
                + "Authorization: Bearer \(token)\r\nContent-Length: \(body.count)\r\n\r\n").utf8)
    }

    /// A body of realistic samples with a delivery id that is stamped per request (so every
    /// request is new to the replay check) and uuids unique per request.
    static func makeBody(samples: Int) -> Body {
        var s = #"{"v":1,"type":"sync","device":"d_benchbenchbenchbench0","samples":["#
        var uuidOffsets: [Int] = []
        let types = BenchMain.sampleTypes
        for i in 0..<samples {
            if i > 0 { s += "," }
            let (type, unit, value) = types[i % types.count]
            let minute = i % 60, hour = (i / 60) % 24
            s += #"{"uuid":""#
            uuidOffsets.append(s.utf8.count)
            s += String(format: "00000000-0000-4000-8000-%012d", i)
            s += String(
                format:
                    #"","type":"%@","value":%@,"unit":"%@","start":"2026-10-14T%02d:%02d:00Z","end":"2026-10-14T%02d:%02d:59Z","source":{"app":"com.apple.Health","device":"Apple Watch"}}"#,
                type, value, unit, hour, minute, hour, minute)
        }
        s += #"],"deleted":[],"acks":[],"more":false,"delivery":{"destination":"wh_bench","id":""#
        let deliveryOffset = s.utf8.count
        s += #"00000000-0000-7000-8000-000000000000","index":0,"count":1,"sent_at":"2026-10-14T07:05:00Z"}}"#
        return Body(bytes: Array(s.utf8), uuidOffsets: uuidOffsets, deliveryOffset: deliveryOffset)
    }
}

struct Body {
    var bytes: [UInt8]
    let uuidOffsets: [Int]
    let deliveryOffset: Int

    /// Writes the connection and request number into the first 8 hex digits of each uuid and
    /// of the delivery id, and the run's number into the 4 after them (so that no run of a suite
    /// writes over what an earlier one left in a sink's server). A uuid's 8 digits are scrambled
    /// per sample, so that uuids come in no order, as HealthKit's random ones do (a sink that
    /// keeps an index by uuid pays for that), and stay unique: for each sample the scramble of
    /// the request number is one to one.
    mutating func stamp(connection: Int, request: Int, run: Int = 0) {
        let id = UInt32(truncatingIfNeeded: (connection << 24) | (request & 0xFFFFFF))
        let hex = Array("0123456789abcdef".utf8)
        let runDigits = Array(String(format: "-%04x", run & 0xFFFF).utf8)
        func put(_ value: UInt32, at o: Int) {
            for k in 0..<8 { bytes[o + k] = hex[Int((value >> (28 - 4 * UInt32(k))) & 0xF)] }
            for k in 0..<5 { bytes[o + 8 + k] = runDigits[k] }
        }
        for (i, o) in uuidOffsets.enumerated() { put(Body.scramble(id) ^ Body.scramble(UInt32(i) &* 0x9E37_79B9), at: o) }
        put(id, at: deliveryOffset)
    }

    /// A one-to-one mix of 32 bits (odd multiplications and xor-shifts are each invertible).
    static func scramble(_ v: UInt32) -> UInt32 {
        var x = v
        x ^= x >> 16
        x &*= 0x7FEB_352D
        x ^= x >> 15
        x &*= 0x846C_A68B
        x ^= x >> 16
        return x
    }
}

final class LatencyLog: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [Double] = []

    func add(_ v: Double) {
        lock.lock()
        values.append(v)
        lock.unlock()
    }

    var count: Int {
        lock.lock()
        defer { lock.unlock() }
        return values.count
    }

    var sorted: [Double] {
        lock.lock()
        defer { lock.unlock() }
        return values.sorted()
    }
}

/// A keep-alive HTTP/1.1 connection that posts and reads status lines and bodies.
final class Connection {
    let port: UInt16
    var fd: Int32 = -1
    var buffer = [UInt8](repeating: 0, count: 65_536)

    init(port: UInt16) { self.port = port }
    deinit { if fd >= 0 { close(fd) } }

    func open() -> Bool {
        if fd >= 0 { return true }
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, 4)
        var addr = BenchMain.loopback(port: port)
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if rc != 0 { close(fd); fd = -1 }
        return fd >= 0
    }

    func sendAll(_ b: [UInt8]) -> Bool {
        var off = 0
        while off < b.count {
            let n = b.withUnsafeBytes { send(fd, $0.baseAddress! + off, b.count - off, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return false }
            off += n
        }
        return true
    }

    /// Returns the status, reading and discarding the response body.
    func post(_ head: [UInt8], _ body: [UInt8]) -> Int? {
        guard open(), sendAll(head), sendAll(body) else { reset(); return nil }
        return readResponse()?.0
    }

    func get(_ path: String) -> String? {
        guard open(), sendAll(Array("GET \(path) HTTP/1.1\r\nHost: bench\r\n\r\n".utf8)),
            let (_, body) = readResponse()
        else { return nil }
        return String(decoding: body, as: UTF8.self)
    }

    private func reset() {
        if fd >= 0 { close(fd) }
        fd = -1
    }

    private func readResponse() -> (Int, [UInt8])? {
        var data: [UInt8] = []
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { reset(); return nil }
            data.append(contentsOf: buffer[0..<n])
            guard let end = find(data) else { continue }
            let head = String(decoding: data[0..<end], as: UTF8.self)
            let status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
            var length = 0
            for line in head.split(separator: "\r\n") where line.lowercased().hasPrefix("content-length:") {
                length = Int(line.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) ?? 0
            }
            while data.count < end + 4 + length {
                let m = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if m <= 0 { reset(); return nil }
                data.append(contentsOf: buffer[0..<m])
            }
            return (status, Array(data[(end + 4)..<(end + 4 + length)]))
        }
    }

    private func find(_ d: [UInt8]) -> Int? {
        guard d.count >= 4 else { return nil }
        for i in 0...(d.count - 4) where d[i] == 13 && d[i + 1] == 10 && d[i + 2] == 13 && d[i + 3] == 10 { return i }
        return nil
    }
}
