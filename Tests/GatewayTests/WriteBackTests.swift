import Foundation
@testable import Gateway
import HealthgateCore
import HealthgateCrypto
@testable import HealthgateTesting
@testable import Pipeline
import SinkKit
import Testing

/// The guide's section 11 walkthrough against `serve`, with the section 10 vectors byte for
/// byte: queue two writes, answer a data request with them (signed over its delivery id),
/// take the results, queue a delete, answer the next data request with it.
@Suite(.serialized) struct WriteBackTests {
    static let config = LiveServeTests.config.replacingOccurrences(
        of: "    max_body: 200KB", with: "    max_body: 200KB\n    write_back: true")

    static func dataRequest(delivery: String, t: String) -> ([(String, String)], [UInt8]) {
        let body = Array(Vectors.syncBody(samples: [Vectors.stepsSample], delivery: delivery).utf8)
        let mac = Crypto.hmacSHA256(key: Array(Vectors.secret.utf8), Array("\(t).".utf8), body)
        return (
            [
                ("Content-Type", "application/json"), ("X-Syncky-Format", "native"), ("X-Syncky-Delivery", delivery),
                ("X-Syncky-Timestamp", t), ("X-Syncky-Signature", "v1=" + Crypto.lowercaseHex(mac)),
                ("Authorization", "Bearer \(Vectors.token)")
            ], body
        )
    }

    /// 9,000 results for command ids the receiver never had used to make 18,000 log lines and
    /// 9,000 rows: now none are stored and one line sums them up.
    @Test func resultsForUnknownCommandsAreNeitherStoredNorLoggedEach() throws {
        let dir = ServeProcess.makeTempDir("wb")
        let sink = MemoryLogSink()
        let wb = WriteBack(receiver: "phone", dataDir: dir, logger: Logger(component: "test", sink: sink))
        let known = try wb.withStore {
            try $0.write(
                receiver: "phone", id: "c1", type: "dietary_water", value: .number(0.25), unit: "L",
                start: Timestamp(seconds: 1_790_000_000), end: Timestamp(seconds: 1_790_000_000),
                now: 1_790_000_000)
        }
        var results = (0..<9000).map { (id: "forged-\($0)", version: 1, status: "ok", reason: String?.none) }
        results += Array(repeating: (id: known.id, version: 1, status: "ok", reason: String?.none), count: 3)
        wb.record(results, now: Timestamp(seconds: 1_790_000_100))
        #expect(sink.all.count <= 4, "\(sink.all.count)")
        #expect(sink.all.contains { $0.message.contains("9000 result(s) for commands this receiver never had") })
        let rows = try wb.withStore { try $0.db.query("SELECT count(*) FROM results", []) }
        #expect(rows.first?.first == .int(1))
        #expect(try wb.withStore { try $0.command(receiver: "phone", id: "c1") }?.resultStatus == "ok")
    }

