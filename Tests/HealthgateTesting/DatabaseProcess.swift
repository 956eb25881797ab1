import Foundation
import Glibc
import HTTPDelivery
import SinkKit

/// A real database server from Debian's packages (influxd 1.x, VictoriaMetrics) on a free
/// loopback port in a temporary dir, stopped when the test is done.
final class DatabaseProcess {
    let process = Process()
    let port: UInt16
    let dir: String

    private init(executable: String, arguments: [String], port: UInt16, dir: String,
                 ready: @escaping () -> Bool = { false }) throws {
        self.port = port
        self.dir = dir
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        let log = FileManager.default.createFile(atPath: dir + "/server.log", contents: nil)
        _ = log
        process.standardError = FileHandle(forWritingAtPath: dir + "/server.log")
        try process.run()
        // Ready once it answers over HTTP.
        let up = ServeProcess.eventually(30) {
            (try? RawHTTPClient(port: port).request("GET", "/ping").status) != nil || ready()
        }
        if !up {
            let log = (try? String(contentsOfFile: dir + "/server.log", encoding: .utf8)) ?? ""
            throw ServeError(description: "\(executable) did not start: \(log.suffix(2000))")
        }
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
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
            openssl.arguments = ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                                 "-keyout", dir + "/key.pem", "-out", dir + "/cert.pem", "-days", "2", "-subj", "/CN=127.0.0.1",
                                 "-addext", "subjectAltName=IP:127.0.0.1"]
            openssl.standardError = FileHandle(forWritingAtPath: "/dev/null")
            try openssl.run()
            openssl.waitUntilExit()
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
        let db = try DatabaseProcess(executable: "/usr/bin/influxd", arguments: ["-config", dir + "/influxdb.conf"],
                                     port: port, dir: dir) {
            tls && (try? CurlClient(options: .init(caFile: caFile)).send("GET", url: "https://127.0.0.1:\(port)/ping", headers: [], body: [])) != nil
        }
        if tls {
            _ = try CurlClient(options: .init(caFile: caFile))
                .send("POST", url: "https://127.0.0.1:\(port)/query?q=CREATE%20DATABASE%20health", headers: [], body: [])
        } else {
            _ = try db.influxQuery("CREATE DATABASE health", method: "POST")
        }
        return db
    }

    static func victoriaMetrics() throws -> DatabaseProcess {
        let dir = ServeProcess.makeTempDir("vm")
        let port = ScriptedEndpoint.freePort()
        return try DatabaseProcess(executable: "/usr/bin/victoria-metrics",
                                   arguments: ["-storageDataPath", dir + "/data", "-httpListenAddr", "127.0.0.1:\(port)",
                                               "-search.latencyOffset", "0s", "-loggerLevel", "ERROR",
                                               // The default keeps a month; test data is older.
                                               "-retentionPeriod", "100y"],
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
