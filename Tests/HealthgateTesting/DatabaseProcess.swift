import Foundation
import Glibc
import HTTPDelivery
import SinkKit

/// A real server from Debian's packages (influxd 1.x, VictoriaMetrics, mosquitto, PostgreSQL)
/// on a free loopback port in a temporary dir, stopped when the test is done.
final class DatabaseProcess {
    let process = Process()
    let port: UInt16
    let dir: String
    /// How it is stopped: SIGKILL, or SIGQUIT for PostgreSQL (its immediate shutdown, which
    /// also ends its backends and frees its shared memory).
    var stopSignal = SIGKILL

    private init(
        executable: String, arguments: [String], port: UInt16, dir: String, http: Bool = true,
        ready: @escaping () -> Bool = { false }
    ) throws {
        self.port = port
        self.dir = dir
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        let log = FileManager.default.createFile(atPath: dir + "/server.log", contents: nil)
        _ = log
        process.standardError = FileHandle(forWritingAtPath: dir + "/server.log")
        try process.run()
        // Ready once it answers over HTTP (or, for the others, listens itself — not another
        // test's server that got the same free port first — and says so).
        let pid = process.processIdentifier
        let process = self.process
        var up = ServeProcess.eventually(30) {
            if !process.isRunning { return true } // it gave up (a port taken meanwhile): said below
            if http { return (try? RawHTTPClient(port: port).request("GET", "/ping").status) != nil || ready() }
            return DatabaseProcess.listens(pid: pid, port: port) && ready()
        }
        if !process.isRunning { up = false }
        if !up {
            let log = (try? String(contentsOfFile: dir + "/server.log", encoding: .utf8)) ?? ""
            throw ServeError(description: "\(executable) did not start: \(log.suffix(2000))")
        }
    }

    deinit { stop() }

    /// Stops the server (with `stopSignal`) and waits for it to end.
    func stop() {
        if process.isRunning {
            kill(process.processIdentifier, stopSignal)
            process.waitUntilExit(within: 30)
        }
    }

    var url: String { "http://127.0.0.1:\(port)" }

    /// InfluxDB 1.x with a database `health`; with `tls`, it serves HTTPS only, with a
    /// self-signed certificate for 127.0.0.1 at `dir/cert.pem` (made by openssl).
    static func influxDB(tls: Bool = false) throws -> DatabaseProcess {
        let dir = ServeProcess.makeTempDir("influxd")
        let port = ScriptedEndpoint.freePort()
        let rpc = ScriptedEndpoint.freePort()
        var https = ""
        if tls {
            let openssl = Process()
            openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
            openssl.arguments = [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", dir + "/key.pem", "-out", dir + "/cert.pem", "-days", "2", "-subj", "/CN=127.0.0.1",
                "-addext", "subjectAltName=IP:127.0.0.1"
            ]
            openssl.standardError = FileHandle(forWritingAtPath: "/dev/null")
            try openssl.run()
            openssl.waitUntilExit(within: 60)
            https = "https-enabled = true\n  https-certificate = \"\(dir)/cert.pem\"\n  https-private-key = \"\(dir)/key.pem\""
        }
        try """
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
          \(https)
        [monitor]
          store-enabled = false
        """.write(toFile: dir + "/influxdb.conf", atomically: true, encoding: .utf8)
        let caFile = dir + "/cert.pem"
        let db = try DatabaseProcess(
            executable: "/usr/bin/influxd", arguments: ["-config", dir + "/influxdb.conf"],
            port: port, dir: dir
        ) {
            tls
                && (try? CurlClient(options: .init(caFile: caFile)).send(
                    "GET", url: "https://127.0.0.1:\(port)/ping", headers: [], body: [])) != nil
        }
        if tls {
            _ = try CurlClient(options: .init(caFile: caFile))
                .send("POST", url: "https://127.0.0.1:\(port)/query?q=CREATE%20DATABASE%20health", headers: [], body: [])
        } else {
            _ = try db.influxQuery("CREATE DATABASE health", method: "POST")
        }
        return db
    }

    /// True when process `pid` itself has a socket listening on TCP `port`.
    static func listens(pid: Int32, port: UInt16) -> Bool {
        let inodes = ProcFS.socketInodes(of: String(pid))
        return ProcFS.tcpSockets().contains { $0.state == "0A" && $0.localPort == port && inodes.contains($0.inode) }
    }

