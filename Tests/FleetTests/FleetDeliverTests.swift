import CanonicalJSON
import Fleet
import Foundation
import Glibc
import HealthgateCore
import HealthgateCrypto
@testable import HealthgateTesting
import Pipeline
import Posix
import SinkKit
import Testing

/// Deliver machines against the suite's cluster and a real PostgreSQL (the sinks' and the
/// fleet's state). In the same serialized suite as the rest: some of its tests kill nodes.
extension AMQPConnectionTests {
    static let chunks = "  chunks: {kind: ingest, auth: {type: bearer, token: ingest-token-123456}}"

    static func fleetConfig(
        _ cluster: RabbitMQCluster, state: String, partitions: Int, sinks: String, to: String,
        receivers: String = chunks, from: String = "chunks"
    ) -> String {
        let brokers = (0..<3).map { "\"\(cluster.url($0))\"" }.joined(separator: ", ")
        return """
            listen: 127.0.0.1:0
            data_dir: DATA_DIR
            receivers:
            \(receivers)
            routes:
              - {from: [\(from)], to: [\(to)]}
            sinks:
            \(sinks)
            fleet:
              brokers: [\(brokers)]
              state: "\(state)"
              partitions: \(partitions)
            """
    }

    /// A chunk of `count` step samples of `device`, uuids `<device>-<round>-<n>`.
    static func chunk(_ device: String, round: Int, count: Int) -> [UInt8] {
        let samples = (0..<count).map { n in
            #"{"source_uuid":"\#(device)-\#(round)-\#(n)","data_type":"stepCount","ts":"2026-08-11T07:\#(10 + n):00Z","value":\#(round * 100 + n),"unit":"count"}"#
        }
        return Array(#"{"device_id":"\#(device)","samples":[\#(samples.joined(separator: ","))]}"#.utf8)
    }

    static let ingestAuth = [("Authorization", "Bearer ingest-token-123456"), ("Content-Type", "application/json")]

    /// Through one ingest and two deliver machines into PostgreSQL: every record a phone was
    /// answered 2xx for arrives once, while a deliver machine is killed (its partitions move to
    /// the other) and replaced by a fresh one with an empty data dir.
    @Test func deliverMachinesDeliverWhatIngestConfirmedAndTakeOverFromOneKilled() throws {
        let cluster = try Self.cluster()
        let db = try DatabaseProcess.postgres()
        let config = Self.fleetConfig(
            cluster, state: db.postgresURL, partitions: 4,
            sinks: """
                  db: {kind: postgres, dsn: "\(db.postgresURL)", batch: {max_wait: 10ms}, retry: {initial: 100ms, max: 500ms}}
                """, to: "db")
        let ingest = try ServeProcess(config: config, arguments: ["--role", "ingest"])
        defer { ingest.stop() }
        var first: ServeProcess? = try ServeProcess(config: config, arguments: ["--role", "deliver"])
        let second = try ServeProcess(config: config, arguments: ["--role", "deliver"])
        defer { second.stop() }
        let devices = (0..<8).map { "phone-\($0)" }
        #expect(Set(devices.map { FleetQueues.partition(of: $0, among: 4) }).count == 4)
        var sent = 0
        for round in 0..<6 {
            if round == 3 {
                first?.stop(signal: SIGKILL) // a worker dies with its messages unacknowledged
                first = nil
            }
            for d in devices {
                let r = try ingest.client().request(
                    "POST", "/v1/ingest", headers: Self.ingestAuth, body: Self.chunk(d, round: round, count: 5))
                #expect(r.status == 202, "\(r.status) \(r.text)")
                sent += 5
            }
        }
        #expect(db.answer("SELECT count(*) FROM healthgate.records", becomes: "\(sent)", within: 60) == "\(sent)")
        #expect(try db.psql("SELECT count(DISTINCT uuid) FROM healthgate.records") == "\(sent)")
        // The survivor took every partition over from the killed one.
        let holders = try db.psql("SELECT string_agg(DISTINCT holder, ',') FROM healthgate_fleet.partitions WHERE sink = 'db'")
        #expect(holders.hasSuffix("pid \(second.process.processIdentifier)") && !holders.contains(","), "\(holders)")
        // The value of the last round each sample had: every record as the phone sent it.
        #expect(try db.psql("SELECT count(*) FROM healthgate.records WHERE uuid = 'phone-5-4-2' AND value = 402") == "1")

        // A fresh machine, empty data dir, the same config: it joins, and records go on.
        let third = try ServeProcess(config: config, arguments: ["--role", "deliver"])
        defer { third.stop() }
        for d in devices {
            let r = try ingest.client().request("POST", "/v1/ingest", headers: Self.ingestAuth, body: Self.chunk(d, round: 9, count: 2))
            #expect(r.status == 202)
            sent += 2
        }
        #expect(db.answer("SELECT count(*) FROM healthgate.records", becomes: "\(sent)", within: 60) == "\(sent)")
        // Each partition was claimed, by a worker that saved its state since.
        #expect(try db.psql("SELECT count(*) FROM healthgate_fleet.partitions WHERE sink = 'db' AND saved_at IS NOT NULL") == "4")

        // `status` shows the fleet: its machines, the queues, who holds each partition.
        var status = ""
        _ = ServeProcess.eventually(20) {
            status = (try? Command.run(ServeProcess.binary, ["status", "--config", second.configPath], timeout: 60).1) ?? ""
            return status.contains("pid \(third.process.processIdentifier): deliver")
        }
        #expect(status.contains("fleet: 3 broker(s), 4 partitions"), "\(status)")
        #expect(status.contains("sink db: 0 message(s) waiting in its partition queues"), "\(status)")
        // (Its first two at least: it may have handed the others on to the third since.)
        #expect(status.contains("pid \(second.process.processIdentifier) holds p0 p1"), "\(status)")
        #expect(status.contains("pid \(ingest.process.processIdentifier): ingest, seen"), "\(status)")
        #expect(status.contains("pid \(third.process.processIdentifier): deliver, seen"), "\(status)")
        #expect(!status.contains(cluster.password))
        // The status page says the same, as HTML and as JSON.
        let page = try ingest.client().request("GET", "/")
        #expect(page.status == 200 && page.text.contains("<h2>Fleet</h2>") && page.text.contains("sink db: 0 message(s) waiting"))
        #expect(!page.text.contains(cluster.password))
        let json = try ingest.client().request("GET", "/status")
        let fleet = (try? JSONSerialization.jsonObject(with: Data(json.body)) as? [String: Any])?["fleet"] as? [String: Any]
        let sink = (fleet?["sinks"] as? [[String: Any]])?.first
        #expect(sink?["name"] as? String == "db" && sink?["waiting_messages"] as? Int == 0, "\(json.text)")
        let held = (sink?["holders"] as? [[String: Any]] ?? []).flatMap { $0["partitions"] as? [Int] ?? [] }
        #expect(held.sorted() == [0, 1, 2, 3], "\(json.text)")
        let names = (fleet?["machines"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
        for serve in [ingest, second, third] {
            #expect(names.contains { $0.hasSuffix("pid \(serve.process.processIdentifier)") }, "\(names)")
        }
        let health = try second.client().request("GET", "/healthz")
        #expect(health.status == 200, "\(health.text)")
        #expect(health.text.contains("\"role\":\"deliver\"") && health.text.contains("\"db\":\"delivering\""), "\(health.text)")
        // A deliver machine takes no data: a phone pointed at it is told where to send, nothing lost.
        let misdirected = try second.client().request(
            "POST", "/v1/ingest", headers: Self.ingestAuth, body: Self.chunk("x", round: 0, count: 1))
        #expect(misdirected.status == 503 && misdirected.text.contains("ingest machine"), "\(misdirected.text)")
        for serve in [ingest, second, third] { #expect(!serve.stderrText.contains(cluster.password)) }
    }

    /// Two deliver machines share a sink's partitions: the first takes them all, then hands
    /// its extra on to the second (which waits for each handover to end), while phones keep
    /// sending; every record arrives once and each device's last value is the one it sent last.
    @Test func workersShareASinksPartitionsAndKeepEachDevicesOrder() throws {
        let cluster = try Self.cluster()
        let db = try DatabaseProcess.postgres()
        let config = Self.fleetConfig(
            cluster, state: db.postgresURL, partitions: 4,
            sinks: """
                  db: {kind: postgres, dsn: "\(db.postgresURL)", batch: {max_wait: 10ms}}
                """, to: "db")
        let ingest = try ServeProcess(config: config, arguments: ["--role", "ingest"])
        let first = try ServeProcess(config: config, arguments: ["--role", "deliver"])
        let devices = (0..<8).map { "phone-\($0)" }
        func send(_ round: Int) throws {
            for d in devices {
                let body =
                    #"{"device_id":"\#(d)","samples":[{"source_uuid":"\#(d)-last","data_type":"stepCount","ts":"2026-08-11T07:00:00Z","value":\#(round),"unit":"count"},{"source_uuid":"\#(d)-\#(round)","data_type":"stepCount","ts":"2026-08-11T07:01:00Z","value":1,"unit":"count"}]}"#
                let r = try ingest.client().request("POST", "/v1/ingest", headers: Self.ingestAuth, body: Array(body.utf8))
                #expect(r.status == 202, "\(r.status) \(r.text)")
            }
        }
        try send(0)
        #expect(db.answer("SELECT count(DISTINCT holder) FROM healthgate_fleet.partitions", becomes: "1", within: 30) == "1")
        let second = try ServeProcess(config: config, arguments: ["--role", "deliver"])
        defer {
            for s in [ingest, first, second] { s.stop() }
        }
        func spread() -> String {
            (try? db.psql(
                "SELECT string_agg(n::text, ',' ORDER BY n) FROM (SELECT count(*) AS n FROM healthgate_fleet.partitions GROUP BY holder) h"
            )) ?? ""
        }
        var round = 1
        let until = Date().addingTimeInterval(60)
        while spread() != "2,2" && Date() < until {
            try send(round)
            round += 1
            usleep(300_000)
        }
        #expect(spread() == "2,2", "\(spread())")
        for _ in 0..<5 {
            try send(round)
            round += 1
        }
        let rows = "\(devices.count * (round + 1))"
        #expect(db.answer("SELECT count(*) FROM healthgate.records", becomes: rows, within: 60) == rows)
        #expect(try db.psql("SELECT count(*) FROM healthgate.records WHERE uuid LIKE '%-last' AND value = \(round - 1)") == "8")
        let holders = try db.psql("SELECT string_agg(DISTINCT holder, ',') FROM healthgate_fleet.partitions")
        #expect(
            holders.contains("pid \(first.process.processIdentifier)") && holders.contains("pid \(second.process.processIdentifier)"),
            "\(holders)")
        #expect(first.stderrText.contains("handed on"), "\(first.stderrText)")
    }

    /// `--role all` with `fleet:` is one machine that publishes and delivers; what the sink
    /// rejects goes to the sink's dead-letter queue, the message is acknowledged, and
    /// `replay --sink` sends it back once the cause is fixed.
    @Test func whatASinkRejectsGoesToItsDeadLetterQueueAndReplayBringsItBack() throws {
        let cluster = try Self.cluster()
        let db = try DatabaseProcess.postgres()
        let accepting = Locked(false)
        let received = Locked<[String]>([])
        let endpoint = try ScriptedEndpoint { request in
            guard accepting.withLock({ $0 }) else {
                return HTTPResponse(status: 400, headers: [HTTPHeader("Content-Type", "text/plain")], body: Array("no such field".utf8))
            }
            received.withLock { $0 += ScriptedEndpoint.uuids(request) }
            return HTTPResponse(status: 204)
        }
        let config = Self.fleetConfig(
            cluster, state: db.postgresURL, partitions: 2,
            sinks: """
                  refuser: {kind: http, url: "http://127.0.0.1:\(endpoint.port)/in", batch: {max_wait: 10ms}}
                """, to: "refuser")
        let serve = try ServeProcess(config: config)
        defer { serve.stop() }
        let r = try serve.client().request("POST", "/v1/ingest", headers: Self.ingestAuth, body: Self.chunk("phone-dl", round: 1, count: 1))
        #expect(r.status == 202, "\(r.text)")
        let dead = FleetQueues.deadLetterQueue(sink: "refuser")
        let c = try connect(2, cluster)
        #expect(ServeProcess.eventually(30) { (try? c.depth(of: dead)) == 1 }, "\(serve.stderrText)")
        // The dead letter says what, where and why (read, and left in the queue).
        let peek = try connect(1, cluster)
        try peek.consume(queue: dead, prefetch: 1, tag: "peek")
        let letter = String(decoding: try #require(try peek.nextDelivery(timeout: 10)).body, as: UTF8.self)
        peek.close()
        #expect(letter.contains("\"sink\":\"refuser\"") && letter.contains("phone-dl-1-0") && letter.contains("no such field"), "\(letter)")
        // Acknowledged: nothing waits in the sink's queue.
        let partition = FleetQueues.partition(of: "phone-dl", among: 2)
        #expect(try c.depth(of: FleetQueues.queue(sink: "refuser", partition: partition)) == 0)

        let (_, status) = try Command.run(ServeProcess.binary, ["status", "--config", serve.configPath], timeout: 60)
        #expect(status.contains("1 dead letter(s) in \(dead) (`healthgate replay --sink refuser`)"), "\(status)")
        // Fixed: replay sends it back through the sink's queue, and the worker delivers it.
        accepting.withLock { $0 = true }
        let (rc, out) = try Command.run(ServeProcess.binary, ["replay", "--sink", "refuser", "--config", serve.configPath], timeout: 60)
        #expect(rc == 0, "\(out)")
        #expect(out.contains("1 record(s) of 1 dead-letter message(s) are back in its queues"), "\(out)")
        #expect(ServeProcess.eventually(30) { received.withLock { $0 } == ["phone-dl-1-0"] }, "\(received.withLock { $0 })")
        #expect(ServeProcess.eventually(10) { (try? c.depth(of: dead)) == 0 })
        #expect(!out.contains(cluster.password))
    }

    /// Shared state in PostgreSQL: a signature one ingest machine took is a replay on the
    /// other; a write-back command queued with the fleet's config goes out through whichever
    /// ingest machine the phone reaches, and its result, taken by the other, is the fleet's.
    @Test func ingestMachinesShareTheReplayCheckTheCommandsAndExportIDs() throws {
        let cluster = try Self.cluster()
        let db = try DatabaseProcess.postgres()
        let (secret, token) = ("whsec_fleet0123456789abcdef", "fleet-phone-token-0123456789")
        let config =
            Self.fleetConfig(
                cluster, state: db.postgresURL, partitions: 2,
                sinks: """
                      db: {kind: postgres, dsn: "\(db.postgresURL)", batch: {max_wait: 10ms}}
                    """, to: "db",
                receivers: """
                      phone: {kind: syncky, path: /hook, auth: {type: bearer, token: \(token)}, hmac: {secret: \(secret)}, write_back: true}
                      hs: {kind: healthsync, auth: {type: bearer, token: hs-token-0123456789}}
                    """,
                from: "phone, hs") + "\nread_api: {sink: db, tokens: [{token: fleet-read-token-0123456789}]}"
        let first = try ServeProcess(config: config, arguments: ["--role", "ingest"])
        let second = try ServeProcess(config: config, arguments: ["--role", "ingest"])
        let worker = try ServeProcess(config: config, arguments: ["--role", "deliver"])
        defer {
            for s in [first, second, worker] { s.stop() }
        }
        let now = Int64(Date().timeIntervalSince1970)
        func signed(_ body: String, at t: Int64, kind: String? = nil) -> [(String, String)] {
            let mac = Crypto.hmacSHA256(key: Array(secret.utf8), Array("\(t).".utf8), Array(body.utf8))
            var h = [
                ("Content-Type", "application/json"), ("X-Syncky-Delivery", UUID().uuidString.lowercased()),
                ("X-Syncky-Timestamp", "\(t)"), ("X-Syncky-Signature", "v1=" + Crypto.lowercaseHex(mac)),
                ("Authorization", "Bearer \(token)")
            ]
            h.append(kind.map { ("X-Syncky-Kind", $0) } ?? ("X-Syncky-Format", "native"))
            return h
        }
        func sync(_ uuid: String) -> String {
            #"{"v":1,"type":"sync","device":"d_fleet","samples":[{"uuid":"\#(uuid)","type":"body_mass","value":70,"unit":"kg","start":"2026-10-14T07:01:00Z"}],"deleted":[],"acks":[],"more":false}"#
        }
        let body = sync("w1")
        let headers = signed(body, at: now)
        let taken = try first.client().request("POST", "/hook", headers: headers, body: Array(body.utf8))
        #expect(taken.status == 200, "\(taken.status) \(taken.text)")
        let replayed = try second.client().request("POST", "/hook", headers: headers, body: Array(body.utf8))
        #expect(replayed.status == 401 && replayed.text.contains("replay"), "\(replayed.status) \(replayed.text)")

        let (rc, out) = try Command.run(
            ServeProcess.binary, ["write", "dietary_water", "0.25", "L", "--at", "2026-10-14T07:00:00Z", "--config", first.configPath],
            timeout: 60)
        #expect(rc == 0 && out.contains("queued c_1 (version 1)"), "\(out)")
        let next = sync("w2")
        let reply = try second.client().request("POST", "/hook", headers: signed(next, at: now + 1), body: Array(next.utf8))
        #expect(reply.status == 200 && reply.text.contains(#""command_id":"c_1""#), "\(reply.status) \(reply.text)")
        let results = #"{"v":1,"type":"results","results":[{"command_id":"c_1","version":1,"status":"applied"}]}"#
        let recorded = try first.client().request(
            "POST", "/hook", headers: signed(results, at: now + 2, kind: "results"), body: Array(results.utf8))
        #expect(recorded.status == 200, "\(recorded.status) \(recorded.text)")
        let last = sync("w3")
        let quiet = try second.client().request("POST", "/hook", headers: signed(last, at: now + 3), body: Array(last.utf8))
        #expect(quiet.status == 200 && !quiet.text.contains("c_1"), "\(quiet.text)")
        let (_, status) = try Command.run(ServeProcess.binary, ["status", "--config", second.configPath], timeout: 60)
        #expect(status.contains("c_1 v1 write dietary_water 0.25 L at 2026-10-14T07:00:00Z: applied"), "\(status)")
        #expect(db.answer("SELECT count(*) FROM healthgate.records", becomes: "3", within: 30) == "3")

        // A HealthSync export stored through one machine is a resend on the other.
        let export =
            #"{"export_id":"exp-fleet","metrics":[{"id":"healthkit:E1","type":"stepCount","value":5,"unit":"count","start_date":"2026-10-14T07:00:00Z"}]}"#
        let hs = [("Authorization", "Bearer hs-token-0123456789"), ("X-Device-Id", "phone-hs")]
        let stored = try first.client().request("POST", "/api/apple-health/sync", headers: hs, body: Array(export.utf8))
        #expect(stored.status == 200 && stored.text.contains(#""duplicate":false"#), "\(stored.text)")
        let resent = try second.client().request("POST", "/api/apple-health/sync", headers: hs, body: Array(export.utf8))
        #expect(resent.status == 200 && resent.text.contains(#""duplicate":true"#), "\(resent.text)")

        // The request log is the fleet's: either machine's read API shows what both answered.
        for machine in [first, second] {
            let r = try machine.client().request(
                "GET", "/api/v1/batches?device=phone-hs", headers: [("Authorization", "Bearer fleet-read-token-0123456789")])
            let data = (try? JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any])?["data"] as? [[String: Any]] ?? []
            #expect(data.map { $0["request_id"] as? String } == ["exp-fleet", "exp-fleet"], "\(r.status) \(r.text)")
            #expect(data.map { $0["duplicates"] as? Int } == [1, 0] && data.map { $0["records"] as? Int } == [0, 1], "\(r.text)")
        }

        // Without the shared state, a signature cannot be checked for a replay: 503, sent again later.
        kill(db.process.processIdentifier, SIGQUIT)
        _ = db.process.waitUntilExit(within: 30)
        let unsure = sync("w4")
        let unchecked = try first.client().request("POST", "/hook", headers: signed(unsure, at: now + 4), body: Array(unsure.utf8))
        #expect(unchecked.status == 503 && unchecked.header("Retry-After") != nil, "\(unchecked.status) \(unchecked.text)")
    }

    /// The fencing epoch: a worker that claimed a partition before another did cannot save over
    /// the other's state; what was saved last comes with the next claim.
    @Test func aPartitionsStateIsSavedOnlyByItsLastClaimant() throws {
        let db = try DatabaseProcess.postgres()
        let a = PartitionStates(url: db.postgresURL, holder: "a")
        let b = PartitionStates(url: db.postgresURL, holder: "b")
        defer {
            a.close()
            b.close()
        }
        let claimA = try #require(try a.claim(sink: "s", partition: 3))
        #expect(claimA.states.isEmpty && claimA.applied.isEmpty)
        let claimB = try #require(try b.claim(sink: "s", partition: 3))
        #expect(claimB.epoch == claimA.epoch + 1)
        let fenced = try a.save(sink: "s", [.init(partition: 3, epoch: claimA.epoch, states: ["r/0/dedupe": [1]], applied: ["m-a"])])
        #expect(fenced == [3])
        #expect(
            try b.save(sink: "s", [.init(partition: 3, epoch: claimB.epoch, states: ["r/0/dedupe": [2, 0, 10]], applied: ["m-1", "m-2"])])
                .isEmpty)
        // While b hands the partition over, a's claim waits (nil), and takes it once it ended.
        #expect(try b.beginHandover(sink: "s", partition: 3, epoch: claimB.epoch))
        #expect(try a.claim(sink: "s", partition: 3) == nil)
        #expect(try !a.beginHandover(sink: "s", partition: 3, epoch: claimA.epoch))
        try b.endHandover(sink: "s", partition: 3, epoch: claimB.epoch)
        let again = try #require(try a.claim(sink: "s", partition: 3))
        #expect(again.states == ["r/0/dedupe": [2, 0, 10]])
        #expect(again.applied == ["m-1", "m-2"])
        // A handover its holder never ended (it died) is given up after the limit.
        #expect(try a.beginHandover(sink: "s", partition: 3, epoch: again.epoch))
        _ = try db.psql("UPDATE healthgate_fleet.partitions SET handover_at = now() - interval '31 seconds'")
        let taken = try #require(try b.claim(sink: "s", partition: 3))
        #expect(taken.epoch == again.epoch + 1)
        _ = try #require(try a.claim(sink: "s", partition: 3))
        #expect(try db.psql("SELECT holder FROM healthgate_fleet.partitions WHERE sink = 's' AND partition = 3") == "a")
        let held = try #require(try a.claim(sink: "s", partition: 3))
        // A machine that connects once the postgres sink made its `healthgate` schema (first in
        // a healthgate user's search path) finds the same table, not a new one of its own.
        _ = try db.psql("CREATE SCHEMA IF NOT EXISTS healthgate")
        let late = PartitionStates(url: db.postgresURL, holder: "late")
        defer { late.close() }
        let lateClaim = try #require(try late.claim(sink: "s", partition: 3))
        #expect(lateClaim.epoch == held.epoch + 1 && lateClaim.states == ["r/0/dedupe": [2, 0, 10]])
    }

    /// The mqtt sink's daily totals are a partition's state like the transforms': a worker
    /// that takes a partition over from one killed goes on from its total, not from zero, and a
    /// sample sent again is still counted once.
    @Test func theMQTTSinksDailyTotalsMoveWithTheirPartition() throws {
        let cluster = try Self.cluster()
        let db = try DatabaseProcess.postgres()
        let broker = try DatabaseProcess.mosquitto()
        let config = Self.fleetConfig(
            cluster, state: db.postgresURL, partitions: 2,
            sinks: """
                  home: {kind: mqtt, url: "mqtt://127.0.0.1:\(broker.port)", batch: {max_wait: 10ms}, retry: {initial: 100ms, max: 500ms}}
                """, to: "home")
        let ingest = try ServeProcess(config: config, arguments: ["--role", "ingest"])
        defer { ingest.stop() }
        func steps(_ uuid: String, _ value: Int) throws {
            let ts = Timestamp(seconds: Int64(Date().timeIntervalSince1970) - 600).rfc3339()
            let body =
                #"{"device_id":"anna","samples":[{"source_uuid":"\#(uuid)","data_type":"stepCount","ts":"\#(ts)","value":\#(value),"unit":"count"}]}"#
            let r = try ingest.client().request("POST", "/v1/ingest", headers: Self.ingestAuth, body: Array(body.utf8))
            #expect(r.status == 202, "\(r.status) \(r.text)")
        }
        func today() -> Int? {
            guard let r = try? MQTTRecorder(port: broker.port, topic: "healthgate/anna/steps_today") else { return nil }
            let until = Date().addingTimeInterval(0.3)
            while r.payloads.isEmpty && Date() < until { usleep(10_000) }
            r.stop()
            let json = r.payloads.first.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            return json?["value"] as? Int
        }
        let first = try ServeProcess(config: config, arguments: ["--role", "deliver"])
        try steps("s1", 100)
        #expect(ServeProcess.eventually(30) { today() == 100 }, "\(String(describing: today()))")
        first.stop(signal: SIGKILL)
        // No worker: what comes waits, and `status` says how long at most.
        try steps("s2", 50)
        sleep(2)
        let (_, status) = try Command.run(ServeProcess.binary, ["status", "--config", ingest.configPath], timeout: 60)
        let age = status.firstMatch(of: /sink home: 1 message\(s\) waiting in its partition queues, the oldest at most (\d+) s old/)
        #expect(age.map { Int($0.1)! >= 2 && Int($0.1)! < 120 } == true, "\(status)")
        let second = try ServeProcess(config: config, arguments: ["--role", "deliver"])
        defer { second.stop() }
        #expect(ServeProcess.eventually(30) { today() == 150 }, "\(String(describing: today()))")
        try steps("s1", 100)
        try steps("s3", 1)
        #expect(ServeProcess.eventually(30) { today() == 151 }, "\(String(describing: today()))")
    }

    /// A message delivered again after its state was saved (a worker that died before it
    /// acknowledged) changes nothing: it is acknowledged without reaching the sink again.
    @Test func aMessageItsPartitionsStateAlreadyHoldsIsNotDeliveredAgain() throws {
        let cluster = try Self.cluster()
        let db = try DatabaseProcess.postgres()
        let brokers = try (0..<3).map { try AMQPURL(cluster.url($0)) }
        let fleet = FleetSettings(brokers: brokers, state: db.postgresURL, partitions: 1)
        let c = try connect(0, cluster)
        try FleetQueues(sinks: ["again"], partitions: 1).declare(on: c)
        try c.selectConfirms()
        func record(_ uuid: String) -> [UInt8] {
            var r = CanonicalRecord(kind: "quantity", device: "phone-a", receiver: "chunks", uuid: uuid, type: "steps")
            r.value = .number(1)
            r.unit = "count"
            r.start = Timestamp(seconds: 1_760_400_000)
            var batch = ReceivedBatch()
            batch.append(r)
            return batch.payload
        }
        try c.publish(exchange: FleetQueues.exchange, key: FleetQueues.key(0), body: record("applied-before"))
        try c.waitForConfirms(until: monotonicSeconds() + 10)
        // What a worker that died after saving saw: the message's id in the partition's state.
        let peek = try connect(1, cluster)
        try peek.consume(queue: FleetQueues.queue(sink: "again", partition: 0), prefetch: 1, tag: "peek")
        let seen = try #require(try peek.nextDelivery(timeout: 10))
        let id = try #require(seen.messageID)
        peek.close() // unacknowledged: back in the queue
        let earlier = PartitionStates(url: db.postgresURL, holder: "earlier")
        let claimed = try #require(try earlier.claim(sink: "again", partition: 0))
        #expect(try earlier.save(sink: "again", [.init(partition: 0, epoch: claimed.epoch, states: [:], applied: [id])]).isEmpty)
        earlier.close()

        let written = Locked<[String]>([])
        let sink = RecordingSink(written)
        let worker = FleetWorker(
            name: "again", built: .testing(sink), routes: [Route(name: "r", from: [Glob("*")], transforms: [], to: ["again"])],
            fleet: fleet, dataDir: ServeProcess.makeTempDir(), logger: Self.quiet)
        try worker.start()
        defer { worker.stop(within: 10) }
        try c.publish(exchange: FleetQueues.exchange, key: FleetQueues.key(0), body: record("new"))
        try c.waitForConfirms(until: monotonicSeconds() + 10)
        #expect(ServeProcess.eventually(30) { written.withLock { $0 } == ["new"] }, "\(written.withLock { $0 })")
        worker.stop(within: 10)
        #expect(try drain(FleetQueues.queue(sink: "again", partition: 0), cluster).isEmpty)
        #expect(written.withLock { $0 } == ["new"])
    }
}

/// A sink that notes the uuids it was given.
final class RecordingSink: Sink, Sendable {
    let written: Locked<[String]>
    init(_ written: Locked<[String]>) { self.written = written }
    func write(_ batch: SinkBatch) -> SinkWriteResult {
        written.withLock { w in for r in batch.records { w.append(r.uuid) } }
        return .accepted
    }
    func close() {}
}
