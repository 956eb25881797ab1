import Foundation
import Glibc
@testable import Gateway
import HealthgateCore
@testable import HealthgateTesting
import Testing
import YAMLConfig

/// The read API over a real PostgreSQL 15, fed through `serve`: each endpoint answers what was
/// sent (after resends and deletions), paging visits every row once, tokens read only their
/// devices and never ingest, ingest tokens never read, bad input is a 400 problem and a database
/// that is down a 503 with Retry-After.
@Suite(.serialized) struct ReadAPITests {
    static let agent = "agent-read-token-0123456789"
    static let alice = "alice-read-token-0123456789"

    static func config(_ db: DatabaseProcess) -> String {
        PostgresSinkTests.config(
            db,
            extra: """
                read_api:
                  sink: db
                  max_limit: 50
                  tokens:
                    - {token: \(agent)}
                    - {token: \(alice), devices: [ios-1]}
                """)
    }

    /// Posts a chunk to the ingest API; returns its `batch_id`.
    @discardableResult
    func ingest(_ serve: ServeProcess, _ body: String) throws -> String? {
        let r = try serve.client().request(
            "POST", "/v1/ingest",
            headers: [
                ("Authorization", "Bearer ingest-token-123456"),
                ("Content-Type", "application/json")
            ], body: Array(body.utf8))
        #expect(r.status == 202, "\(String(decoding: r.body, as: UTF8.self))")
        return r.json?["batch_id"] as? String
    }

    func get(_ serve: ServeProcess, _ pathAndQuery: String, token: String? = agent) throws -> (
        status: Int, json: [String: Any], headers: [(String, String)]
    ) {
        let r = try serve.client().request(
            "GET", "/api/v1" + pathAndQuery, headers: token.map { [("Authorization", "Bearer \($0)")] } ?? [])
        let json = (try? JSONSerialization.jsonObject(with: Data(r.body))) as? [String: Any] ?? [:]
        return (r.status, json, r.headers)
    }

    static func data(_ j: [String: Any]) -> [[String: Any]] { j["data"] as? [[String: Any]] ?? [] }