    /// Runs a command to its end, or kills it after `timeout` seconds; its exit status and
    /// standard output. (Our own deadline: the test runner's threads block SIGALRM, which
    /// children inherit, so `timeout(1)` and `mosquitto_sub -W` never fire.)
    @discardableResult
    static func run(_ executable: String, _ arguments: [String], timeout: Double = 20) throws -> (Int32, String) {
        try Command.runQuiet(executable, arguments, timeout: timeout)
    }

    /// mosquitto, the MQTT broker: anonymous, no persistence, on loopback.
    /// (`port` and `dir`: start it again where a stopped one was.)
    static func mosquitto(port given: UInt16? = nil, dir existing: String? = nil, extra: String = "") throws -> DatabaseProcess {
        // A free port can be taken by another test's server before mosquitto binds it: try another.
        var attempt = 0
        while true {
            do {
                return try mosquittoOnce(port: given, dir: existing, extra: extra)
            } catch  where given == nil && attempt < 3 {
                attempt += 1
            }
        }
    }

    private static func mosquittoOnce(port given: UInt16?, dir existing: String?, extra: String) throws -> DatabaseProcess {
        let dir = existing ?? ServeProcess.makeTempDir("mosquitto")
        let port = given ?? ScriptedEndpoint.freePort()
        try """
        listener \(port) 127.0.0.1
        allow_anonymous true
        persistence false
        log_dest stderr
        \(extra)
        """.write(toFile: dir + "/mosquitto.conf", atomically: true, encoding: .utf8)
        return try DatabaseProcess(
            executable: "/usr/sbin/mosquitto", arguments: ["-c", dir + "/mosquitto.conf"],
            port: port, dir: dir, http: false
        ) { true }
    }

    /// Home Assistant 2024.3.3 from the venv `HEALTHGATE_HA_VENV` (made by
    /// `Tests/HomeAssistant/install.sh`; `make test` does), started with `--skip-pip` on a free
    /// loopback port with a fresh config dir, onboarded (its owner, a token) and with the MQTT
    /// integration added for the broker on `brokerPort`, as a user would through its UI.
    /// `recorder`: with HA's recorder (its database and long-term statistics).
    /// With `dashboard`, its frontend too, showing that Lovelace YAML (`signIn` opens it).
    static func homeAssistant(brokerPort: UInt16, recorder: Bool = false, dashboard: String? = nil) throws -> (
        DatabaseProcess, token: String
    ) {
        let venv = HomeAssistantVenv.path
        guard FileManager.default.isExecutableFile(atPath: venv + "/bin/hass") else {
            throw ServeError(description: "no Home Assistant in \(venv): run `make test`, or Tests/HomeAssistant/install.sh \(venv)")
        }
        let dir = ServeProcess.makeTempDir("homeassistant")
        let port = ScriptedEndpoint.freePort()
        try """
        homeassistant:
          name: healthgate test
          latitude: 0
          longitude: 0
          elevation: 0
          unit_system: metric
          time_zone: UTC
          currency: EUR
          country: DE
        http:
          server_host: 127.0.0.1
          server_port: \(port)
        api:
        onboarding:
        logger:
          default: warning
        \(recorder ? "recorder:\n  commit_interval: 1\n" : "")
        \(dashboard == nil ? "" : "frontend:\nhistory:\nlovelace:\n  mode: yaml\n")
        """.write(toFile: dir + "/configuration.yaml", atomically: true, encoding: .utf8)
        if let dashboard {
            try dashboard.write(toFile: dir + "/ui-lovelace.yaml", atomically: true, encoding: .utf8)
            try FileManager.default.createDirectory(atPath: dir + "/www", withIntermediateDirectories: true) // /local/, for signing in
        }
        let ha = try homeAssistantServer(dir: dir, port: port)
        let (rc, out) = try DatabaseProcess.run(
            venv + "/bin/python", [HomeAssistantVenv.client, "setup", ha.url, "\(brokerPort)"],
            timeout: 60)
        let token = out.trimmingCharacters(in: .whitespacesAndNewlines)
        guard rc == 0, !token.isEmpty else { throw ServeError(description: "Home Assistant's onboarding failed (\(rc)): \(out)") }
        return (ha, token)
    }

    private static func homeAssistantServer(dir: String, port: UInt16) throws -> DatabaseProcess {
        let ha = try DatabaseProcess(
            executable: HomeAssistantVenv.path + "/bin/hass",
            arguments: ["-c", dir, "--skip-pip", "--log-file", dir + "/home-assistant.log"],
            port: port, dir: dir, http: false
        ) {
            (try? RawHTTPClient(port: port).request("GET", "/api/onboarding").status) == 200
        }
        ha.stopSignal = SIGTERM // it writes its recorder's queue and its registries on the way out
        return ha
    }