    @Test func theWalkthroughOfSectionEleven() throws {
        #expect(Self.config.contains("write_back: true"))
        let serve = try ServeProcess(config: Self.config, environment: ["HEALTHGATE_NOW": "1791961923"])
        let cfg = ["--config", serve.configPath]
        // Step 4: queue the two writes of section 10. apple_exercise_time cannot be written: the
        // CLI says so, and --force queues it anyway (the app rejects it, as the guide shows).
        let w1 = try CLITests.run(["write", "dietary_water", "0.25", "L", "--at", "2026-10-14T07:00:00Z"] + cfg)
        #expect(w1.status == 0, "\(w1.err)")
        #expect(w1.out.contains("queued c_1 (version 1)"))
        let refused = try CLITests.run(["write", "apple_exercise_time", "30", "min", "--at", "2026-10-14T07:00:00Z"] + cfg)
        #expect(refused.status == 2)
        #expect(refused.err.contains("cannot be written") && refused.err.contains("--force"))
        let w2 = try CLITests.run(["write", "apple_exercise_time", "30", "min", "--at", "2026-10-14T07:00:00Z", "--force"] + cfg)
        #expect(w2.status == 0, "\(w2.err)")
        #expect(try CLITests.run(["status"] + cfg).out.contains("2 command(s) waiting"))

        // The Check connection request's reply carries no commands.
        let check = try serve.client().request(
            "POST", "/hook", headers: Self.checkHeadersAt1791961923(),
            body: Array(Self.checkBodyFor1791961923.utf8))
        #expect(check.status == 200 && check.body.isEmpty)

        // Step 5: a data request; the reply is section 10's, byte for byte.
        let (h, b) = Self.dataRequest(delivery: Vectors.commandsDelivery, t: "1791961923")
        let reply = try serve.client().request("POST", "/hook", headers: h, body: b)
        #expect(reply.status == 200)
        #expect(reply.header("Content-Type") == "application/json")
        #expect(reply.text == Vectors.commandsBody)
        #expect(reply.header("X-Syncky-Signature") == Vectors.commandsSignature)

        // Step 6: the results request of section 10.
        var rh = Self.replacing(Vectors.checkHeaders, "X-Syncky-Format", nil)
        rh = Self.replacing(rh, "X-Syncky-Timestamp", Vectors.resultsTimestamp)
        rh = Self.replacing(rh, "X-Syncky-Signature", Vectors.resultsSignature)
        rh.append(("X-Syncky-Kind", "results"))
        let results = try serve.client().request("POST", "/hook", headers: rh, body: Array(Vectors.resultsBody.utf8))
        #expect(results.status == 200 && results.body.isEmpty)
        let status = try CLITests.run(["status"] + cfg).out
        #expect(status.contains("c_1 v1 write dietary_water 0.25 L at 2026-10-14T07:00:00Z: applied"), "\(status)")
        #expect(status.contains("c_2 v1 write apple_exercise_time 30 min at 2026-10-14T07:00:00Z: rejected (type_not_allowed)"))
        #expect(status.contains("0 command(s) waiting, 2 done"))
        // Nothing pending: the next data reply is empty.
        let (h2, b2) = Self.dataRequest(delivery: "01a13940-fe30-7630-9d7f-000000000002", t: "1791961924")
        #expect(try serve.client().request("POST", "/hook", headers: h2, body: b2).body.isEmpty)

        // Step 7: delete c_1; the next data request (at the guide's later clock) carries it.
        let d = try CLITests.run(["delete", "c_1"] + cfg)
        #expect(d.status == 0, "\(d.err)")
        serve.stop()
        let later = try ServeProcess(config: Self.config, dataDir: serve.dataDir, environment: ["HEALTHGATE_NOW": "1791965523"])
        let (h3, b3) = Self.dataRequest(delivery: Vectors.deleteDelivery, t: "1791965523")
        let deleteReply = try later.client().request("POST", "/hook", headers: h3, body: b3)
        #expect(deleteReply.text == Vectors.deleteBody)
        #expect(deleteReply.header("X-Syncky-Signature") == Vectors.deleteSignature)
        // Until its result comes, the delete is sent again with every data reply.
        let (h4, b4) = Self.dataRequest(delivery: "01a13977-ecb0-7fbd-bd2a-000000000004", t: "1791965524")
        #expect(try later.client().request("POST", "/hook", headers: h4, body: b4).text == Vectors.deleteBody)
        #expect(try CLITests.run(["status"] + cfg).out.contains("c_1 v2 delete dietary_water: waiting (sent 2 time(s)"))
        // The samples of those data requests were journaled as usual.
        #expect(ServeProcess.eventually { !later.ndjson(under: "archive").isEmpty })
    }

