import Foundation
@testable import Gateway
import Glibc
import HealthgateCore
@testable import HealthgateTesting
import Posix
import Testing

/// A request that takes long (a journal fsync stuck, a large body) holds up no other
/// connection's: libmicrohttpd puts connections opened together on one of its threads, and a
/// request answered on that thread made every other connection there wait for it.
@Suite struct RequestWorkersTests {
    /// Answers `/slow` only once let go; everything else at once.
    final class Gate: HTTPHandler, @unchecked Sendable {
        private let monitor = Monitor()
        private var open = false
        private var entered = false

        func handle(_ request: HTTPRequest) -> HTTPResponse {
            if request.path == "/slow" {
                monitor.withLock {
                    entered = true
                    monitor.broadcast()
                    let until = monotonicSeconds() + 20
                    while !open && monotonicSeconds() < until { monitor.wait(seconds: 0.1) }
                }
            }
            return HTTPResponse(status: 200, body: Array(request.path.utf8))
        }

        func letGo() {
            monitor.withLock {
                open = true; monitor.broadcast()
            }
        }

        func waitUntilEntered() -> Bool {
            monitor.withLock {
                let until = monotonicSeconds() + 10
                while !entered && monotonicSeconds() < until { monitor.wait(seconds: 0.1) }
                return entered
            }
        }

        func maxBodyBytes(forPath path: String) -> Int { 1 << 20 }
        func bodyTooLarge(path: String, limit: Int) -> HTTPResponse { HTTPResponse(status: 413) }
        func tooMuchInFlight(path: String, limit: Int) -> HTTPResponse { HTTPResponse(status: 503) }
        func preflight(_ headersOnly: HTTPRequest) -> HTTPResponse? { nil }
    }

    /// Under steady load the queue never runs empty: what it answered must not stay in it (it
    /// grew by every request answered until the queue emptied, which it may never do).
    @Test func theQueueHoldsNoAnsweredRequestsUnderSteadyLoad() {
        let workers = RequestWorkers(count: 1)
        defer { workers.stop() }
        let monitor = Monitor()
        var done = 0, most = 0
        let total = 20_000
        // Each request, answered, queues the next: two always wait behind the one running.
        func request() {
            let n = monitor.withLock {
                done += 1
                most = max(most, workers.held)
                return done
            }
            if n + 3 <= total { _ = workers.submit(request) }
            if n == total { monitor.withLock { monitor.broadcast() } }
        }
        for _ in 0..<3 { #expect(workers.submit(request)) }
        monitor.withLock {
            let until = monotonicSeconds() + 30
            while done < total && monotonicSeconds() < until { monitor.wait(seconds: 0.1) }
        }
        monitor.withLock {
            #expect(done == total)
            #expect(most <= 200, "the queue held \(most) requests, most of them answered")
        }
    }

    @Test func aRequestThatBlocksHoldsUpNoOtherConnection() throws {
        let gate = Gate()
        let server = HTTPServer(options: .init(host: "127.0.0.1", port: 0, threads: 2), handler: gate)
        let port = try server.start()
        defer {
            gate.letGo()
            server.stop()
        }
        // Eight connections opened together, as a client's pool opens them: libmicrohttpd
        // accepts them in a row, most on one thread.
        let clients = (0..<8).map { _ in RawHTTPClient(port: port) }
        for c in clients {
            try c.connect()
            var tv = timeval(tv_sec: 5, tv_usec: 0)
            setsockopt(c.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        }
        try clients[0].sendRaw(Array("GET /slow HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
        #expect(gate.waitUntilEntered())
        // The first one's request is still being answered; every other connection is answered
        // meanwhile, each request more than once.
        for round in 0..<3 {
            for (i, c) in clients.enumerated().dropFirst() {
                let r = try c.request("GET", "/fast/\(i)/\(round)")
                #expect(r.status == 200)
                #expect(r.text == "/fast/\(i)/\(round)")
            }
        }
        gate.letGo()
        let slow = try clients[0].readResponse()
        #expect(slow.status == 200 && slow.text == "/slow")
        // And the connection it came on goes on as any other.
        #expect(try clients[0].request("GET", "/again").text == "/again")
    }

    @Test func stoppingAnswersWhatTheWorkersHold() throws {
        let gate = Gate()
        let server = HTTPServer(options: .init(host: "127.0.0.1", port: 0, threads: 2), handler: gate)
        let port = try server.start()
        let client = RawHTTPClient(port: port)
        try client.sendRaw(Array("GET /slow HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
        #expect(gate.waitUntilEntered())
        // Stopping waits for the request a worker holds, which is answered (not cut off).
        let stopper = Forked { server.stop(finishingWithin: 10) }
        usleep(200_000)
        gate.letGo()
        #expect(stopper.join() == 0)
        let r = try client.readResponse()
        #expect(r.status == 200 && r.text == "/slow")
    }
}
