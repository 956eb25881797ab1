import Foundation
@testable import Gateway
import Glibc
import HealthgateCore
@testable import HealthgateTesting
@testable import Pipeline
import SinkKit
import Synchronization
import Testing

/// Slow and idle clients cannot starve the gateway: 1,100 connections trickling one header
/// byte a second were never closed, and 2,000 idle ones filled max_connections, so every valid
/// request timed out.
@Suite(.serialized) struct ConnectionStarvationTests {
    /// A raw TCP connection to the gateway, kept open as long as the client lives.
    static func open(_ port: UInt16) -> RawHTTPClient? {
        let c = RawHTTPClient(port: port)
        return (try? c.connect()) == nil ? nil : c
    }

    /// Whether the server has closed `fd` (a read sees the end, or an error).
    static func isClosedByServer(_ fd: Int32) -> Bool {
        var b: UInt8 = 0
        let n = recv(fd, &b, 1, Int32(MSG_DONTWAIT))
        return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
    }

    @Test func aValidRequestIsAnsweredWhileThousandsOfSlowAndIdleConnectionsAreOpen() throws {
        let serve = try ServeProcess(config: LiveServeTests.config)
        let port = serve.port
        var idle: [RawHTTPClient] = []
        var clients: [RawHTTPClient] = []
        for _ in 0..<2000 { if let c = Self.open(port) { idle.append(c) } }
        for _ in 0..<1100 {
            if let c = Self.open(port) {
                _ = send(c.fd, "P", 1, Int32(MSG_NOSIGNAL))
                clients.append(c)
            }
        }
        let trickling = clients.map(\.fd)
        #expect(idle.count + trickling.count > 3000, "the connects themselves must succeed")
        defer { withExtendedLifetime(idle + clients) {} }
        // One more header byte a second on each trickling connection, for up to 14 s.
        let stop = Atomic(false)
        let fds = trickling
        let trickler = Thread {
            let line = Array("OST /hook HTTP/1.1\r\nHost: x\r\nX-Slow: ".utf8) + [UInt8](repeating: 0x61, count: 100)
            var i = 0
            while !stop.load(ordering: .relaxed) && i < 14 && i < line.count {
                for fd in fds { _ = withUnsafePointer(to: line[i]) { send(fd, $0, 1, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) } }
                i += 1
                Thread.sleep(forTimeInterval: 1)
            }
        }
        trickler.start()
        defer { stop.store(true, ordering: .relaxed) }
        usleep(1_500_000)
        // A valid signed request, on a new connection, is answered within 2 s.
        let body = Vectors.syncBody(samples: [Vectors.stepsSample])
        let started = Date()
        let r = try serve.client().request("POST", "/hook", headers: LiveServeTests.signedHeaders(body), body: Array(body.utf8))
        let took = Date().timeIntervalSince(started)
        #expect(r.status == 200, "\(r.status) \(r.text)")
        #expect(took < 2, "answered after \(took) s")
        // The trickling ones are closed once their headers are overdue (10 s), whatever they send.
        #expect(
            ServeProcess.eventually(15) { trickling.filter { Self.isClosedByServer($0) }.count == trickling.count },
            "\(trickling.filter { Self.isClosedByServer($0) }.count) of \(trickling.count) closed")
        let m = try serve.client().request("GET", "/metrics").text
        #expect(m.contains(#"healthgate_http_connections_closed_total{reason="make_room"}"#))
        #expect(!m.contains(#"healthgate_http_connections_closed_total{reason="slow_headers"} 0"#), "\(m)")
        serve.stop()
        #expect(serve.stderrText.contains("closed connections:"), "\(serve.stderrText.suffix(2000))")
    }

    /// A body that arrives more slowly than http.min_body_rate is cut off after its grace.
    @Test func aBodyTrickledBelowTheMinimumRateIsCutOff() throws {
        let serve = try ServeProcess(
            config: LiveServeTests.config.replacingOccurrences(
                of: "data_dir: DATA_DIR", with: "data_dir: DATA_DIR\nhttp: {min_body_rate: 10KB}"))
        let c = serve.client()
        try c.sendRaw(
            Array("POST /hook HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(Vectors.token)\r\nContent-Length: 100000\r\n\r\n".utf8))
        let started = Date()
        var closed = false
        while Date().timeIntervalSince(started) < 20 && !closed {
            do { try c.sendRaw([0x20]) } catch { closed = true }
            if Self.isClosedByServer(c.fd) { closed = true }
            usleep(200_000)
        }
        let took = Date().timeIntervalSince(started)
        #expect(closed && took > 9 && took < 15, "closed: \(closed) after \(took) s")
        #expect(
            try serve.client().request("GET", "/metrics").text.contains(#"healthgate_http_connections_closed_total{reason="slow_body"} 1"#))
    }
}
