import Foundation
@testable import Gateway
import Glibc
import HealthgateCore
@testable import HealthgateTesting
@testable import Pipeline
import Posix
import SinkKit
import Sinks
import Testing
import Transforms
import YAMLConfig

@Suite struct ConfigTests {
    let logger = Logger(component: "test", sink: MemoryLogSink())

    func load(_ text: String, env: [String: String] = [:]) throws(ConfigProblems) -> Topology {
        try ConfigLoader.load(text: text, file: "healthgate.yaml", environment: env, logger: logger)
    }

    func problems(_ text: String, env: [String: String] = [:]) -> [String] {
        do {
            _ = try load(text, env: env)
            return []
        } catch {
            return error.problems.map(\.description)
        }
    }

    /// A setting a receiver kind cannot honour is refused, not accepted and then ignored:
    /// `hmac` on a hae receiver used to print "HMAC signatures required" while unsigned
    /// requests were stored.
    @Test func eachReceiverKindRefusesKeysItDoesNotTake() {
        let cases: [(kind: String, key: String)] = [
            ("hae", "hmac: {secret: s}"), ("healthsync", "hmac: {secret: s}"), ("ingest", "hmac: {secret: s}"),
            ("influx", "hmac: {secret: s}"), ("hae", "write_back: true"), ("influx", "max_items: 5"),
            ("healthsync", "public_url: https://x"), ("ingest", "types: [steps]"), ("ingest", "device: x"),
            ("syncky", "max_items: 3"), ("hae", "name: Phone")
        ]
        for c in cases {
            let p = problems(
                """
                data_dir: /tmp/x
                receivers:
                  r:
                    kind: \(c.kind)
                    \(c.key)
                """)
            let key = String(c.key.prefix { $0 != ":" })
            #expect(p.count == 1, "\(c): \(p)")
            #expect(
                p.first?.contains("healthgate.yaml:5:5: receivers.r.\(key): a \(c.kind) receiver does not take \"\(key)\"") == true,
                "\(p)")
            #expect(p.first?.contains("it takes: kind, path, auth, max_body") == true, "\(p)")
        }
        // What each kind does take still loads.
        #expect(
            problems(
                """
                data_dir: /tmp/x
                receivers:
                  s: {kind: syncky, path: /s, hmac: {secret: s}, write_back: true, name: P, public_url: "https://x/s", types: [steps], device: d}
                  g: {kind: ingest, max_items: 10, max_body: 1MB}
                  y: {kind: healthsync, device: d}
                """) == [])
    }

    /// Names become file names under data_dir; `../` once put a replay cache, an export log and
    /// a sink cursor outside it.
    @Test func namesThatAreNotSafeFileNamesAreRefused() {
        for bad in ["../up", "a/b", ".hidden", "x\\y", "-dash", String(repeating: "n", count: 65), "sp ace"] {
            let quoted = "\"" + bad.replacingOccurrences(of: "\\", with: "\\\\") + "\""
            let r = problems(
                """
                data_dir: /tmp/x
                receivers:
                  \(quoted): {kind: hae}
                """)
            #expect(r.count == 1 && r[0].contains("a name is 1 to 64 letters"), "\(bad): \(r)")
            let s = problems(
                """
                data_dir: /tmp/x
                sinks:
                  \(quoted): {kind: file, path: a.ndjson}
                """)
            #expect(s.count == 1 && s[0].contains("a name is 1 to 64 letters"), "\(bad): \(s)")
        }
        #expect(problems("data_dir: /tmp/x\nreceivers:\n  my-iphone_2.home: {kind: hae}\n") == [])
    }

    @Test func systemDirectoriesAreNotADataDir() {
        for dir in ["/", "//", "/etc", "/var/lib/", "/usr/../etc", "/tmp/..", "/home"] {
            let p = problems("data_dir: \(dir)\n")
            #expect(p.count == 1 && p[0].contains("is a system directory"), "\(dir): \(p)")
        }
        #expect(problems("data_dir: /var/lib/healthgate\n") == [])
        // A link to a system directory is that directory.
        let link = ServeProcess.makeTempDir("link") + "/etc"
        #expect(symlink("/etc", link) == 0)
        #expect(problems("data_dir: \(link)\n").first?.contains("data_dir /etc is a system directory") == true)
        #expect(problems("data_dir: /tmp/hg-data\n") == [])
    }

    /// The example a newcomer copies first loads as it is, with every kind it shows.
    @Test func theExampleConfigLoads() throws {
        let root = #filePath.split(separator: "/").dropLast(3).joined(separator: "/")
        let text = String(decoding: try FileIO.readAll("/" + root + "/config.example.yaml"), as: UTF8.self)
        let env = [
            "PHONE_TOKEN", "PHONE_HMAC", "HAE_KEY", "INFLUX_IN_TOKEN", "DEVICE_TOKEN", "HEALTHSYNC_TOKEN",
            "INFLUX_TOKEN", "N8N_TOKEN", "MQTT_PASSWORD", "PG_PASSWORD", "AGENT_TOKEN", "ANNA_TOKEN", "HA_TOKEN"
        ]
        .reduce(into: [String: String]()) { $0[$1] = "x-\($1)-0123456789" }
        let t = try load(text, env: env)
        #expect(t.readAPI?.sink == "db" && t.readAPI?.tokens.count == 2)
        #expect(Set(t.receivers.map(\.config.kind)) == Set(ReceiverRegistry.kinds))
        #expect(Set(t.sinks.map(\.built.kind)) == Set(SinkRegistry.kinds))
        #expect(Set(t.sinks.map(\.name)) == ["archive", "influx", "n8n", "home", "ha-history", "db"])
        #expect(t.warnings.isEmpty, "\(t.warnings)")
        // Every transform is shown at work in it.
        #expect(Set(t.routes.flatMap { $0.transforms.map(\.kind) }) == Set(TransformRegistry.names))
        // And `healthgate check` on it passes, drawing the graph.
        var envs = env
        envs["HEALTHGATE_DATA_DIR"] = nil
        let check = try CLITests.run(["check", "--config", "/" + root + "/config.example.yaml"], env: envs)
        #expect(check.status == 0, "\(check.err)")
        #expect(check.out.contains("dashboards: my-iphone, influx → filter → rename → convert → tag → influx"), "\(check.out)")
        #expect(
            check.out.contains(
                "read API: GET /api/v1/{samples,workouts,daily,latest,batches,openapi.json} over sink db; "
                    + "2 read token(s), 1 limited to some devices"), "\(check.out)")
        #expect(t.quarantine.max_bytes != nil && t.http.header_timeout != nil && t.http.max_buffered != nil)
        // As a newcomer types it, with none of its variables set: it passes, saying which it
        // checked with stand-ins.
        var bare = ProcessInfo.processInfo.environment
        for name in env.keys { bare[name] = nil }
        let plain = try Command.runApart(ServeProcess.binary, ["check", "config.example.yaml"], environment: bare, cwd: "/" + root)
        #expect(plain.status == 0, "\(plain.err)")
        #expect(plain.out.contains("config config.example.yaml: ok (with \(env.count) variable(s) not set here"), "\(plain.out)")
        #expect(plain.err.contains("warning: environment variable PHONE_TOKEN is not set here"))
    }

    /// Issue 47: a type name nothing will ever have (`step`) silently dropped every step. Every
    /// place that names types refuses one the registry does not know, and says the near one.
    @Test func typeNamesNoRecordHasAreRefused() {
        func config(_ transform: String, sink: String = "{kind: file, path: x.ndjson}") -> String {
            """
            data_dir: /tmp/x
            receivers: {a: {kind: hae}}
            routes: [{from: [a], to: [s], transforms: [\(transform)]}]
            sinks: {s: \(sink)}
            """
        }
        let step = problems(config("{filter: {types: [step]}}"))
        #expect(
            step.count == 1 && step[0].hasPrefix("healthgate.yaml:3:") && step[0].contains("routes[0].transforms[0].filter.types")
                && step[0].contains("\"step\" is not a type healthgate knows") && step[0].contains("did you mean \"steps\"?"), "\(step)")
        #expect(
            problems(config("{filter: {exclude_types: [HKQuantityTypeIdentifierStepCount]}}")).first?.contains(
                "healthgate calls it \"steps\"") == true)
        #expect(problems(config("{filter: {values: {heartrate: {max: 250}}}}")).first?.contains("did you mean \"heart_rate\"?") == true)
        #expect(problems(config("{aggregate: {types: [stepz]}}")).first?.contains("did you mean \"steps\"?") == true)
        #expect(problems(config("{rename: {types: {step: walking_steps}}}")).first?.contains("did you mean \"steps\"?") == true)
        #expect(problems(config("{convert: {bodymass: kg}}")).first?.contains("did you mean \"body_mass\"?") == true)
        #expect(
            problems(config("{convert: {HKQuantityTypeIdentifierBodyMass: kg}}")).first?.contains("did you mean \"body_mass\"?") == true)
        let mqtt = "{kind: mqtt, url: \"mqtt://127.0.0.1:1\", include: [stepz]}"
        #expect(problems(config("{tag: {a: b}}", sink: mqtt)).first?.contains("sinks.s.include") == true)
        // Known names, kinds named by their type, and globs (for types not known yet) pass.
        #expect(problems(config("{filter: {types: [steps, workout, sleep_analysis, ecg, \"heart_*\", \"someNewType*\"]}}")).isEmpty)
        #expect(problems(config("{tag: {a: b}}", sink: "{kind: mqtt, url: \"mqtt://127.0.0.1:1\", include: [steps, \"heart_*\"]}")).isEmpty)
    }

    @Test func anEmptyConfigIsAMistake() {
        for text in ["", "# only a comment\n", "\n\n"] {
            #expect(problems(text).first?.contains("the config is empty") == true, "\(problems(text))")
        }
    }

    @Test func theEmbeddedDefaultLoads() throws {
        let t = try load(DefaultConfig.render(listen: "0.0.0.0:8080", dataDir: "/tmp/x", token: "hg_t", secret: "whsec_s"))
        #expect(t.listenHost == "0.0.0.0" && t.listenPort == 8080)
        #expect(t.receivers.map(\.name) == ["syncky", "health-auto-export", "influx", "ingest", "healthsync"])
        #expect(
            t.receivers.map(\.receiver.paths) == [
                ["/syncky"], ["/api/data"], ["/api/v2/write", "/write"], ["/v1/ingest"],
                ["/api/apple-health/sync"]
            ])
        #expect(t.sinks.map(\.name) == ["archive"])
        #expect(t.routes.count == 1)
        #expect(t.warnings.isEmpty)
        // Each receiver is bound to the first phone that writes to it (the token alone does not
        // let anyone write as any device).
        #expect(t.receivers.allSatisfy { $0.config.devices == .firstSeen })
    }

    @Test func theDesignExampleDecodesApartFromSinksNotBuiltYet() {
        // DESIGN.md's example, with only the kinds that exist today.
        let text = """
            listen: 0.0.0.0:8080
            data_dir: ./healthgate-data
            receivers:
              my-iphone:
                kind: syncky
                path: /syncky/my-iphone
                auth: {type: bearer, token: "${PHONE_TOKEN}"}
                hmac: {secret: "${PHONE_HMAC}"}
                device: my-iphone
                write_back: true
                name: My iPhone
                public_url: https://gw.example.net/syncky/my-iphone
                types: [steps, heart_rate]
            routes:
              - name: live
                from: [my-iphone]
                transforms:
                  - filter: {types: [steps, heart_rate, "body_*"]}
                to: [archive]
            sinks:
              archive:  {kind: file, path: "archive/{device}/{date}.ndjson"}
            """
        #expect(problems(text, env: ["PHONE_TOKEN": "t", "PHONE_HMAC": "whsec_x"]).isEmpty)
        let unset = problems(text)
        #expect(unset.count == 2)
        #expect(unset.allSatisfy { $0.contains("PHONE_") })
    }

    @Test func reportsEveryProblemAtOnceWithLocationsAndSuggestions() {
        let text = """
            listen: 0.0.0.0:8080
            receivers:
              phone:
                kind: syncky
                auth: {type: bearer, tokn: abc}
              other:
                kind: synky
            routes:
              - from: [phone]
                to: [archiv]
            sinks:
              archive: {kind: file, path: "a/{date}.ndjson", rotate_byte: 1MB}
            """
        let p = problems(text)
        #expect(
            p.contains {
                $0.hasPrefix("healthgate.yaml:5:") && $0.contains("unknown key \"tokn\"") && $0.contains("did you mean \"token\"")
            }, "\(p)")
        #expect(p.contains { $0.contains("unknown receiver kind \"synky\"") && $0.contains("did you mean \"syncky\"") }, "\(p)")
        #expect(p.contains { $0.contains("no sink is named \"archiv\"") && $0.contains("did you mean \"archive\"") }, "\(p)")
        #expect(p.contains { $0.hasPrefix("healthgate.yaml:12:") && $0.contains("\"rotate_byte\"") && $0.contains("rotate_bytes") }, "\(p)")
        #expect(p.count == 4, "\(p)")
    }

    @Test func checksAuthBlocks() {
        let base = """
            receivers:
              phone:
                kind: syncky
                auth: AUTH
            """
        #expect(problems(base.replacingOccurrences(of: "AUTH", with: "{type: bearer}")).first?.contains("needs \"token\"") == true)
        #expect(problems(base.replacingOccurrences(of: "AUTH", with: "{type: basic, token: p}")).first?.contains("needs \"user\"") == true)
        #expect(
            problems(base.replacingOccurrences(of: "AUTH", with: "{type: header, token: p, header: Authorization}")).first?.contains(
                "cannot be a custom auth header") == true)
        #expect(problems(base.replacingOccurrences(of: "AUTH", with: "{type: none, token: p}")).first?.contains("no meaning") == true)
        #expect(problems(base.replacingOccurrences(of: "AUTH", with: "{type: magic, token: p}")).count == 1)
        #expect(problems(base.replacingOccurrences(of: "AUTH", with: "{type: header, token: p, header: X-Api-Key}")).isEmpty)
    }

    @Test func refusesTwoReceiversOnOnePathAndABadListen() {
        let p = problems(
            """
            listen: localhost
            receivers:
              a: {kind: syncky, path: /hook}
              b: {kind: syncky, path: /hook}
            """)
        #expect(p.contains { $0.contains("already the path of receiver \"a\"") }, "\(p)")
        #expect(p.contains { $0.contains("IP:PORT") }, "\(p)")
    }

    @Test func receiverPathsMatchWithOrWithoutATrailingSlash() throws {
        let t = try load(
            """
            receivers:
              a: {kind: syncky, path: /syncky/}
            """)
        #expect(t.receivers[0].receiver.paths == ["/syncky"])
        #expect(
            problems(
                """
                receivers:
                  a: {kind: syncky, path: /hook/}
                  b: {kind: syncky, path: /hook}
                """
            ).count == 1)
    }

    @Test func sinkSettingsThatWouldDoNothingAreRefused() {
        let p = problems(
            """
            sinks:
              s: {kind: file, path: x.ndjson, queue: {when_full: drop_oldest}, retry: {initial: 10s, max: 1s}}
            """)
        #expect(p.count == 2, "\(p)")
        #expect(p.contains { $0.contains("set queue.max_bytes too") })
        #expect(p.contains { $0.contains("retry.initial") })
    }

    /// A mistyped placeholder once became a literal `{phone}` directory in the archive.
    @Test func aFilePathWithAnUnknownPlaceholderIsRefused() {
        let p = problems(
            """
            sinks:
              s: {kind: file, path: "archive/{phone}/{date}.ndjson"}
            """)
        #expect(p.count == 1, "\(p)")
        #expect(
            p.first?.contains("sinks.s.path: unknown placeholder {phone}; a template may use {device}, {receiver}, {date}, {type}, {kind}")
                == true, "\(p)")
    }

    @Test func warnsAboutSinksAndReceiversNoRouteUses() throws {
        let t = try load(
            """
            receivers:
              a: {kind: syncky}
            sinks:
              s: {kind: file, path: x.ndjson}
            """)
        #expect(t.warnings.count == 2)
    }

    @Test func unknownTransformsAreNamed() {
        let p = problems(
            """
            receivers:
              a: {kind: syncky}
            routes:
              - from: ["*"]
                transforms:
                  - filtr: {types: [steps]}
                to: [s]
            sinks:
              s: {kind: file, path: x.ndjson}
            """)
        #expect(p.count == 1)
        #expect(p.first?.contains("unknown transform \"filtr\" — did you mean \"filter\"?") == true, "\(p)")
    }

    @Test func parsesListenForms() {
        #expect(ConfigLoader.parseListen("0.0.0.0:8080")! == ("0.0.0.0", 8080))
        #expect(ConfigLoader.parseListen("[::1]:9000")! == ("::1", 9000))
        #expect(ConfigLoader.parseListen(":8080")! == ("0.0.0.0", 8080))
        #expect(ConfigLoader.parseListen("8080") == nil)
        #expect(ConfigLoader.parseListen("localhost:8080")! == ("127.0.0.1", 8080))
        // libmicrohttpd binds to an address, not a name: say so at check time, not at start.
        #expect(ConfigLoader.parseListen("myhost.local:8080") == nil)
        #expect(ConfigLoader.parseListen("h:99999") == nil)
    }
}

@Suite struct SetupLinkTests {
    /// The guide's section 9 example, byte for byte, from a receiver's config.
    @Test func buildsTheGuidesExampleLink() throws {
        let t = try ConfigLoader.load(
            text: """
                receivers:
                  header:
                    kind: syncky
                    path: /hook/header
                    name: Vector header
                    public_url: https://receiver.example/hook/header
                    auth: {type: header, header: X-Api-Key, token: vec_key_x9VHBdwKQo-KwlcOB9v4cwlAawCa0nF2NWQRO1qLDlI}
                    types: [heart_rate, steps]
                """, file: "t.yaml", environment: [:], logger: Logger(component: "t", sink: MemoryLogSink()))
        let r = t.receivers[0]
        let link = try SetupLink.build(
            receiver: r.name, config: r.config, topology: t, host: nil, format: "native",
            scheme: "syncky")
        #expect(
            link
                == "syncky://webhook?v=1&name=Vector%20header&url=https%3A%2F%2Freceiver.example%2Fhook%2Fheader&format=native&auth=header&header=X-Api-Key&token=vec_key_x9VHBdwKQo-KwlcOB9v4cwlAawCa0nF2NWQRO1qLDlI&types=heart_rate,steps"
        )
    }
}