    @Test func commandsAreCheckedAgainstTheRegistry() throws {
        let serve = try ServeProcess(config: Self.config)
        let cfg = ["--config", serve.configPath]
        func err(_ args: [String]) throws -> String {
            let r = try CLITests.run(["write"] + args + cfg)
            #expect(r.status == 2, "\(args) was accepted")
            return r.err
        }
        #expect(try err(["dietary_watr", "1", "L", "--at", "now"]).contains("did you mean \"dietary_water\""))
        #expect(try err(["dietary_water", "1", "kg", "--at", "now"]).contains("is not a unit of dietary_water"))
        #expect(try err(["body_mass", "2000", "kg", "--at", "now"]).contains("value_out_of_range"))
        #expect(try err(["body_mass", "heavy", "--at", "now"]).contains("takes a number"))
        #expect(try err(["sleep_analysis", "dreaming", "--at", "now"]).contains("asleep_core"))
        #expect(try err(["body_mass", "70", "kg"]).contains("--at"))
        #expect(try err(["body_mass", "70", "kg", "--at", "yesterday"]).contains("RFC 3339"))
        // A unit of the family is kept as given; the canonical unit fills in when none is given.
        let ok = try CLITests.run(["write", "body_mass", "154", "lb", "--at", "2026-10-14T07:00:00Z"] + cfg)
        #expect(ok.status == 0, "\(ok.err)")
        let sleep = try CLITests.run(
            [
                "write", "sleep_analysis", "asleep_core", "--at", "2026-10-14T01:00:00Z",
                "--end", "2026-10-14T02:00:00Z"
            ] + cfg)
        #expect(sleep.status == 0, "\(sleep.err)")
        let store = try CommandStore(dataDir: serve.dataDir)
        let all = try store.all()
        #expect(all.map(\.id) == ["c_1", "c_2"])
        #expect(all[0].unit == "lb" && all[0].value == .number(154))
        #expect(all[1].value == .name("asleep_core") && all[1].unit == nil)
        // write_back off: commands are refused with what to do.
        let off = try ServeProcess(config: LiveServeTests.config)
        let r = try CLITests.run(["write", "body_mass", "70", "kg", "--at", "now", "--config", off.configPath])
        #expect(r.status == 2)
        #expect(r.err.contains("write_back: true"))
    }

    /// Plain HTTP and no secret: the app would ignore an unsigned reply, so none is sent.
    @Test func noCommandsWithoutASignatureOverPlainHTTP() throws {
        let config = Self.config.replacingOccurrences(of: "    hmac: {secret: \(Vectors.secret)}\n", with: "")
        #expect(!config.contains("hmac"))
        let serve = try ServeProcess(config: config)
        #expect(try CLITests.run(["write", "dietary_water", "250", "--at", "now", "--config", serve.configPath]).status == 0)
        let body = Vectors.syncBody(samples: [Vectors.stepsSample])
        let r = try serve.client().request(
            "POST", "/hook",
            headers: [
                ("X-Syncky-Format", "native"), ("X-Syncky-Delivery", "d1"),
                ("Authorization", "Bearer \(Vectors.token)")
            ],
            body: Array(body.utf8))
        #expect(r.status == 200 && r.body.isEmpty)
        #expect(ServeProcess.eventually { serve.stderrText.contains("reads only signed replies") })
    }

    // The Check connection vector is signed at 1791961500, too far from 1791961923; this test
    // signs the same body again at 1791961923.
    static let checkBodyFor1791961923 = Vectors.checkBody
    static func checkHeadersAt1791961923() -> [(String, String)] {
        let mac = Crypto.hmacSHA256(key: Array(Vectors.secret.utf8), Array("1791961923.".utf8), Array(checkBodyFor1791961923.utf8))
        var h = replacing(Vectors.checkHeaders, "X-Syncky-Timestamp", "1791961923")
        h = replacing(h, "X-Syncky-Signature", "v1=" + Crypto.lowercaseHex(mac))
        return h
    }

    static func replacing(_ headers: [(String, String)], _ name: String, _ value: String?) -> [(String, String)] {
        LiveServeTests.replacing(headers, name, value)
    }
}