    /// Stops this Home Assistant once the caller lets it go, and gives what starts it again on
    /// the same config, database, users and port.
    func restartableHomeAssistant() -> () throws -> DatabaseProcess {
        let dir = self.dir, port = self.port
        return {
            _ = ServeProcess.eventually(10) { !ProcFS.tcpSockets().contains { $0.state == "0A" && $0.localPort == port } }
            return try DatabaseProcess.homeAssistantServer(dir: dir, port: port)
        }
    }

    /// A URL that signs a browser in as the test user and opens the frontend's `path` (a Home
    /// Assistant started with a `dashboard`).
    func homeAssistantSignIn(path: String) throws -> String {
        let (rc, out) = try DatabaseProcess.run(
            HomeAssistantVenv.path + "/bin/python", [HomeAssistantVenv.client, "signin", url, path, dir])
        guard rc == 0 else { throw ServeError(description: "could not sign in to Home Assistant (\(rc)): \(out.prefix(500))") }
        return out.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// What Home Assistant made of it all: `{"states", "entities", "devices"}` (its REST states and
    /// its entity and device registries).
    func homeAssistantDump(token: String) throws -> [String: Any] {
        let (rc, out) = try DatabaseProcess.run(
            HomeAssistantVenv.path + "/bin/python", [HomeAssistantVenv.client, "dump", url, token],
            timeout: 60)
        guard rc == 0, let d = try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: Any] else {
            throw ServeError(description: "could not read Home Assistant's registries (\(rc)): \(out.prefix(500))")
        }
        return d
    }

    /// The warnings and errors Home Assistant logged (its log file).
    var homeAssistantProblems: [String] {
        let log = (try? String(contentsOfFile: dir + "/home-assistant.log", encoding: .utf8)) ?? ""
        return log.split(separator: "\n").map(String.init).filter { $0.contains(" WARNING ") || $0.contains(" ERROR ") }
    }

