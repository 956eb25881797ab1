import Foundation
@testable import Gateway
import HealthgateCore
@testable import HealthgateTesting
import Posix
import SinkKit
@testable import SinkPostgres
import Testing
import YAMLConfig

/// The postgres sink through `serve`, against a real PostgreSQL 15: rows equal distinct keys
/// after resends, deletions remove every part, replacements replace, the views answer, and a
/// server restart mid-stream loses nothing.
@Suite(.serialized) struct PostgresSinkTests {
    static func config(_ db: DatabaseProcess, extra: String = "") -> String {
        """
        listen: 127.0.0.1:0
        data_dir: DATA_DIR
        receivers:
        \(Vectors.phoneReceiver)
          chunks: {kind: ingest, auth: {type: bearer, token: ingest-token-123456}}
        routes:
          - {from: [phone, chunks], to: [db]}
        sinks:
          db:
            kind: postgres
            dsn: "\(db.postgresURL)"
            connect_timeout: 2s
            retry: {initial: 100ms, max: 500ms}
            batch: {max_wait: 10ms}
        \(extra)
        """
    }

    static func z(_ t: Int64) -> String { Timestamp(seconds: t).rfc3339() }
    static let base: Int64 = 1_796_112_000 // 2026-12-01T08:00:00Z

    static func q(_ uuid: String, _ type: String, _ value: Double, _ unit: String, at t: Int64, extra: String = "") -> String {
        #"{"uuid":"\#(uuid)","type":"\#(type)","value":\#(value),"unit":"\#(unit)","start":"\#(z(t))","end":"\#(z(t + 59))"\#(extra),"source":{"app":"com.apple.Health","device":"Apple Watch"}}"#
    }

    func post(_ serve: ServeProcess, _ samples: [String], deleted: [String] = []) throws {
        let delivery = UUID().uuidString.lowercased()
        let body = Vectors.syncBody(samples: samples, deleted: deleted, delivery: delivery)
        let r = try serve.client().request(
            "POST", "/hook", headers: LiveServeTests.signedHeaders(body, delivery: delivery),
            body: Array(body.utf8))
        #expect(r.status == 200, "\(String(decoding: r.body, as: UTF8.self))")
    }

    func ingest(_ serve: ServeProcess, _ body: String) throws {
        let r = try serve.client().request(
            "POST", "/v1/ingest",
            headers: [
                ("Authorization", "Bearer ingest-token-123456"),
                ("Content-Type", "application/json")
            ], body: Array(body.utf8))
        #expect(r.status == 202, "\(String(decoding: r.body, as: UTF8.self))")
    }

    /// Waits until `sql` answers `expected`, and fails with what it answered instead.
    static func expect(
        _ db: DatabaseProcess, _ sql: String, is expected: String, _ seconds: Double = 10,
        sourceLocation: Testing.SourceLocation = #_sourceLocation
    ) {
        #expect(db.answer(sql, becomes: expected, within: seconds) == expected, sourceLocation: sourceLocation)
    }

