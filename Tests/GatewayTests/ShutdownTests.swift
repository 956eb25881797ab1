import Foundation
@testable import Gateway
import HealthgateCore
@testable import HealthgateTesting
import Testing

/// SIGTERM: `serve` stops accepting, answers the requests in flight, lets each sink finish its
/// write, and exits within `shutdown_timeout` — even with a sink whose endpoint never answers;
/// what was not delivered stays queued and goes out after the next start.
@Suite(.serialized) struct ShutdownTests {
    static func config(sinkURL: String, timeout: String = "3s") -> String {
        """
        listen: 127.0.0.1:0
        data_dir: DATA_DIR
        shutdown_timeout: \(timeout)
        receivers:
        \(Vectors.phoneReceiver)
        routes:
          - {from: [phone], to: [archive, hook]}
        sinks:
          archive: {kind: file, path: "archive.ndjson"}
          hook: {kind: http, url: "\(sinkURL)", timeout: 60s, retry: {initial: 100ms, max: 500ms}}
        """
    }

    static func post(_ serve: ServeProcess, uuid: String) throws -> Int {
        let delivery = UUID().uuidString.lowercased()
        let body = Vectors.syncBody(
            samples: [PostgresSinkTests.q(uuid, "steps", 10, "count", at: PostgresSinkTests.base)], delivery: delivery)
        return try serve.client().request(
            "POST", "/hook", headers: LiveServeTests.signedHeaders(body, delivery: delivery),
            body: Array(body.utf8)
        ).status
    }

    /// A serve that ended on its own (a signal the test sent itself) has its pipes read to
    /// their end once the test stops it: nothing is left reading them (watches left on closed
    /// descriptors crashed libdispatch's event loop later, in another test).
    @Test func aServeThatEndedByItselfIsNoLongerWatched() throws {
        let serve = try ServeProcess(
            config: """
                listen: 127.0.0.1:0
                data_dir: DATA_DIR
                receivers:
                \(Vectors.phoneReceiver)
                sinks:
                  archive: {kind: file, path: "archive.ndjson"}
                """)
        #expect(serve.stdoutReader?.isDone == false)
        kill(serve.process.processIdentifier, SIGTERM)
        #expect(serve.process.waitUntilExit(within: 30))
        serve.stop()
        #expect(serve.stdoutReader?.isDone == true)
        #expect(serve.stderrReader?.isDone == true)
        #expect(serve.process.terminationStatus == 0, "\(serve.stderrText)")
    }

    @Test func aSinkThatHangsDoesNotHoldTheStopPastTheDeadline() throws {
        let hang = ListeningSocket() // takes the connection, never answers
        let serve = try ServeProcess(config: Self.config(sinkURL: "http://127.0.0.1:\(hang.port)/hook"))
        #expect(try Self.post(serve, uuid: "kept-1") == 200)
        #expect(ServeProcess.eventually { serve.metric("healthgate_sink_records_sent_total", sink: "archive") == 1 })
        Thread.sleep(forTimeInterval: 0.5) // the hook sink is inside its write now
        let t0 = Date()
        serve.stop()
        let took = Date().timeIntervalSince(t0)
        #expect(took < 3 + 2, "took \(took) s")
        #expect(serve.process.terminationStatus == 0)
        #expect(serve.stderrText.contains("stopping within 3 s"), "\(serve.stderrText)")

        // Started again with an endpoint that answers: the record that waited is delivered.
        let good = try ScriptedEndpoint { _ in HTTPResponse(status: 200) }
        let config = Self.config(sinkURL: good.url).replacingOccurrences(of: "DATA_DIR", with: serve.dataDir)
        let again = try ServeProcess(config: config, dataDir: serve.dataDir + "-2")
        _ = again
        #expect(ServeProcess.eventually(15) { good.requests.contains { String(decoding: $0.body, as: UTF8.self).contains("kept-1") } })
        again.stop()
        good.stop()
    }

    @Test func aRequestInFlightIsAnsweredAndKeptWhileNewConnectionsAreRefused() throws {
        let good = try ScriptedEndpoint { _ in HTTPResponse(status: 200) }
        let serve = try ServeProcess(config: Self.config(sinkURL: good.url, timeout: "5s"))
        let delivery = UUID().uuidString.lowercased()
        let body = Array(
            Vectors.syncBody(
                samples: [PostgresSinkTests.q("in-flight", "steps", 10, "count", at: PostgresSinkTests.base)],
                delivery: delivery
            ).utf8)
        let headers = LiveServeTests.signedHeaders(String(decoding: body, as: UTF8.self), delivery: delivery)
        let c = serve.client()
        try c.connect()
        var head = "POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: \(body.count)\r\n"
        for (k, v) in headers { head += "\(k): \(v)\r\n" }
        head += "\r\n"
        try c.sendRaw(Array(head.utf8) + Array(body.prefix(body.count / 2)))
        Thread.sleep(forTimeInterval: 0.3)
        kill(serve.process.processIdentifier, SIGTERM)
        Thread.sleep(forTimeInterval: 0.5)
        // Stopped listening: a new connection is refused.
        #expect(throws: (any Error).self) { try serve.client().request("GET", "/healthz") }
        try c.sendRaw(Array(body.suffix(from: body.count / 2)))
        let r: RawHTTPClient.Response
        do { r = try c.readResponse() } catch {
            serve.stop()
            Issue.record("\(error): \(serve.stderrText)")
            return
        }
        #expect(r.status == 200, "\(String(decoding: r.body, as: UTF8.self))")
        serve.stop()
        #expect(serve.process.terminationStatus == 0)
        // It was kept: delivered by the next start if not before.
        let again = try ServeProcess(
            config: Self.config(sinkURL: good.url).replacingOccurrences(of: "DATA_DIR", with: serve.dataDir),
            dataDir: serve.dataDir + "-2")
        #expect(ServeProcess.eventually(15) { good.requests.contains { String(decoding: $0.body, as: UTF8.self).contains("in-flight") } })
        again.stop()
        good.stop()
    }

    @Test func theTimeoutIsChecked() throws {
        #expect(throws: (any Error).self) { try ConfigTests().load(Self.config(sinkURL: "http://127.0.0.1:9/x", timeout: "0s")) }
        #expect(throws: (any Error).self) { try ConfigTests().load(Self.config(sinkURL: "http://127.0.0.1:9/x", timeout: "1h")) }
        let t = try ConfigTests().load(Self.config(sinkURL: "http://127.0.0.1:9/x", timeout: "7s"))
        #expect(t.shutdownTimeout == 7)
        #expect(
            try ConfigTests().load(
                Self.config(sinkURL: "http://127.0.0.1:9/x").replacingOccurrences(of: "shutdown_timeout: 3s\n", with: "")
            ).shutdownTimeout == 20)
    }
}