    static var postgresBin: String {
        (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql"))?.sorted().last
            .map { "/usr/lib/postgresql/\($0)/bin" } ?? "/usr/lib/postgresql/15/bin"
    }

    /// PostgreSQL (Debian's), a fresh cluster with trust auth for user `healthgate` and a
    /// database `health`, on loopback with fsync off. As root (CI) the server runs as the
    /// `postgres` user, which PostgreSQL requires (setpriv execs it: the process is postgres).
    static func postgres(tls: Bool = false) throws -> DatabaseProcess {
        let bin = postgresBin
        let dir = ServeProcess.makeTempDir("postgres")
        let port = ScriptedEndpoint.freePort()
        var asPostgres: [String] = []
        if getuid() == 0 {
            try DatabaseProcess.run("/bin/chown", ["postgres:postgres", dir])
            asPostgres = ["--reuid=postgres", "--regid=postgres", "--init-groups", "--"]
        }
        func command(_ c: [String]) -> (String, [String]) {
            asPostgres.isEmpty ? (c[0], Array(c.dropFirst())) : ("/usr/bin/setpriv", asPostgres + c)
        }
        let initdb = command([bin + "/initdb", "-D", dir + "/data", "-A", "trust", "-U", "healthgate", "-E", "UTF8"])
        let (rc, _) = try DatabaseProcess.run(initdb.0, initdb.1)
        guard rc == 0 else { throw ServeError(description: "initdb failed (\(rc))") }
        var ssl: [String] = []
        if tls {
            // A certificate for 127.0.0.1 at dir/cert.pem; the key readable by the server only.
            let (rc, _) = try DatabaseProcess.run(
                "/usr/bin/openssl",
                [
                    "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", dir + "/key.pem", "-out", dir + "/cert.pem", "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"
                ])
            guard rc == 0 else { throw ServeError(description: "openssl failed (\(rc))") }
            chmod(dir + "/key.pem", 0o600)
            if getuid() == 0 { try DatabaseProcess.run("/bin/chown", ["postgres:postgres", dir + "/key.pem", dir + "/cert.pem"]) }
            ssl = ["-c", "ssl=on", "-c", "ssl_cert_file=\(dir)/cert.pem", "-c", "ssl_key_file=\(dir)/key.pem"]
        }
        let db = try postgresServer(dir: dir, port: port, extra: ssl)
        _ = try db.psql("CREATE DATABASE health", database: "postgres")
        return db
    }

    private static func postgresServer(dir: String, port: UInt16, extra: [String] = []) throws -> DatabaseProcess {
        let bin = postgresBin
        let asPostgres = getuid() == 0 ? ["--reuid=postgres", "--regid=postgres", "--init-groups", "--"] : []
        let c =
            [
                bin + "/postgres", "-D", dir + "/data", "-p", "\(port)", "-h", "127.0.0.1", "-k", dir,
                "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"
            ] + extra
        let server = asPostgres.isEmpty ? (c[0], Array(c.dropFirst())) : ("/usr/bin/setpriv", asPostgres + c)
        let db = try DatabaseProcess(executable: server.0, arguments: server.1, port: port, dir: dir, http: false) {
            (try? DatabaseProcess.run(bin + "/pg_isready", ["-h", "127.0.0.1", "-p", "\(port)"]).0) == 0
        }
        db.stopSignal = SIGQUIT
        return db
    }

    /// Stops this PostgreSQL (immediate shutdown) once the caller lets it go, and gives what
    /// starts it again on the same data and port.
    func restartable() throws -> () throws -> DatabaseProcess {
        let dir = self.dir, port = self.port
        return {
            // The old postmaster must be gone (its pid file, its port) before the new one starts.
            _ = ServeProcess.eventually(10) { !FileManager.default.fileExists(atPath: dir + "/data/postmaster.pid") }
            return try DatabaseProcess.postgresServer(dir: dir, port: port)
        }
    }

    /// A statement through psql over TCP; its output, unaligned (`-At`).
    func psql(_ sql: String, database: String = "health") throws -> String {
        let (rc, out) = try DatabaseProcess.run(
            DatabaseProcess.postgresBin + "/psql",
            [
                "-h", "127.0.0.1", "-p", "\(port)", "-U", "healthgate", "-d", database,
                "-At", "-v", "ON_ERROR_STOP=1", "-c", sql
            ])
        guard rc == 0 else { throw ServeError(description: "psql failed (\(rc)) on: \(sql)") }
        return out.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Asks `sql` until it answers `expected`, or `seconds` pass: its last answer.
    func answer(_ sql: String, becomes expected: String, within seconds: Double) -> String? {
        var last: String?
        _ = ServeProcess.eventually(seconds) {
            last = try? psql(sql)
            return last == expected
        }
        return last
    }

    var postgresURL: String { "postgres://healthgate@127.0.0.1:\(port)/health" }

    static func victoriaMetrics() throws -> DatabaseProcess {
        let dir = ServeProcess.makeTempDir("vm")
        let port = ScriptedEndpoint.freePort()
        return try DatabaseProcess(
            executable: "/usr/bin/victoria-metrics",
            arguments: [
                "-storageDataPath", dir + "/data", "-httpListenAddr", "127.0.0.1:\(port)",
                "-search.latencyOffset", "0s", "-loggerLevel", "ERROR",
                // The default keeps a month; test data is older.
                "-retentionPeriod", "100y"
            ],
            port: port, dir: dir)
    }

    /// An InfluxQL query's JSON answer.
    func influxQuery(_ q: String, method: String = "GET") throws -> [String: Any] {
        let encoded = q.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? q
        let r = try RawHTTPClient(port: port).request(method, "/query?db=health&q=\(encoded)")
        return (try? JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any]) ?? [:]
    }

    /// The rows of a SELECT: each row a dictionary of column to value.
    func influxRows(_ q: String) throws -> [[String: Any]] {
        let json = try influxQuery(q)
        guard let results = json["results"] as? [[String: Any]], let series = results.first?["series"] as? [[String: Any]] else {
            return []
        }
        var rows: [[String: Any]] = []
        for s in series {
            let columns = s["columns"] as? [String] ?? []
            for values in s["values"] as? [[Any]] ?? [] {
                rows.append(Dictionary(uniqueKeysWithValues: zip(columns, values)))
            }
        }
        return rows
    }

    /// VictoriaMetrics' export of series matching `selector`, one JSON object per series.
    func vmExport(_ selector: String) throws -> [[String: Any]] {
        let encoded = selector.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? selector
        let r = try RawHTTPClient(port: port).request("GET", "/api/v1/export?match%5B%5D=\(encoded)")
        return String(decoding: r.body, as: UTF8.self).split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }
}

/// Where the Home Assistant venv is (outside the clone: made once per machine).
enum HomeAssistantVenv {
    static var path: String {
        ProcessInfo.processInfo.environment["HEALTHGATE_HA_VENV"]
            ?? (NSHomeDirectory() + "/.cache/healthgate/ha-2024.3.3")
    }

    static var client: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("HomeAssistant/ha_client.py").path
    }
}