    @Test func rowsFollowThePhoneThroughResendsDeletesAndReplacements() throws {
        let db = try DatabaseProcess.postgres()
        let serve = try ServeProcess(config: Self.config(db))
        let steps = [
            Self.q("s1", "steps", 1200, "count", at: Self.base), Self.q("s2", "steps", 800, "count", at: Self.base + 3600),
            Self.q("h1", "heart_rate", 61, "count/min", at: Self.base + 60)
        ]
        try post(serve, steps)
        Self.expect(db, "SELECT count(*) FROM healthgate.records", is: "3")
        // The same chunk again: nothing changes (not even updated_at).
        let before = try db.psql("SELECT string_agg(uuid || updated_at::text, ',' ORDER BY uuid) FROM healthgate.records")
        try post(serve, steps)
        #expect(ServeProcess.eventually { serve.metric("healthgate_sink_unchanged_total", sink: "db") == 3 })
        #expect(try db.psql("SELECT string_agg(uuid || updated_at::text, ',' ORDER BY uuid) FROM healthgate.records") == before)
        #expect(serve.metric("healthgate_sink_inserted_total", sink: "db") == 3)
        // A corrected sample replaces its row; a deletion removes it.
        try post(serve, [Self.q("s2", "steps", 850, "count", at: Self.base + 3600)], deleted: [#"{"uuid":"s1","type":"steps"}"#])
        Self.expect(
            db, "SELECT string_agg(uuid || '=' || value, ',' ORDER BY uuid) FROM healthgate.records",
            is: "h1=61,s2=850")
        #expect(serve.metric("healthgate_sink_updated_total", sink: "db") == 1)
        #expect(serve.metric("healthgate_sink_deleted_total", sink: "db") == 1)
        // A characteristic is replaced in place.
        try post(serve, [#"{"uuid":"characteristic:blood_type","type":"characteristic","name":"blood_type","value":"a_positive"}"#])
        try post(serve, [#"{"uuid":"characteristic:blood_type","type":"characteristic","name":"blood_type","value":"o_negative"}"#])
        Self.expect(db, "SELECT text_value FROM healthgate.records WHERE uuid = 'characteristic:blood_type'", is: "o_negative")
        // The columns people query.
        #expect(
            try db.psql(
                """
                SELECT kind, type, start_at, end_at, local_day, unit, source_app, source_device, receiver
                FROM healthgate.records WHERE uuid = 'h1'
                """)
                == "quantity|heart_rate|2026-12-01 08:01:00+00|2026-12-01 08:01:59+00|2026-12-01|count/min|com.apple.Health|Apple Watch|phone"
        )
        // status says the schema version and the counts.
        // (status.json is written every second.)
        var status = ""
        _ = ServeProcess.eventually {
            status = (try? CLITests.run(["status", "--config", serve.configPath]).out) ?? ""
            return status.contains("inserted 4")
        }
        #expect(status.contains("schema healthgate at version \(PostgresSchema.latest)"), "\(status)")
        #expect(status.contains("inserted 4, updated ") && status.contains("deleted 1"), "\(status)")
        serve.stop()
    }

    /// `/v1/ingest`: deletions of kind any remove a sample and a workout alike; heart-rate samples
    /// linked to a workout (workout_source_uuid) or in its window give its heart rate, whether they
    /// came before the workout or after it; the daily totals and the latest values answer.
    @Test func theViewsAnswer() throws {
        let db = try DatabaseProcess.postgres()
        let serve = try ServeProcess(config: Self.config(db))
        // Heart rate during a run that has not arrived yet (one linked, one in the window).
        try ingest(
            serve,
            #"""
            {"device_id":"ios-1","time_zone":"Europe/Budapest","samples":[
             {"source_uuid":"hr-a","data_type":"heartRate","ts":"2026-12-01T16:05:00Z","value":140,"unit":"count/min","workout_source_uuid":"run-1"},
             {"source_uuid":"hr-b","data_type":"heartRate","ts":"2026-12-01T16:20:00Z","value":160,"unit":"count/min"},
             {"source_uuid":"st-1","data_type":"stepCount","ts":"2026-12-01T22:30:00Z","value":500,"unit":"count"},
             {"source_uuid":"st-2","data_type":"stepCount","ts":"2026-12-01T23:30:00Z","value":300,"unit":"count"},
             {"source_uuid":"st-3","data_type":"stepCount","ts":"2026-12-01T12:00:00Z","value":1000,"unit":"count"}]}
            """#)
        Self.expect(db, "SELECT count(*) FROM healthgate.records", is: "5")
        #expect(try db.psql("SELECT count(*) FROM healthgate.workouts") == "0")
        try ingest(
            serve,
            #"""
            {"device_id":"ios-1","workouts":[{"source_uuid":"run-1","activity_type":"running","started_at":"2026-12-01T16:00:00Z",
              "ended_at":"2026-12-01T16:30:00Z","total_energy_kcal":300,"total_distance_m":5000}],
             "samples":[{"source_uuid":"hr-c","data_type":"heartRate","ts":"2026-12-01T16:25:00Z","value":150,"unit":"count/min"}]}
            """#)
        Self.expect(
            db, "SELECT activity, avg_bpm, max_bpm, heart_rate_samples FROM healthgate.workouts WHERE uuid = 'run-1'",
            is: "running|150|160|3")
        // Budapest is UTC+1: 23:30Z is 00:30 on 2 December there.
        #expect(
            try db.psql("SELECT day || '=' || total FROM healthgate.daily_totals WHERE type = 'steps' ORDER BY day")
                == "2026-12-01=1500\n2026-12-02=300")
        #expect(try db.psql("SELECT value FROM healthgate.latest WHERE device = 'ios-1' AND type = 'heart_rate'") == "150")
        // A deletion of kind any removes the workout as it would a sample.
        try ingest(serve, #"{"device_id":"ios-1","deletions":["run-1","st-3"]}"#)
        Self.expect(db, "SELECT count(*) FROM healthgate.workouts", is: "0")
        #expect(try db.psql("SELECT total FROM healthgate.daily_totals WHERE type = 'steps' AND day = '2026-12-01'") == "500")
        serve.stop()
    }

    /// Issue 47's rule for every sink: a refusal that says the destination is wrong (here a table
    /// renamed by hand, 42P01) is the sink's problem, not the records': they wait, the sink shows
    /// as failing (/healthz degraded, `status`), the log says it about once a minute, nothing goes
    /// to the dead letters, and all of it lands once the table is back.
    @Test func aTableAlteredByHandKeepsTheRecordsAndSaysTheSinkIsFailing() throws {
        let db = try DatabaseProcess.postgres()
        let serve = try ServeProcess(config: Self.config(db))
        try post(serve, [Self.q("t0", "steps", 10, "count", at: Self.base)])
        Self.expect(db, "SELECT count(*) FROM healthgate.records", is: "1")
        _ = try db.psql("ALTER TABLE healthgate.records RENAME TO records_moved")
        for n in 1...3 { try post(serve, [Self.q("t\(n)", "steps", 10, "count", at: Self.base + Int64(n) * 60)]) }
        var health: [String: Any] = [:]
        #expect(
            ServeProcess.eventually(15) {
                health = serve.healthz()
                return (health["sinks"] as? [String: String])?["db"] == "failing"
            }, "\(health)")
        #expect(health["status"] as? String == "degraded")
        var status = try CLITests.run(["status", "--config", serve.configPath])
        #expect(
            ServeProcess.eventually(5) { // status.json is written once a second
                status = (try? CLITests.run(["status", "--config", serve.configPath])) ?? status
                return status.out.contains("FAILING") && status.out.contains("42P01") && status.out.contains("3 record(s) waiting")
            }, "\(status.out)")
        #expect((FileIO.fileSize(serve.dataDir + "/sinks/db/dead-letters.ndjson") ?? 0) == 0, "records were dead-lettered")
        usleep(2_000_000) // retries every 500 ms meanwhile
        let said = serve.stderrText.components(separatedBy: "only a person can fix").count - 1
        #expect(said >= 1 && said <= 2, "\(said) lines: \(serve.stderrText.suffix(2000))")

        _ = try db.psql("ALTER TABLE healthgate.records_moved RENAME TO records")
        Self.expect(db, "SELECT count(*) FROM healthgate.records", is: "4", 20)
        #expect(
            ServeProcess.eventually(10) {
                let h = serve.healthz()
                return h["status"] as? String == "ok"
            })
        serve.stop()
    }

    @Test func sleepNights() throws {
        let db = try DatabaseProcess.postgres()
        let serve = try ServeProcess(config: Self.config(db, extra: "    time_zone: Europe/Budapest"))
        func stage(_ uuid: String, _ name: String, _ from: String, _ to: String) -> String {
            #"{"uuid":"\#(uuid)","type":"sleep_analysis","value":"\#(name)","start":"\#(from)","end":"\#(to)"}"#
        }
        try post(
            serve,
            [
                stage("n1", "in_bed", "2026-11-30T21:00:00Z", "2026-12-01T05:30:00Z"),
                stage("n2", "asleep_core", "2026-11-30T21:10:00Z", "2026-12-01T02:10:00Z"),
                stage("n3", "asleep_deep", "2026-12-01T02:10:00Z", "2026-12-01T03:40:00Z"),
                stage("n4", "awake", "2026-12-01T03:40:00Z", "2026-12-01T03:50:00Z"),
                stage("n5", "asleep_rem", "2026-12-01T03:50:00Z", "2026-12-01T05:20:00Z")
            ])
        Self.expect(
            db, "SELECT night || ' ' || asleep_hours || ' ' || deep_min || ' ' || in_bed_min FROM healthgate.sleep_nights",
            is: "2026-11-30 8 90 510")
        // Issue 52: the phone recorded the same night as the watch (asleep 21:05–05:25), each
        // moment counts once; its awake minute is inside the phone's sleep. A nap at 14:00 local
        // the next day is the same sleep day; sleep from 19:00 local is the next one's.
        try post(
            serve,
            [
                stage("p1", "asleep_unspecified", "2026-11-30T21:05:00Z", "2026-12-01T05:25:00Z"),
                stage("nap", "asleep_unspecified", "2026-12-01T13:00:00Z", "2026-12-01T13:30:00Z"),
                stage("e1", "asleep_core", "2026-12-01T18:00:00Z", "2026-12-01T19:00:00Z")
            ])
        Self.expect(
            db,
            """
            SELECT string_agg(night || ' ' || round(asleep_hours::numeric, 3) || ' ' || coalesce(round(awake_min::numeric), -1) || ' '
                              || samples, ', ' ORDER BY night) FROM healthgate.sleep_nights
            """,
            is: "2026-11-30 8.833 0 7, 2026-12-01 1.000 -1 1")
        serve.stop()
    }

    /// The server goes away mid-stream (immediate shutdown) and comes back on the same data: what
    /// the phone sent meanwhile is acknowledged, waits in the queue, and lands.
    @Test func aServerRestartMidStreamLosesNothing() throws {
        var db: DatabaseProcess? = try DatabaseProcess.postgres()
        let serve = try ServeProcess(config: Self.config(db!))
        try post(serve, [Self.q("a", "steps", 1, "count", at: Self.base)])
        Self.expect(db!, "SELECT count(*) FROM healthgate.records", is: "1")
        let restart = try db!.restartable()
        db = nil // gone
        try post(serve, [Self.q("b", "steps", 2, "count", at: Self.base + 60)])
        try post(serve, [Self.q("c", "steps", 3, "count", at: Self.base + 120), Self.q("a", "steps", 1, "count", at: Self.base)])
        usleep(500_000)
        db = try restart()
        Self.expect(db!, "SELECT string_agg(uuid, ',' ORDER BY uuid) FROM healthgate.records", is: "a,b,c", 20)
        serve.stop()
    }
}

/// The sink opened directly: migrations (two at once, a newer database refused), outcomes by
/// SQLSTATE, a refused record dead-lettered while the rest lands, what the config refuses.
@Suite struct PostgresSinkDirectTests {
    static func open(_ yaml: String) throws -> PostgresSink {
        let node = try parseYAML(yaml, file: "sink", environment: [:])
        let built = try PostgresSink.build(name: "db", node: node, path: "sinks.db", context: SinkBuildContext(dataDir: "/tmp"))
        return try #require(
            try built.open(
                SinkContext(
                    name: "db", dataDir: "/tmp", stateDir: "/tmp", clock: SystemClock(),
                    logger: Logger(component: "t", sink: MemoryLogSink()))) as? PostgresSink)
    }

    @Test func twoGatewaysMigratingAtOnceBothOpen() throws {
        let db = try DatabaseProcess.postgres()
        let yaml = "kind: postgres\ndsn: \"\(db.postgresURL)\"\nschema: shared"
        let opened = LockedBox(0), failed = LockedBox<[String]>([])
        let threads = (0..<4).map { _ in
            Thread {
                do {
                    let s = try PostgresSinkDirectTests.open(yaml)
                    opened.update { $0 += 1 }
                    s.close()
                } catch {
                    failed.update { $0.append("\(error)") }
                }
            }
        }
        for t in threads { t.start() }
        #expect(ServeProcess.eventually(30) { opened.value + failed.value.count == 4 })
        #expect(failed.value.isEmpty, "\(failed.value)")
        #expect(
            try db.psql("SELECT string_agg(version::text, ',' ORDER BY version) FROM shared.schema_migrations")
                == (1...PostgresSchema.latest).map(String.init).joined(separator: ","))
    }

    @Test func aNewerDatabaseIsRefusedWithWhatToDo() throws {
        let db = try DatabaseProcess.postgres()
        let yaml = "kind: postgres\ndsn: \"\(db.postgresURL)\""
        try Self.open(yaml).close()
        _ = try db.psql("INSERT INTO healthgate.schema_migrations (version, description) VALUES (999, 'from the future')")
        #expect {
            try Self.open(yaml)
        } throws: { error in
            "\(error)".contains("version 999, newer than this healthgate knows")
        }
    }

    /// A record PostgreSQL cannot store (a NUL byte in a text) goes to the dead letters with its
    /// reason; the rest of its batch is written.
    @Test func aRefusedRowIsRejectedAndTheRestLands() throws {
        let db = try DatabaseProcess.postgres()
        let sink = try Self.open("kind: postgres\ndsn: \"\(db.postgresURL)\"")
        func r(_ uuid: String, app: String = "com.apple.Health") -> CanonicalRecord {
            CanonicalRecord(
                kind: "quantity", device: "p", receiver: "r", uuid: uuid, type: "steps", start: Timestamp(seconds: 1_796_112_000),
                end: Timestamp(seconds: 1_796_112_000), value: .number(5), unit: "count", source: RecordSource(app: app, device: nil))
        }
        let result = sink.write(SinkBatch(records: [r("ok1"), r("ok2"), r("bad", app: "x\u{0}y"), r("ok3")]))
        guard case .perRecord(let outcomes) = result else {
            Issue.record("expected one record refused, got \(result)")
            return
        }
        #expect(outcomes.filter { $0 == .accepted }.count == 3)
        if case .rejected(let why) = outcomes[2] {
            #expect(why.contains("SQLSTATE 22021"), "\(why)")
        } else {
            Issue.record("\(outcomes[2])")
        }
        #expect(try db.psql("SELECT string_agg(uuid, ',' ORDER BY uuid) FROM healthgate.records") == "ok1,ok2,ok3")
        sink.close()
    }

    /// Issue 46: a request with a NUL in every other record (text, or a \u0000 in metadata's
    /// JSON) no longer halves its batch down to each of them, holding the sink (and every other
    /// phone behind it) for a minute: they are refused without a round trip, with why, the rest
    /// lands in one go, and a delete of such a key (no row can hold it) is done, unsent.
    @Test func recordsPostgreSQLCannotStoreAreRefusedWithoutARoundTrip() throws {
        let db = try DatabaseProcess.postgres()
        let sink = try Self.open("kind: postgres\ndsn: \"\(db.postgresURL)\"")
        var records: [CanonicalRecord] = []
        for i in 0..<2_000 {
            var r = CanonicalRecord(
                kind: "quantity", device: "p", receiver: "r", uuid: "u\(i)", type: "steps",
                start: Timestamp(seconds: 1_796_112_000 + Int64(i)), end: Timestamp(seconds: 1_796_112_000 + Int64(i)),
                value: .number(5), unit: "count", source: RecordSource(app: "com.apple.Health", device: nil))
            if i % 4 == 1 { r.source = RecordSource(app: "x\u{0}y", device: nil) }
            if i % 4 == 3 { r.metadata = RawJSON(encoded: Array(#"{"note":"a\u0000b"}"#.utf8)) }
            if i % 4 == 2 { r.metadata = RawJSON(encoded: Array(#"{"note":"a\\u0000b"}"#.utf8)) } // an escaped backslash: storable
            records.append(r)
        }
        records.append(CanonicalRecord(op: .delete, kind: "quantity", device: "p", receiver: "r", uuid: "gone\u{0}", type: "steps"))
        let started = Date()
        let result = sink.write(SinkBatch(records: records))
        let took = Date().timeIntervalSince(started)
        guard case .perRecord(let outcomes) = result else {
            Issue.record("expected per-record outcomes, got \(result)")
            return
        }
        let rejected = outcomes.enumerated().filter { if case .rejected = $0.element { true } else { false } }.map(\.offset)
        #expect(rejected == (0..<2_000).filter { $0 % 4 == 1 || $0 % 4 == 3 })
        if case .rejected(let why) = outcomes[1] { #expect(why.contains("NUL") && why.contains("22021"), "\(why)") }
        #expect(outcomes.last == .accepted)
        #expect(try db.psql("SELECT count(*) FROM healthgate.records") == "1000")
        #expect(took < 10, "\(took) s for 2,000 records")
        sink.close()
    }

    /// Every string a phone sends reaches its column exactly, whatever it holds: COPY's
    /// separators and escapes, a literal \N (not NULL), quotes and SQL, non-ASCII.
    @Test func hostileStringsArriveExactly() throws {
        let db = try DatabaseProcess.postgres()
        let sink = try Self.open("kind: postgres\ndsn: \"\(db.postgresURL)\"")
        let nasty = [
            "tab\there", "line\nfeed", "cr\rhere", #"back\slash"#, #"\N"#, "'; DROP TABLE healthgate.records; --",
            "emoji 🫀 and ő", #"{"json":"like"}"#, ""
        ]
        let records = nasty.enumerated().map { i, text in
            var r = CanonicalRecord(
                kind: "category", device: "p\t\(i)", receiver: "r", uuid: "u\\\(i)", type: "mindful_session",
                start: Timestamp(seconds: 1_796_112_000), end: Timestamp(seconds: 1_796_112_060), value: .string(text),
                source: RecordSource(app: text, device: text))
            r.timeZone = text
            return r
        }
        #expect(sink.write(SinkBatch(records: records)) == .accepted)
        sink.close()
        let stored = try db.psql(
            #"SELECT json_agg(json_build_array(device, uuid, text_value, source_app, source_device, time_zone) ORDER BY uuid) FROM healthgate.records"#
        )
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(stored.utf8)) as? [[String]])
        #expect(rows.count == nasty.count)
        for (i, text) in nasty.enumerated() {
            #expect(rows.contains(["p\t\(i)", "u\\\(i)", text, text, text, text]), "\(text.debugDescription)")
        }
    }

    /// A big batch goes out as two transactions at once when its halves share no key; when a
    /// key is in both halves it is written in one, in order, so the later record still wins.
    @Test func bigBatchesUseTwoConnectionsWithoutReordering() throws {
        let db = try DatabaseProcess.postgres()
        let sink = try Self.open("kind: postgres\ndsn: \"\(db.postgresURL)\"")
        func r(_ uuid: String, _ value: Double) -> CanonicalRecord {
            CanonicalRecord(
                kind: "quantity", device: "p", receiver: "r", uuid: uuid, type: "steps", start: Timestamp(seconds: 1_796_112_000),
                end: Timestamp(seconds: 1_796_112_000), value: .number(value), unit: "count")
        }
        let disjoint = (0..<4000).map { r("d\($0)", 1) }
        #expect(sink.write(SinkBatch(records: disjoint)) == .accepted)
        #expect(try db.psql("SELECT count(*) FROM healthgate.records") == "4000")
        #expect(try db.psql("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'healthgate-db'") == "2")
        // The same uuids in both halves, the second half newer: one transaction, the newer wins.
        let overlapping = (0..<2000).map { r("d\($0)", 2) } + (0..<2000).map { r("d\($0)", 3) }
        #expect(sink.write(SinkBatch(records: overlapping)) == .accepted)
        #expect(try db.psql("SELECT string_agg(DISTINCT value::text, ',') FROM healthgate.records WHERE uuid < 'd2'") == "3")
        #expect(sink.report()?.counters.first { $0.name == "inserted" }?.value == 4000)
        #expect(PostgresSink.halvesAreDisjoint(disjoint) && !PostgresSink.halvesAreDisjoint(overlapping))
        sink.close()
        #expect(
            ServeProcess.eventually {
                (try? db.psql("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'healthgate-db'")) == "0"
            })
    }

    @Test func twoHalvesResultsMerge() {
        #expect(PostgresSink.merge(.accepted, 2, .accepted, 3) == .accepted)
        #expect(
            PostgresSink.merge(.keep(reason: "a", retryAfterSeconds: 5), 2, .keep(reason: "b", retryAfterSeconds: 9), 3)
                == .keep(reason: "a", retryAfterSeconds: 9))
        #expect(
            PostgresSink.merge(.accepted, 2, .keep(reason: "down", retryAfterSeconds: nil), 1)
                == .perRecord([.accepted, .accepted, .keep(reason: "down")]))
        #expect(
            PostgresSink.merge(.perRecord([.accepted, .rejected(reason: "x")]), 2, .accepted, 1)
                == .perRecord([.accepted, .rejected(reason: "x"), .accepted]))
    }

    /// sslmode=verify-full with the server's CA in sslrootcert: the sink's connection is TLS;
    /// without the CA the sink refuses to connect (and says why).
    @Test func tlsWithVerifyFull() throws {
        let db = try DatabaseProcess.postgres(tls: true)
        let url = "postgres://healthgate@127.0.0.1:\(db.port)/health?sslmode=verify-full"
        let sink = try Self.open("kind: postgres\ndsn: \"\(url)&sslrootcert=\(db.dir)/cert.pem\"")
        #expect(sink.probe() == .reachable)
        #expect(
            try db.psql(
                """
                SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.application_name = 'healthgate-db'
                """) == "t")
        sink.close()
        let other = ServeProcess.makeTempDir("not-the-ca")
        _ = try DatabaseProcess.run(
            "/usr/bin/openssl",
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                "-nodes", "-keyout", other + "/k.pem", "-out", other + "/ca.pem", "-days", "2",
                "-subj", "/CN=stranger"
            ])
        #expect {
            try Self.open("kind: postgres\ndsn: \"\(url)&sslrootcert=\(other)/ca.pem\"")
        } throws: { error in
            "\(error)".contains("certificate verify failed")
        }
    }

    @Test(arguments: [
        ("08006", PGError.Outcome.retry), ("08001", .retry), ("40001", .retry), ("40P01", .retry), ("53300", .retry),
        ("57P01", .retry), ("57014", .retry), ("22021", .refuse), ("22P02", .refuse), ("23505", .refuse), ("23502", .refuse),
        ("42501", .fix), ("42P01", .fix), ("28P01", .fix), ("3D000", .fix)
    ])
    func outcomesBySQLSTATE(state: String, outcome: PGError.Outcome) {
        #expect(PGError(sqlstate: state, message: "").outcome == outcome)
    }

    @Test func noSQLSTATEMeansTheConnectionFailedAndIsRetried() {
        #expect(PGError(sqlstate: nil, message: "connection refused").outcome == .retry)
    }

    @Test func mistakesAreSaidWithoutConnecting() {
        func problems(_ yaml: String) -> String {
            do {
                let node = try parseYAML(yaml, file: "sink", environment: [:])
                _ = try PostgresSink.build(name: "db", node: node, path: "sinks.db", context: SinkBuildContext(dataDir: "/tmp"))
                return ""
            } catch {
                return "\(error)"
            }
        }
        #expect(problems("kind: postgres\ndsn: \"host=localhost dbname=health\"") == "")
        #expect(problems("kind: postgres\ndsn: \"postgres://u@h:5432/db?sslmode=require\"") == "")
        #expect(problems("kind: postgres\ndsn: \"postgres://[broken\"").contains("not a PostgreSQL connection string"))
        #expect(problems("kind: postgres\ndsn: \"hots=localhost\"").contains("not a PostgreSQL connection string"))
        #expect(problems("kind: postgres\ndsn: \"host=h\"\nschema: \"Robert'); DROP\"").contains("not a schema name"))
        #expect(problems("kind: postgres\ndsn: \"host=h\"\ntime_zone: Mars/Olympus").contains("not a time zone"))
        #expect(problems("kind: postgres\ndsn: \"host=h\"\nconnect_timeout: 1s").contains("at least 2s"))
        #expect(problems("kind: postgres\ndsn: \"host=h sslrootcert=/nonexistent/ca.pem\"").contains("cannot be read"))
        #expect(problems("kind: postgres\ndsn: \"host=h\"\nconnections: 3").contains("connections is 1 or 2"))
    }

    /// `check` and `status` show where the sink writes, never its password.
    @Test func theSummaryHoldsNoPassword() throws {
        let node = try parseYAML(
            "kind: postgres\ndsn: \"postgres://hg:s3cret-pw@db.example:5433/health\"\npassword: other-secret",
            file: "sink", environment: [:])
        let built = try PostgresSink.build(name: "db", node: node, path: "sinks.db", context: SinkBuildContext(dataDir: "/tmp"))
        #expect(built.summary == "postgres hg@db.example:5433/health, schema healthgate")
        #expect(!built.summary.contains("s3cret") && !built.summary.contains("other-secret"))
    }
}
