import Foundation
@testable import Gateway
import HealthgateCore
@testable import HealthgateTesting
@testable import SinkMQTT
import Testing

/// What `contrib/` and `make install` give an admin: the install lands where Debian expects it
/// and the installed binary checks the installed example; the hardened unit passes
/// `systemd-analyze verify` without a warning; the three example configs check; the Grafana
/// dashboards' queries run against the schemas the sinks really write (real InfluxDB 1.x and
/// PostgreSQL 15), after Grafana's own macros are put in.
@Suite(.serialized) struct ContribTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path
    static let env = [
        "PHONE_TOKEN", "PHONE_HMAC", "HAE_KEY", "INFLUX_IN_TOKEN", "DEVICE_TOKEN", "HEALTHSYNC_TOKEN", "INFLUX_TOKEN",
        "N8N_TOKEN", "MQTT_PASSWORD", "PG_PASSWORD", "AGENT_TOKEN", "ANNA_TOKEN", "HA_TOKEN"
    ]
    .reduce(into: [String: String]()) { $0[$1] = "x-\($1)-0123456789" }

    static func make(_ args: [String]) throws -> (Int32, String) { try Command.run("/usr/bin/make", ["-s", "-C", root] + args) }

    /// Every `make X` the README tells a user to run is a target of the Makefile (`make bench`
    /// was once lost from it while the README went on naming it).
    @Test func everyMakeCommandTheReadmeNamesIsATarget() throws {
        let readme = try String(contentsOfFile: Self.root + "/README.md", encoding: .utf8)
        var targets = Set<String>()
        for piece in readme.components(separatedBy: "`make ").dropFirst() {
            let word = piece.prefix { $0.isLetter || $0.isNumber || $0 == "-" }
            if !word.isEmpty { targets.insert(String(word)) }
        }
        #expect(targets.isSuperset(of: ["run", "test", "bench", "fuzz", "soak", "test-asan", "test-tsan"]), "\(targets.sorted())")
        for target in targets.sorted() {
            // -n: what it would run, not running it. A target that is not there is an error, unless
            // it is only named .PHONY: then there is "nothing to be done" (how bench went unnoticed).
            let (rc, out) = try Command.run("/usr/bin/make", ["-n", "-C", Self.root, target], timeout: 60)
            #expect(
                rc == 0 && !out.contains("No rule to make target") && !out.contains("Nothing to be done"),
                "make \(target): \(out.suffix(400))")
        }
    }

    /// Issue 47: the README was 1,866 lines and pointed at files outside the repository. It is a
    /// front door of at most ~400 lines, and every relative link in it and in docs/ resolves to a
    /// file of the repository (a clone is all a reader has).
    @Test func theFrontDoorIsShortAndEveryLinkResolves() throws {
        let readme = try String(contentsOfFile: Self.root + "/README.md", encoding: .utf8)
        #expect(readme.split(separator: "\n", omittingEmptySubsequences: false).count <= 400)
        var pages = ["README.md", "ARCHITECTURE.md"]
        let docs = FileManager.default.enumerator(atPath: Self.root + "/docs")
        while let f = docs?.nextObject() as? String {
            if f.hasSuffix(".md") { pages.append("docs/" + f) }
        }
        #expect(pages.contains("docs/configuration.md") && pages.contains("docs/operations.md"), "\(pages)")
        var checked = 0
        for page in pages {
            let text = try String(contentsOfFile: Self.root + "/" + page, encoding: .utf8)
            #expect(!text.contains("DESIGN.md") && !text.contains("../shared"), "\(page) names a file outside the repository")
            let dir = (page as NSString).deletingLastPathComponent
            for piece in text.components(separatedBy: "](").dropFirst() {
                guard let close = piece.firstIndex(of: ")") else { continue }
                var target = String(piece[..<close])
                if target.hasPrefix("http://") || target.hasPrefix("https://") || target.hasPrefix("mailto:") || target.hasPrefix("#") {
                    continue
                }
                if let hash = target.firstIndex(of: "#") { target = String(target[..<hash]) }
                let path = ((Self.root + "/" + dir) as NSString).appendingPathComponent(target)
                #expect(FileManager.default.fileExists(atPath: path), "\(page) links to \(target), which is not in the repository")
                checked += 1
            }
        }
        #expect(checked > 20)
        #expect(FileManager.default.fileExists(atPath: Self.root + "/LICENSE"))
    }

    /// Issue 47: `make run` installed the test servers too (PostgreSQL, influxd, VictoriaMetrics,
    /// mosquitto, Chromium), and Debian starts and enables a daemon it installs. Running needs
    /// the libraries only; `make test` adds the servers and stops and disables what it installs.
    @Test func makeRunInstallsOnlyWhatRunningNeeds() throws {
        func packages(_ target: String) throws -> Set<String> {
            let (rc, plan) = try Command.run("/usr/bin/make", ["-n", "-C", Self.root, target], timeout: 60)
            #expect(rc == 0, "\(plan.suffix(300))")
            // The deps recipe, as make would run it: `for p in PKG… ; do`.
            let lists = plan.components(separatedBy: "for p in ").dropFirst().map { $0.prefix { $0 != ";" } }
            return Set(lists.flatMap { $0.split(separator: " ").map(String.init) })
        }
        let servers: Set = ["postgresql", "influxdb", "victoria-metrics", "mosquitto", "chromium"]
        let run = try packages("run")
        #expect(run.contains("libmicrohttpd-dev") && run.contains("libpq-dev") && run.isDisjoint(with: servers), "\(run.sorted())")
        let test = try packages("test")
        #expect(test.isSuperset(of: servers.union(run)), "\(test.sorted())")
        let (_, plan) = try Command.run("/usr/bin/make", ["-n", "-C", Self.root, "deps", "DEB_PKGS=postgresql"], timeout: 60)
        #expect(plan.contains("systemctl disable --now"), "\(plan)")
    }

    @Test func makeInstallPutsItWhereAnAdminLooksAndUninstallTakesItAway() throws {
        let dest = ServeProcess.makeTempDir("install")
        let (rc, out) = try Self.make(["install", "DESTDIR=\(dest)", "PREFIX=/usr", "NO_BUILD=1"])
        #expect(rc == 0, "\(out)")
        let fm = FileManager.default
        #expect(fm.isExecutableFile(atPath: dest + "/usr/bin/healthgate"))
        let unit = try String(contentsOfFile: dest + "/usr/lib/systemd/system/healthgate.service", encoding: .utf8)
        #expect(unit.contains("\nExecStart=/usr/bin/healthgate serve --config /etc/healthgate/healthgate.yaml\n"))
        for f in [
            "config.example.yaml", "contrib/configs/influxdb.yaml", "contrib/configs/home-assistant.yaml",
            "contrib/configs/archive.yaml", "contrib/caddy/Caddyfile", "contrib/grafana/healthgate-influxdb.json",
            "contrib/grafana/healthgate-postgres.json"
        ] {
            #expect(fm.fileExists(atPath: dest + "/usr/share/healthgate/" + f), "\(f)")
        }
        var isDir: ObjCBool = false
        #expect(fm.fileExists(atPath: dest + "/etc/healthgate", isDirectory: &isDir) && isDir.boolValue)
        // The installed binary checks the installed example.
        let (crc, checked) = try Command.run(
            dest + "/usr/bin/healthgate", ["check", "--config", dest + "/usr/share/healthgate/config.example.yaml"],
            environment: ProcessInfo.processInfo.environment.merging(Self.env) { $1 })
        #expect(crc == 0, "\(checked)")
        #expect(checked.contains("ok"))

        try Self.theDocumentedInstallRunsAsItsOwnUser(dest)

        let (urc, uout) = try Self.make(["uninstall", "DESTDIR=\(dest)", "PREFIX=/usr"])
        #expect(urc == 0, "\(uout)")
        #expect(!fm.fileExists(atPath: dest + "/usr/bin/healthgate"))
        #expect(!fm.fileExists(atPath: dest + "/usr/lib/systemd/system/healthgate.service"))
        #expect(!fm.fileExists(atPath: dest + "/usr/share/healthgate"))
    }

    /// Issue 47: the unit ran as a user made at start (DynamicUser) that could not read
    /// /etc/healthgate (root 0750), and the error said "no such config file". Now the unit's user
    /// is a system user (sysusers.d) whose group owns /etc/healthgate. Here, as the README says
    /// and as a uid that is not root: the sysusers file makes the user, the config copied in with
    /// the install command the README gives checks, and one it may not read says "permission
    /// denied". (nobody/nogroup stand in for healthgate, which this machine does not have.)
    static func theDocumentedInstallRunsAsItsOwnUser(_ dest: String) throws {
        let (src, sysusers) = try DatabaseProcess.run(
            "/usr/bin/systemd-sysusers", ["--root=\(dest)", dest + "/usr/lib/sysusers.d/healthgate.conf"])
        #expect(src == 0, "\(sysusers)")
        let passwd = (try? String(contentsOfFile: dest + "/etc/passwd", encoding: .utf8)) ?? ""
        #expect(
            passwd.split(separator: "\n").contains { $0.hasPrefix("healthgate:") && $0.contains(":/var/lib/healthgate:/usr/sbin/nologin") },
            "\(passwd)")
        let unit = try String(contentsOfFile: dest + "/usr/lib/systemd/system/healthgate.service", encoding: .utf8)
        #expect(unit.contains("\nUser=healthgate\n") && unit.contains("\nGroup=healthgate\n") && !unit.contains("DynamicUser"))

        // The install as `make install` leaves /etc/healthgate, with nogroup as the service's group.
        let (rc, out) = try Self.make(["install", "DESTDIR=\(dest)", "PREFIX=/usr", "NO_BUILD=1", "SERVICE_GROUP=nogroup"])
        #expect(rc == 0, "\(out)")
        var st = stat()
        #expect(stat(dest + "/etc/healthgate", &st) == 0 && st.st_mode & 0o777 == 0o750 && st.st_uid == 0 && st.st_gid == 65534)
        let etc = dest + "/etc/healthgate/healthgate.yaml"
        let (irc, iout) = try Command.run(
            "/usr/bin/install", ["-m", "0640", "-g", "nogroup", dest + "/usr/share/healthgate/config.example.yaml", etc])
        #expect(irc == 0, "\(iout)")
        // sudoedit: data_dir is the state dir systemd makes for the unit's user (0700).
        let state = dest + "/var/lib/healthgate"
        #expect(mkdir(dest + "/var", 0o755) == 0 || errno == EEXIST)
        #expect(mkdir(dest + "/var/lib", 0o755) == 0 || errno == EEXIST)
        #expect(mkdir(state, 0o700) == 0 && chown(state, 65534, 65534) == 0)
        let example = try String(contentsOfFile: etc, encoding: .utf8)
        let dataDir = try #require(example.split(separator: "\n").first { $0.hasPrefix("data_dir:") })
        try example.replacingOccurrences(of: String(dataDir), with: "data_dir: \(state)").write(
            toFile: etc, atomically: false, encoding: .utf8)
        // The way down to it is open, as / and /etc are (the test's temporary dirs are not).
        var up = dest
        while up.count > 1 {
            var dir = stat()
            if stat(up, &dir) == 0 { _ = chmod(up, (dir.st_mode & 0o7777) | 0o001) }
            up = (up as NSString).deletingLastPathComponent
        }
        let asService = ["--reuid=65534", "--regid=65534", "--clear-groups", dest + "/usr/bin/healthgate", "check", "--config", etc]
        let env = ProcessInfo.processInfo.environment.merging(Self.env) { $1 }
        let (crc, checked) = try Command.run("/usr/bin/setpriv", asService, environment: env)
        #expect(crc == 0 && checked.contains("ok"), "\(checked)")
        // A config its user may not read says so, and who the process runs as.
        #expect(chmod(etc, 0o600) == 0)
        let (drc, denied) = try Command.run("/usr/bin/setpriv", asService, environment: env)
        #expect(drc == 2 && denied.contains("\(etc): permission denied: healthgate runs as user nobody (uid 65534)"), "\(denied)")
        #expect(!denied.contains("no such config file"))
    }

    @Test func theHardenedUnitVerifiesWithoutAWarning() throws {
        let dir = ServeProcess.makeTempDir("unit")
        // verify also checks that ExecStart's program exists: point it at the one just built.
        let unit = try String(contentsOfFile: Self.root + "/contrib/systemd/healthgate.service", encoding: .utf8)
            .replacingOccurrences(of: "ExecStart=/usr/local/bin/healthgate ", with: "ExecStart=\(ServeProcess.binary) ")
        try unit.write(toFile: dir + "/healthgate.service", atomically: true, encoding: .utf8)
        for word in [
            "User=healthgate", "StateDirectory=healthgate", "ProtectSystem=strict", "NoNewPrivileges=yes",
            "CapabilityBoundingSet=\n", "SystemCallFilter=@system-service", "TimeoutStopSec=30"
        ] {
            #expect(unit.contains(word), "\(word)")
        }
        let (vrc, said) = try Command.run("/usr/bin/systemd-analyze", ["verify", dir + "/healthgate.service"])
        #expect(vrc == 0 && said.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "\(said)")
        // And its exposure, as systemd rates it, is low ("OK" is below 2.0… "EXPOSED" above 7).
        let (_, security) = try DatabaseProcess.run("/usr/bin/systemd-analyze", ["security", "--offline=yes", dir + "/healthgate.service"])
        let level = security.split(separator: "\n").last { $0.contains("Overall exposure level") }
        let score = level.flatMap { l in l.split(separator: " ").compactMap { Double($0) }.first }
        #expect(score != nil && score! < 2.5, "\(security.suffix(400))")
    }

    @Test func theThreeExampleConfigsCheck() throws {
        for name in ["influxdb", "home-assistant", "archive"] {
            let r = try CLITests.run(["check", "--config", Self.root + "/contrib/configs/\(name).yaml"], env: Self.env)
            #expect(r.status == 0, "\(name): \(r.err)")
            #expect(!r.out.contains("warning"), "\(name): \(r.out)")
        }
    }

    /// contrib/configs/home-assistant.yaml as a user runs it, with a phone whose device id it
    /// does not name (it once hard-coded one: another phone's steps counted twice and reset at
    /// UTC midnight, and the named one became two HA devices): today's steps are the day's sum
    /// once, even resent, on one device named as the config says.
    @Test func theHomeAssistantExampleIsRightForAnyPhone() throws {
        let broker = try DatabaseProcess.mosquitto()
        let text = try String(contentsOfFile: Self.root + "/contrib/configs/home-assistant.yaml", encoding: .utf8)
            .replacingOccurrences(of: "listen: 0.0.0.0:8080", with: "listen: 127.0.0.1:0")
            .replacingOccurrences(of: "data_dir: /var/lib/healthgate", with: "data_dir: DATA_DIR")
            .replacingOccurrences(of: "mqtt://localhost:1883", with: "mqtt://127.0.0.1:\(broker.port)")
        #expect(text.contains("127.0.0.1:\(broker.port)") && text.contains("DATA_DIR"))
        let serve = try ServeProcess(
            config: text,
            environment: [
                "PHONE_TOKEN": Vectors.token, "PHONE_HMAC": Vectors.secret,
                "MQTT_PASSWORD": "unused", "HA_TOKEN": "unused-here"
            ])
        let recorder = try MQTTRecorder(port: broker.port, topic: "homeassistant/sensor/#")
        defer { recorder.stop() }
        let device = "d_SomeOtherPhone_9x"
        let now = Int64(Date().timeIntervalSince1970)
        let offset = Int64(TimeZone(identifier: "Europe/Budapest")!.secondsFromGMT(for: Date()))
        let steps = [412, 300, 500, 400] // 1,612 in all
        let samples = steps.enumerated().map { i, n in
            let t = TestTime.ago(Int64(3000 - i * 600), now: now, offset: offset)
            return
                #"{"uuid":"st-\#(i)","type":"steps","value":\#(n),"unit":"count","start":"\#(Timestamp(seconds: t).rfc3339())","end":"\#(Timestamp(seconds: t + 59).rfc3339())"}"#
        }
        for _ in 0..<2 { // sent, then sent again
            let body = Vectors.syncBody(device: device, samples: samples, delivery: UUID().uuidString.lowercased())
            let r = try serve.client().request("POST", "/syncky", headers: LiveServeTests.signedHeaders(body), body: Array(body.utf8))
            #expect(r.status == 200, "\(r.text)")
        }
        let slug = MQTTSink.deviceSlug(device)
        var value: Any?
        #expect(
            ServeProcess.eventually {
                let state = MQTTSinkTests.retained(broker, "healthgate/\(slug)/steps_today")
                value = (try? JSONSerialization.jsonObject(with: Data(state.utf8)) as? [String: Any])?["value"]
                return (value as? Int) == 1612 || (value as? Double) == 1612
            }, "\(String(describing: value))")
        // Every sensor on one device, named as the config says.
        let configs = recorder.received
        #expect(!configs.isEmpty)
        for c in configs {
            #expect(c.topic.hasPrefix("homeassistant/sensor/healthgate_\(slug)/"), "\(c.topic)")
            let json = (try? JSONSerialization.jsonObject(with: Data(c.payload.utf8)) as? [String: Any]) ?? [:]
            #expect((json["device"] as? [String: Any])?["name"] as? String == "My iPhone")
        }
    }

    static func dashboardQueries(_ file: String, key: String) throws -> [String] {
        let data = try Data(contentsOf: URL(fileURLWithPath: root + "/contrib/grafana/" + file))
        let dash = try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
        let panels = dash["panels"] as? [[String: Any]] ?? []
        let queries = panels.flatMap { ($0["targets"] as? [[String: Any]] ?? []).compactMap { $0[key] as? String } }
        let variables = ((dash["templating"] as? [String: Any])?["list"] as? [[String: Any]] ?? []).compactMap { $0["query"] as? String }
            .filter { $0.contains(" ") }
        return queries + variables
    }

    @Test func theGrafanaDashboardsQueryWhatTheSinksWrite() throws {
        // PostgreSQL: the sink's schema with a few records in it.
        let pg = try DatabaseProcess.postgres()
        let serve = try ServeProcess(config: PostgresSinkTests.config(pg))
        try PostgresSinkTests().ingest(
            serve,
            #"""
            {"device_id":"ios-1","time_zone":"Europe/Budapest","samples":[
             {"source_uuid":"hr-a","data_type":"heartRate","ts":"2026-12-01T16:05:00Z","value":140,"unit":"count/min"},
             {"source_uuid":"st-1","data_type":"stepCount","ts":"2026-12-01T12:00:00Z","value":1000,"unit":"count"}],
             "workouts":[{"source_uuid":"run-1","activity_type":"running","started_at":"2026-12-01T16:00:00Z",
              "ended_at":"2026-12-01T16:30:00Z","total_energy_kcal":300,"total_distance_m":5000}]}
            """#)
        PostgresSinkTests.expect(pg, "SELECT count(*) FROM healthgate.records", is: "3")
        let sql = try Self.dashboardQueries("healthgate-postgres.json", key: "rawSql")
        #expect(sql.count == 5)
        var answered = 0
        for q in sql {
            var text = q.replacingOccurrences(of: "'$device'", with: "'ios-1'")
            // Grafana's $__timeFilter(expr) becomes `expr > now() - …` (expr may hold parentheses).
            while let r = text.range(of: "$__timeFilter(") {
                var depth = 0, end = r.upperBound
                for i in text[r.upperBound...].indices {
                    if text[i] == "(" { depth += 1 }
                    if text[i] == ")" { if depth == 0 { end = i; break }; depth -= 1 }
                }
                let expr = String(text[r.upperBound..<end])
                text.replaceSubrange(r.lowerBound...end, with: "\(expr) > now() - interval '3650 days'")
            }
            let out = try pg.psql(text)
            if !out.isEmpty { answered += 1 }
        }
        #expect(answered >= 4, "every panel but sleep has a row")
        serve.stop()

        // InfluxDB 1.x: the influxdb sink's schema.
        let influx = try DatabaseProcess.influxDB()
        let s2 = try ServeProcess(
            config: InfluxDBSinkTests.config(
                "{kind: influxdb, url: \"\(influx.url)\", api: v1, database: health, precision: s, batch: {max_wait: 10ms}}"))
        #expect(
            try InfluxDBSinkTests.post(
                s2,
                Vectors.syncBody(samples: [
                    Vectors.stepsSample, Vectors.sleepSample, Vectors.workoutSample,
                    PostgresSinkTests.q("h1", "heart_rate", 61, "count/min", at: PostgresSinkTests.base)
                ])) == 200)
        #expect(ServeProcess.eventually(15) { ((try? influx.influxRows("SELECT * FROM workout")) ?? []).count == 1 })
        let influxQL = try Self.dashboardQueries("healthgate-influxdb.json", key: "query")
        #expect(influxQL.count == 5)
        for q in influxQL {
            let text = q.replacingOccurrences(of: "$timeFilter", with: "time > now() - 3650d")
                .replacingOccurrences(of: "/^$phone$/", with: "/^d_zsOZnTQUz_juWFVljuOOBQ$/")
                .replacingOccurrences(of: "$__interval", with: "1h")
            let answer = try influx.influxQuery(text)
            let result = (answer["results"] as? [[String: Any]])?.first
            #expect(result != nil && result?["error"] == nil, "\(text): \(answer)")
            #expect(result?["series"] != nil, "\(text) found nothing: \(answer)")
        }
        s2.stop()
    }
}
