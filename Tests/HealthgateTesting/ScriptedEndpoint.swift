import Foundation
import Gateway
import HealthgateCore

/// A real HTTP endpoint on loopback (healthgate's own libmicrohttpd server) whose answers a
/// test scripts: the fault-injecting peer for sink tests (refusals, 5xx, 429, hangs).
final class ScriptedEndpoint: HTTPHandler, @unchecked Sendable {
    private let lock = NSLock()
    private var script: @Sendable (HTTPRequest) -> HTTPResponse
    private var received: [HTTPRequest] = []
    private var server: HTTPServer!
    private(set) var port: UInt16 = 0

    init(port: UInt16 = 0, _ script: @escaping @Sendable (HTTPRequest) -> HTTPResponse) throws {
        self.script = script
        server = HTTPServer(options: .init(host: "127.0.0.1", port: port, threads: 4), handler: self)
        self.port = try server.start()
    }

    deinit { server.stop() }

    func stop() { server.stop() }

    var url: String { "http://127.0.0.1:\(port)/hook" }

    var requests: [HTTPRequest] {
        lock.lock()
        defer { lock.unlock() }
        return received
    }

    func answer(with script: @escaping @Sendable (HTTPRequest) -> HTTPResponse) {
        lock.lock()
        self.script = script
        lock.unlock()
    }

    func handle(_ request: HTTPRequest) -> HTTPResponse {
        lock.lock()
        received.append(request)
        let s = script
        lock.unlock()
        return s(request)
    }

    func maxBodyBytes(forPath path: String) -> Int { 64 << 20 }
    func bodyTooLarge(path: String, limit: Int) -> HTTPResponse { HTTPResponse(status: 413) }
    func tooMuchInFlight(path: String, limit: Int) -> HTTPResponse { HTTPResponse(status: 503) }
    func preflight(_ headersOnly: HTTPRequest) -> HTTPResponse? { nil }

    /// The uuids of the canonical records in a request body (JSON array or NDJSON).
    static func uuids(_ r: HTTPRequest) -> [String] {
        let data = Data(r.body)
        if let array = try? JSONSerialization.jsonObject(with: data) as? [[String: Any]] {
            return array.compactMap { $0["uuid"] as? String }
        }
        return String(decoding: r.body, as: UTF8.self).split(separator: "\n").compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])?["uuid"] as? String
        }
    }

    /// A loopback port nothing listens on (bound and released).
    static func freePort() -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        return UInt16(bigEndian: addr.sin_port)
    }
}
