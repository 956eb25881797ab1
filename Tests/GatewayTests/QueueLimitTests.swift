import Foundation
@testable import Gateway
import HealthgateCore
@testable import HealthgateTesting
@testable import Pipeline
import SinkKit
import Testing

/// queue.max_bytes with when_full block and drop_oldest, and the journal's own budget, with a
/// webhook whose endpoint is down.
@Suite(.serialized) struct QueueLimitTests {
    static func config(port: UInt16, queue: String, journal: String = "") -> String {
        """
        listen: 127.0.0.1:0
        data_dir: DATA_DIR
        \(journal)
        receivers:
          phone:
            kind: syncky
            path: /hook
            auth: {type: bearer, token: \(Vectors.token)}
            hmac: {secret: \(Vectors.secret)}
        routes:
          - {name: all, from: ["*"], to: [archive, hook]}
        sinks:
          archive: {kind: file, path: "archive.ndjson", batch: {max_wait: 10ms}}
          hook: {kind: http, url: "http://127.0.0.1:\(port)/hook", retry: {initial: 50ms, max: 100ms}, batch: {max_wait: 10ms}\(queue)}
        """
    }

    static func post(_ c: RawHTTPClient, _ i: Int) throws -> (RawHTTPClient.Response, [String]) {
        let uuids = (0..<20).map { "q-\(i)-\($0)" }
        let body = Vectors.syncBody(samples: uuids.map(CrashTests.sample))
        return (try c.request("POST", "/hook", headers: LiveServeTests.signedHeaders(body), body: Array(body.utf8)), uuids)
    }

    @Test func aBlockingSinkOverItsLimitStopsIntakeUntilItCatchesUp() throws {
        let port = ScriptedEndpoint.freePort()
        let serve = try ServeProcess(config: Self.config(port: port, queue: ", queue: {max_bytes: 20KB}"))
        let c = serve.client()
        var acked: [String] = []
        var refused: RawHTTPClient.Response?
        for i in 0..<20 where refused == nil {
            let (r, uuids) = try Self.post(c, i)
            if r.status == 200 { acked += uuids } else { refused = r }
        }
        let r = try #require(refused, "the queue limit never applied")
        #expect(r.status == 503)
        #expect(r.header("Retry-After") == "60")
        #expect(r.text.contains("Sink hook"))
        #expect((2...5).contains(acked.count / 20), "\(acked.count / 20) requests taken before the limit")
        // The endpoint returns; the sink catches up and intake opens again.
        let endpoint = try ScriptedEndpoint(port: port) { _ in HTTPResponse(status: 200) }
        #expect(ServeProcess.eventually(15) { Set(endpoint.requests.flatMap(ScriptedEndpoint.uuids)) == Set(acked) })
        let (again, more) = try Self.post(c, 100)
        #expect(again.status == 200)
        #expect(ServeProcess.eventually(10) { Set(endpoint.requests.flatMap(ScriptedEndpoint.uuids)).isSuperset(of: more) })
        #expect(try c.request("GET", "/metrics").text.contains(#"healthgate_sink_records_dropped_total{sink="hook"} 0"#))
    }

    @Test func aDropOldestSinkShedsItsOldestRecordsAndNothingElse() throws {
        let port = ScriptedEndpoint.freePort()
        let serve = try ServeProcess(config: Self.config(port: port, queue: ", queue: {max_bytes: 20KB, when_full: drop_oldest}"))
        let c = serve.client()
        var acked: [String] = []
        for i in 0..<12 {
            let (r, uuids) = try Self.post(c, i)
            #expect(r.status == 200)
            acked += uuids
        }
        var metrics = ""
        #expect(
            ServeProcess.eventually(10) {
                metrics = (try? serve.client().request("GET", "/metrics").text) ?? ""
                return !metrics.contains(#"healthgate_sink_records_dropped_total{sink="hook"} 0"#)
            }, "nothing was dropped")
        // The archive, which has no limit, has everything.
        #expect(ServeProcess.eventually { Set(serve.ndjson(under: "").compactMap { $0["uuid"] as? String }).isSuperset(of: acked) })
        // The webhook gets only the newest records when it returns, within its limit.
        let endpoint = try ScriptedEndpoint(port: port) { _ in HTTPResponse(status: 200) }
        var got: [String] = []
        #expect(
            ServeProcess.eventually(15) {
                got = endpoint.requests.flatMap(ScriptedEndpoint.uuids)
                return got.last == acked.last
            })
        #expect(got.count < acked.count)
        #expect(got == Array(acked.suffix(got.count)), "the webhook must get the newest records, in order")
        let dropped = metrics.split(separator: "\n").first { $0.hasPrefix(#"healthgate_sink_records_dropped_total{sink="hook"}"#) }
        #expect(dropped != nil)
    }

    @Test func theJournalBudgetStopsAllIntake() throws {
        let port = ScriptedEndpoint.freePort()
        let serve = try ServeProcess(config: Self.config(port: port, queue: "", journal: "journal: {max_bytes: 40KB, segment_bytes: 8KB}"))
        let c = serve.client()
        var refused: RawHTTPClient.Response?
        for i in 0..<30 where refused == nil {
            let (r, _) = try Self.post(c, i)
            if r.status != 200 { refused = r }
        }
        let r = try #require(refused, "the journal budget never applied")
        #expect(r.status == 503)
        #expect(r.text.contains("Storage budget reached"))
        // Once the webhook catches up, segments are deleted and intake opens again.
        let endpoint = try ScriptedEndpoint(port: port) { _ in HTTPResponse(status: 200) }
        _ = endpoint
        #expect(ServeProcess.eventually(15) { (try? Self.post(c, 1000 + Int.random(in: 0..<100_000)).0.status) == 200 })
    }
}

@Suite struct JournalRetentionTests {
    @Test func keepsSegmentsNewerThanTheRetention() throws {
        let dir = ServeProcess.makeTempDir("retention")
        let j = try Journal(directory: dir, segmentBytes: 200, logger: Logger(component: "t", sink: MemoryLogSink()))
        for i in 1...10 {
            try j.append(
                payload: Array("{\"entry\":\(i),\"pad\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}\n".utf8),
                count: 1, time: Timestamp(seconds: Int64(i * 100)))
        }
        let before = j.segmentFirstSeqs.count
        #expect(before >= 5)
        // Every sink has passed everything, but entries newer than t=500 must stay.
        j.deleteSegments(below: 11, lastEntryBefore: 500)
        let left = j.segmentFirstSeqs
        #expect(left.count < before)
        #expect(j.makeReader(from: left[0]).read(maxEntries: 100).allSatisfy { $0.timeNanos >= 500_000_000_000 || $0.seq >= left[0] })
        #expect(j.backlog(fromSeq: 5, skip: 0).records == 6)
        j.deleteSegments(below: 11)
        #expect(j.segmentFirstSeqs.count == 1)
    }
}