    static let samples = #"""
        {"device_id":"ios-1","time_zone":"Europe/Budapest","samples":[
         {"source_uuid":"hr-a","data_type":"heartRate","ts":"2026-12-01T16:05:00Z","value":140,"unit":"count/min","workout_source_uuid":"run-1"},
         {"source_uuid":"hr-b","data_type":"heartRate","ts":"2026-12-01T16:20:00Z","value":160,"unit":"count/min"},
         {"source_uuid":"st-1","data_type":"stepCount","ts":"2026-12-01T22:30:00Z","value":500,"unit":"count"},
         {"source_uuid":"st-2","data_type":"stepCount","ts":"2026-12-01T23:30:00Z","value":300,"unit":"count"},
         {"source_uuid":"st-3","data_type":"stepCount","ts":"2026-12-01T12:00:00Z","value":1000,"unit":"count"}],
         "workouts":[{"source_uuid":"run-1","activity_type":"running","started_at":"2026-12-01T16:00:00Z",
          "ended_at":"2026-12-01T16:30:00Z","total_energy_kcal":300,"total_distance_m":5000}]}
        """#

    @Test func eachEndpointAnswersWhatWasSentAfterResendsAndDeletes() throws {
        let db = try DatabaseProcess.postgres()
        let serve = try ServeProcess(config: Self.config(db))
        try ingest(serve, Self.samples)
        try ingest(serve, Self.samples) // resent: nothing doubles
        try ingest(
            serve,
            #"{"device_id":"ios-2","samples":[{"source_uuid":"st-9","data_type":"stepCount","ts":"2026-12-01T09:00:00Z","value":42,"unit":"count"}]}"#
        )
        try ingest(serve, #"{"device_id":"ios-1","deletions":["st-3"]}"#)
        PostgresSinkTests.expect(db, "SELECT count(*) FROM healthgate.records", is: "6")

        let s = try get(serve, "/samples?device=ios-1&type=steps")
        #expect(s.status == 200)
        let steps = Self.data(s.json)
        #expect(steps.map { $0["uuid"] as? String } == ["st-1", "st-2"])
        #expect(steps.map { $0["value"] as? Double } == [500, 300])
        #expect(steps.first?["start"] as? String == "2026-12-01T22:30:00Z")
        #expect(steps.first?["device"] as? String == "ios-1" && steps.first?["kind"] as? String == "quantity")
        #expect(steps.first?["timezone"] as? String == "Europe/Budapest" && steps.first?["extra"] == nil, "\(steps)")
        #expect(s.json["next_cursor"] is NSNull)
        // A time window: from is inclusive, to is not.
        let window = try get(serve, "/samples?device=ios-1&from=2026-12-01T16:05:00Z&to=2026-12-01T16:20:00Z")
        #expect(Self.data(window.json).map { $0["uuid"] as? String } == ["hr-a"])

        let w = try get(serve, "/workouts?device=ios-1")
        let run = Self.data(w.json)
        #expect(run.count == 1)
        #expect(run.first?["activity"] as? String == "running" && run.first?["distance_m"] as? Double == 5000)
        #expect(run.first?["energy_kcal"] as? Double == 300 && run.first?["duration_s"] != nil)
        let hr = run.first?["heart_rate"] as? [String: Any]
        #expect(hr?["avg_bpm"] as? Double == 150 && hr?["max_bpm"] as? Double == 160 && hr?["samples"] as? Int == 2)

        // Budapest is UTC+1: 23:30Z is 00:30 on 2 December there; st-3 was deleted.
        let d = Self.data(try get(serve, "/daily?type=steps").json)
        #expect(
            d.map { "\($0["device"]!) \($0["day"]!) \($0["value"]!) \($0["how"]!)" }
                == ["ios-1 2026-12-01 500 sum", "ios-2 2026-12-01 42 sum", "ios-1 2026-12-02 300 sum"])
        let mean = Self.data(try get(serve, "/daily?type=heart_rate&device=ios-1").json)
        #expect(mean.first?["value"] as? Double == 150 && mean.first?["how"] as? String == "mean" && mean.first?["max"] as? Double == 160)

        let latest = Self.data(try get(serve, "/latest?device=ios-1").json)
        #expect(latest.first { $0["type"] as? String == "heart_rate" }?["value"] as? Double == 160)
        #expect(latest.first { $0["type"] as? String == "steps" }?["value"] as? Double == 300)
        let everyone = Self.data(try get(serve, "/latest").json)
        #expect(Set(everyone.compactMap { $0["device"] as? String }) == ["ios-1", "ios-2"])
        // Paged one at a time, latest visits the same rows.
        var paged: [String] = []
        var cursor: String?
        repeat {
            let page = try get(serve, "/latest?limit=1" + (cursor.map { "&cursor=" + $0 } ?? ""))
            paged += Self.data(page.json).map { "\($0["device"]!) \($0["type"]!)" }
            cursor = page.json["next_cursor"] as? String
        } while cursor != nil && paged.count < 20
        #expect(paged == everyone.map { "\($0["device"]!) \($0["type"]!)" })

        let doc = try get(serve, "/openapi.json", token: nil)
        #expect(doc.status == 200 && doc.json["openapi"] as? String == "3.0.3")
        #expect(
            Set((doc.json["paths"] as? [String: Any] ?? [:]).keys) == ["/samples", "/workouts", "/daily", "/sleep", "/latest", "/batches"])
        serve.stop()
    }

    @Test func pagingVisitsEveryRowOnceAndScopesHold() throws {
        let db = try DatabaseProcess.postgres()
        let serve = try ServeProcess(config: Self.config(db))
        // 23 samples, three of them at the same instant (the cursor must tell them apart).
        var items: [String] = []
        for i in 0..<23 {
            let t = Timestamp(seconds: 1_796_112_000 + Int64(min(i, 20)) * 60).rfc3339()
            items.append(#"{"source_uuid":"s-\#(i)","data_type":"heartRate","ts":"\#(t)","value":\#(60 + i),"unit":"count/min"}"#)
        }
        try ingest(serve, #"{"device_id":"ios-1","samples":[\#(items.joined(separator: ","))]}"#)
        try ingest(
            serve,
            #"{"device_id":"ios-2","samples":[{"source_uuid":"other","data_type":"heartRate","ts":"2026-12-01T08:00:00Z","value":99,"unit":"count/min"}]}"#
        )
        PostgresSinkTests.expect(db, "SELECT count(*) FROM healthgate.records", is: "24")
        var seen: [String] = []
        var cursor: String?
        var pages = 0
        repeat {
            let q = "/samples?device=ios-1&limit=5" + (cursor.map { "&cursor=" + $0 } ?? "")
            let page = try get(serve, q)
            #expect(page.status == 200)
            seen += Self.data(page.json).compactMap { $0["uuid"] as? String }
            cursor = page.json["next_cursor"] as? String
            pages += 1
        } while cursor != nil && pages < 20
        #expect(seen.count == 23 && Set(seen).count == 23, "\(seen)")
        #expect(pages == 5)
        // limit is capped at max_limit.
        #expect(try get(serve, "/samples?limit=5000").json["limit"] as? Int == 50)

        // Alice's token reads ios-1 only: by default, and not ios-2 when asked.
        let mine = try get(serve, "/samples?limit=50", token: Self.alice)
        #expect(Set(Self.data(mine.json).compactMap { $0["device"] as? String }) == ["ios-1"])
        #expect(try get(serve, "/samples?device=ios-2", token: Self.alice).status == 403)
        #expect(
            try get(serve, "/latest", token: Self.alice).json["data"].map {
                ($0 as? [[String: Any]])?.allSatisfy { $0["device"] as? String == "ios-1" }
            } == true)
        // Ingest tokens do not read; read tokens do not ingest; no token, no data.
        let asIngest = try get(serve, "/samples", token: "ingest-token-123456")
        #expect(asIngest.status == 401 && asIngest.headers.contains { $0.0.lowercased() == "www-authenticate" })
        #expect(try get(serve, "/samples", token: nil).status == 401)
        // Said in the log (the first at once), without the token.
        #expect(
            ServeProcess.eventually(5) { serve.stderrText.contains("read API: refused a request from 127.0.0.1 (") },
            "\(serve.stderrText)")
        #expect(!serve.stderrText.contains("ingest-token-123456"))
        let r = try serve.client().request(
            "POST", "/v1/ingest",
            headers: [
                ("Authorization", "Bearer \(Self.agent)"),
                ("Content-Type", "application/json")
            ],
            body: Array(#"{"device_id":"ios-1","samples":[]}"#.utf8))
        #expect(r.status == 401 || r.status == 403)
        serve.stop()
    }

    /// Samples of `kb` KB of metadata each, posted through the phone receiver a few at a time.
    func postBig(_ serve: ServeProcess, count: Int, kb: Int) throws {
        let note = String(repeating: "x", count: kb * 1000)
        let samples = (0..<count).map { i in
            PostgresSinkTests.q(
                "big-\(i)", "heart_rate", 60, "count/min", at: PostgresSinkTests.base + Int64(i) * 60,
                extra: #","metadata":{"note":"\#(note)"}"#)
        }
        let perRequest = max(1, 600 / kb)
        for start in stride(from: 0, to: count, by: perRequest) {
            try PostgresSinkTests().post(serve, Array(samples[start..<min(count, start + perRequest)]))
        }
    }

    /// Rows of 30 KB of metadata (any phone can store them) used to make one page of `limit`
    /// rows as big as they came: a page now ends past `max_answer_bytes`, its cursor going on,
    /// and paging still visits every row once.
    @Test func aPageIsBoundedByBytesAndItsCursorGoesOn() throws {
        let db = try DatabaseProcess.postgres()
        let serve = try ServeProcess(
            config: Self.config(db).replacingOccurrences(
                of: "  max_limit: 50\n",
                with: "  max_limit: 50\n  max_answer_bytes: 64KiB\n"))
        try postBig(serve, count: 8, kb: 30)
        PostgresSinkTests.expect(db, "SELECT count(*) FROM healthgate.records", is: "8")
        var seen: [String] = []
        var cursor: String?
        var pages = 0
        repeat {
            let r = try serve.client().request(
                "GET", "/api/v1/samples?limit=50" + (cursor.map { "&cursor=" + $0 } ?? ""),
                headers: [("Authorization", "Bearer \(Self.agent)")])
            #expect(r.status == 200)
            #expect(r.body.count <= 64 * 1024 + 32_000, "\(r.body.count) bytes")
            let json = (try? JSONSerialization.jsonObject(with: Data(r.body))) as? [String: Any] ?? [:]
            seen += Self.data(json).compactMap { $0["uuid"] as? String }
            cursor = json["next_cursor"] as? String
            pages += 1
        } while cursor != nil && pages < 20
        #expect(pages >= 4, "\(pages) pages")
        #expect(seen == (0..<8).map { "big-\($0)" }, "\(seen)")
    }

    /// Answers waiting for a slow reader hold memory: past `read_api.max_buffered` the next read
    /// is a 503 with Retry-After, and once the answer is out the budget is free again.
    @Test func answersInFlightAreBounded() throws {
        let db = try DatabaseProcess.postgres()
        let serve = try ServeProcess(
            config: Self.config(db).replacingOccurrences(
                of: "  max_limit: 50\n", with: "  max_limit: 50\n  max_answer_bytes: 8MiB\n  max_buffered: 8MiB\n"))
        try postBig(serve, count: 60, kb: 150)
        PostgresSinkTests.expect(db, "SELECT count(*) FROM healthgate.records", is: "60")
        // A reader that reads nothing: its ~8 MB answer cannot all leave the gateway.
        // Its receive buffer is made small before it connects, so the window it offers stays small.
        let slow = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var open = true
        defer { if open { close(slow) } }
        var small: Int32 = 4096
        setsockopt(slow, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = serve.port.bigEndian
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(slow, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        #expect(connected == 0)
        let ask = Array("GET /api/v1/samples?limit=50 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(Self.agent)\r\n\r\n".utf8)
        #expect(ask.withUnsafeBytes { send(slow, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == ask.count)
        // Its answer has begun (a 200): only then is the budget its own (a read made meanwhile
        // would have taken it first, and the slow reader would have had the 503).
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(slow, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var head = [UInt8](repeating: 0, count: 12)
        let peeked = recv(slow, &head, head.count, Int32(MSG_PEEK | MSG_WAITALL))
        #expect(peeked == 12 && String(decoding: head, as: UTF8.self) == "HTTP/1.1 200", "\(String(decoding: head, as: UTF8.self))")
        var busy: (status: Int, json: [String: Any], headers: [(String, String)]) = (0, [:], [])
        #expect(
            ServeProcess.eventually(10) {
                busy = (try? get(serve, "/samples?limit=1")) ?? busy; return busy.status == 503
            },
            "\(busy.status)")
        #expect(busy.headers.contains { $0.0.lowercased() == "retry-after" })
        #expect((busy.json["detail"] as? String ?? "").contains("max_buffered"))
        close(slow) // with its answer unread: a reset, and the gateway lets the answer go
        open = false
        #expect(ServeProcess.eventually(10) { (try? get(serve, "/samples?limit=1"))?.status == 200 })
    }

    @Test func badInputIsAProblemAndADatabaseThatIsDownA503() throws {
        var db: DatabaseProcess? = try DatabaseProcess.postgres()
        let serve = try ServeProcess(config: Self.config(db!))
        try ingest(serve, Self.samples)
        PostgresSinkTests.expect(db!, "SELECT count(*) FROM healthgate.records", is: "6")
        for (q, word) in [
            ("/samples?colour=red", "Unknown parameter"), ("/samples?from=yesterday", "RFC 3339"),
            ("/samples?from=2026-12-02&to=2026-12-01", "after"), ("/samples?cursor=abc", "cursor"),
            ("/samples?limit=0", "limit"), ("/samples?device=ios-1%00x", "control character"), ("/samples?type=Heart%20Rate", "type"),
            ("/daily?from=2026-12-01T00:00:00Z", "local day"), ("/samples?device=a&device=b", "twice"),
            ("/workouts?cursor=" + ReadCursor.encode(.samples, ["2026-12-01 00:00:00+00", "a", "b", "0"]), "cursor"),
            ("/samples?cursor=" + ReadCursor.encode(.samples, ["not a time", "a", "b", "0"]), "cursor"),
            ("/samples?cursor=" + ReadCursor.encode(.samples, ["2026-12-01 00:00:00+00", "a", "b", "x"]), "cursor"),
            // Forged cursors with what only PostgreSQL would have refused, in its own words.
            ("/samples?cursor=" + ReadCursor.encode(.samples, ["2026-13-45 25:61:61+00", "a", "b", "0"]), "cursor"),
            ("/samples?cursor=" + ReadCursor.encode(.samples, ["0000-01-01 00:00:00+00", "a", "b", "0"]), "cursor"),
            ("/workouts?cursor=" + ReadCursor.encode(.workouts, ["2026-02-30 00:00:00+00", "a", "b"]), "cursor"),
            ("/samples?cursor=" + ReadCursor.encode(.samples, ["2026-12-01 00:00:00+00", "a\u{0}b", "b", "0"]), "cursor"),
            ("/samples?from=0000-01-01", "years 1 to 9999"),
            ("/samples?from=9999-12-31T23:00:00-05:00", "years 1 to 9999")
        ] {
            let r = try get(serve, q)
            #expect(r.status == 400, "\(q)")
            #expect((r.json["detail"] as? String ?? "").contains(word), "\(q): \(r.json)")
            #expect(!(r.json["detail"] as? String ?? "").contains("out of range"), "\(q): \(r.json)")
            #expect(r.headers.contains { $0.0.lowercased() == "content-type" && $0.1 == "application/problem+json" })
        }
        #expect(try get(serve, "/nothing").status == 404)
        #expect(try serve.client().request("POST", "/api/v1/samples", headers: [("Authorization", "Bearer \(Self.agent)")]).status == 405)
        // A quoting attempt is a value like any other.
        #expect(Self.data(try get(serve, "/samples?device=x%27%20OR%20%271%27%3D%271").json).isEmpty)
        let restart = try db!.restartable()
        db = nil // stopped
        let down = try get(serve, "/samples")
        #expect(down.status == 503)
        #expect(down.headers.contains { $0.0.lowercased() == "retry-after" })
        db = try restart()
        #expect(ServeProcess.eventually(20) { (try? get(serve, "/samples?device=ios-1"))?.status == 200 })
        serve.stop()
    }

    /// schemathesis (PyPI, installed by `make test`) reads the OpenAPI document, generates
    /// requests from it — valid and invalid — and checks every answer against the document:
    /// no 5xx, only documented status codes, content types and headers, bodies that match their
    /// schemas, invalid input refused. (Not `positive_data_acceptance`: a string pattern cannot
    /// say which dates exist, so a schema-valid 2026-02-30 is rightly refused.)
    @Test func schemathesisFindsTheAPIAsItsDocumentSays() throws {
        let db = try DatabaseProcess.postgres()
        let serve = try ServeProcess(config: Self.config(db))
        try ingest(serve, Self.samples)
        PostgresSinkTests.expect(db, "SELECT count(*) FROM healthgate.records", is: "6")
        let st = URL(fileURLWithPath: InfluxClientLibraryTests.python).deletingLastPathComponent().appendingPathComponent("st").path
        // In a directory of its own: schemathesis keeps a cache (.schemathesis/) where it runs.
        let (rc, out) = try Command.run(
            st,
            [
                "run", "http://127.0.0.1:\(serve.port)/api/v1/openapi.json", "-H", "Authorization: Bearer \(Self.agent)",
                "--checks",
                "not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,"
                    + "response_schema_conformance,negative_data_rejection",
                "--max-examples", "25", "--workers", "1", "--seed", "1", "--no-color"
            ], cwd: ServeProcess.makeTempDir("schemathesis"))
        #expect(rc == 0, "\(out.suffix(12000))")
        #expect(out.contains("4 operations") || out.contains("4 selected") || out.contains("passed"), "\(out.suffix(2000))")
        serve.stop()
    }

    /// Batches: every request a receiver answered, newest first, with what became of it — a
    /// HealthSync export sent again counts as duplicates, bad records as refused; a scoped token
    /// sees its devices' requests only; paging goes back through all of them.
    @Test func batchesSayWhatBecameOfEachRequest() throws {
        let db = try DatabaseProcess.postgres()
        let config = Self.config(db).replacingOccurrences(
            of: "  chunks: {kind: ingest,",
            with: "  hs: {kind: healthsync, auth: {type: bearer, token: hs-token-0123456789}}\n  chunks: {kind: ingest,"
        )
        .replacingOccurrences(of: "from: [phone, chunks]", with: "from: [phone, chunks, hs]")
        let serve = try ServeProcess(config: config)
        let export =
            #"{"schema_version":2,"export_id":"exp-7","metrics":[{"id":"healthkit:A1","type":"stepCount","value":5,"unit":"count","start_date":"2026-12-01T07:00:00Z"},{"id":"healthkit:A2","type":"stepCount","value":6,"unit":"count","start_date":"2026-12-01T07:01:00Z"},{"type":"stepCount","value":2}]}"#
        for _ in 0..<2 {
            let r = try serve.client().request(
                "POST", "/api/apple-health/sync",
                headers: [
                    ("Authorization", "Bearer hs-token-0123456789"),
                    ("X-Device-Id", "ios-1")
                ], body: Array(export.utf8))
            #expect(r.status == 200)
        }
        let batchID = try ingest(
            serve,
            #"{"device_id":"ios-2","samples":[{"source_uuid":"st-9","data_type":"stepCount","ts":"2026-12-01T09:00:00Z","value":42,"unit":"count"}]}"#
        )
        let unreadable = try serve.client().request(
            "POST", "/v1/ingest",
            headers: [
                ("Authorization", "Bearer ingest-token-123456"),
                ("Content-Type", "application/json")
            ], body: Array("{".utf8))
        #expect(unreadable.status == 400)
        // Refused at the door: not a batch.
        _ = try serve.client().request("POST", "/v1/ingest", headers: [("Authorization", "Bearer wrong")], body: Array("{}".utf8))

        let all = Self.data(try get(serve, "/batches").json)
        #expect(all.count == 4, "\(all)")
        #expect(all.map { $0["receiver"] as? String } == ["chunks", "chunks", "hs", "hs"])
        #expect(all.map { $0["status"] as? Int } == [400, 202, 200, 200])
        let resent = all[2], first = all[3]
        #expect(first["records"] as? Int == 2 && first["refused"] as? Int == 1 && first["duplicates"] as? Int == 0, "\(first)")
        #expect(resent["records"] as? Int == 0 && resent["duplicates"] as? Int == 3, "\(resent)")
        #expect(first["device"] as? String == "ios-1" && first["request_id"] as? String == "exp-7")
        #expect(all[1]["device"] as? String == "ios-2" && all[1]["records"] as? Int == 1)
        // The ingest API's batch_id is the batch's id in the log (its spec: it correlates them).
        #expect(batchID != nil && all[1]["request_id"] as? String == batchID, "\(all[1])")
        #expect((all[0]["note"] as? String ?? "").hasPrefix("unreadable"))
        #expect((all.first?["id"] as? Int ?? 0) > (all.last?["id"] as? Int ?? 0))

        let alices = Self.data(try get(serve, "/batches", token: Self.alice).json)
        #expect(alices.count == 2 && alices.allSatisfy { $0["device"] as? String == "ios-1" })
        #expect(try get(serve, "/batches?device=ios-2", token: Self.alice).status == 403)
        var ids: [Int] = []
        var cursor: String?
        repeat {
            let page = try get(serve, "/batches?limit=3" + (cursor.map { "&cursor=" + $0 } ?? ""))
            ids += Self.data(page.json).compactMap { $0["id"] as? Int }
            cursor = page.json["next_cursor"] as? String
        } while cursor != nil && ids.count < 10
        #expect(ids == all.compactMap { $0["id"] as? Int })
        serve.stop()
    }

    @Test func theConfigIsCheckedAgainstItsSinkAndTheReceiversTokens() throws {
        let text = """
            listen: 127.0.0.1:0
            data_dir: /tmp/hg-read-api-check
            receivers:
              chunks: {kind: ingest, auth: {type: bearer, token: ingest-token-123456}}
              under: {kind: ingest, path: /api/v1/ingest, auth: {type: bearer, token: other-token-123456789}}
            routes:
              - {from: ["*"], to: [files]}
            sinks:
              files: {kind: file, path: "a.ndjson"}
            read_api:
              sink: files
              tokens:
                - {token: ingest-token-123456}
                - {token: short}
            """
        let logger = Logger(component: "test", sink: MemoryLogSink())
        #expect(throws: ConfigProblems.self) { try ConfigLoader.load(text: text, file: "c.yaml", environment: [:], logger: logger) }
        do {
            _ = try ConfigLoader.load(text: text, file: "c.yaml", environment: [:], logger: logger)
        } catch {
            let all = error.problems.map(\.description).joined(separator: "\n")
            #expect(all.contains("read_api.sink") && all.contains("kind file"), "\(all)")
            #expect(all.contains("also a receiver's token"), "\(all)")
            #expect(all.contains("shorter than 16"), "\(all)")
            #expect(all.contains("receiver \"under\" listens on /api/v1/ingest"), "\(all)")
        }
    }
}
