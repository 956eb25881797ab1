import Foundation
import Glibc
import HealthgateCore
import Posix

/// A scripted HTTP/1.1 endpoint on loopback that serves every connection on a thread of its
/// own, so a script that holds one request back never holds back another connection's: the
/// peer for tests of requests in flight answered out of order. (`ScriptedEndpoint`'s server
/// pool may take two connections on one thread and then serves them one after the other.)
/// Keep-alive, `Content-Length` bodies only: what healthgate's sinks send.
final class ThreadedEndpoint: @unchecked Sendable {
    private let fd: Int32
    private(set) var port: UInt16 = 0
    private let script: @Sendable (HTTPRequest) -> HTTPResponse
    private let lock = NSLock()
    private var stopped = false
    private var connections: [Int32] = []

    init(_ script: @escaping @Sendable (HTTPRequest) -> HTTPResponse) {
        self.script = script
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } }
        listen(fd, 64)
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        port = UInt16(bigEndian: addr.sin_port)
        // Detached: nothing joins them (ThreadSanitizer calls an unjoined thread a leak).
        if case .success(let t) = startThread({ [self] in acceptLoop() }) { pthread_detach(t) }
    }

    deinit { stop() }

    func stop() {
        lock.lock()
        let open = stopped ? [] : connections
        stopped = true
        lock.unlock()
        shutdown(fd, Int32(SHUT_RDWR))
        for c in open { shutdown(c, Int32(SHUT_RDWR)) }
    }

    private func acceptLoop() {
        while true {
            let c = accept(fd, nil, nil)
            if c < 0 {
                if errno == EINTR { continue }
                return
            }
            lock.lock()
            if stopped {
                lock.unlock()
                close(c)
                return
            }
            connections.append(c)
            lock.unlock()
            if case .success(let t) = startThread({ [self] in serve(c) }) { pthread_detach(t) }
        }
    }

    /// Requests on one connection, one after another, until the peer closes it.
    private func serve(_ c: Int32) {
        defer { close(c) }
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        func fill() -> Bool {
            let n = chunk.withUnsafeMutableBytes { read(c, $0.baseAddress, $0.count) }
            if n <= 0 { return false }
            buffer += chunk[0..<n]
            return true
        }
        while true {
            let end: Int
            while true {
                if let e = ThreadedEndpoint.headerEnd(buffer) { end = e; break }
                if !fill() { return }
            }
            let head = String(decoding: buffer[0..<end], as: UTF8.self).components(separatedBy: "\r\n")
            let requestLine = head[0].split(separator: " ")
            var headers: [(name: String, value: String)] = []
            for line in head.dropFirst() where !line.isEmpty {
                guard let colon = line.firstIndex(of: ":") else { continue }
                headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
            }
            let length = headers.first { $0.name.lowercased() == "content-length" }.flatMap { Int($0.value) } ?? 0
            let bodyStart = end + 4
            while buffer.count < bodyStart + length { if !fill() { return } }
            let target = requestLine.count > 1 ? String(requestLine[1]) : "/"
            let parts = target.split(separator: "?", maxSplits: 1)
            let request = HTTPRequest(
                method: requestLine.first.map(String.init) ?? "GET", path: String(parts.first ?? "/"),
                query: parts.count > 1 ? String(parts[1]) : "", headers: headers,
                body: Array(buffer[bodyStart..<(bodyStart + length)]))
            buffer.removeSubrange(0..<(bodyStart + length))
            let response = script(request)
            var out = "HTTP/1.1 \(response.status) X\r\nContent-Length: \(response.body.count)\r\n"
            for h in response.headers { out += "\(h.name): \(h.value)\r\n" }
            out += "\r\n"
            let bytes = Array(out.utf8) + response.body
            var sent = 0
            while sent < bytes.count {
                let n = bytes[sent...].withUnsafeBytes { write(c, $0.baseAddress, $0.count) }
                if n <= 0 { return }
                sent += n
            }
        }
    }

    /// Where `\r\n\r\n` begins, if the header block is complete.
    static func headerEnd(_ b: [UInt8]) -> Int? {
        guard b.count >= 4 else { return nil }
        for i in 0...(b.count - 4) where b[i] == 13 && b[i + 1] == 10 && b[i + 2] == 13 && b[i + 3] == 10 { return i }
        return nil
    }
}

/// The out-of-order part of a scripted endpoint: every other request is held until the next one
/// comes in (at most 50 ms), so that requests in flight together are answered out of order, and
/// the first try of a request whose first record number is a multiple of 7 is to be refused.
final class OutOfOrderScript: @unchecked Sendable {
    private let lock = NSLock()
    private var arrivals = 0
    private var waiting = 0
    private var _overlapped = false
    private var _refused = Set<Int>()

    init() {}

    /// Requests were held while another came in.
    var overlapped: Bool { lock.lock(); defer { lock.unlock() }; return _overlapped }
    /// The first record numbers of the requests refused once.
    var refused: Set<Int> { lock.lock(); defer { lock.unlock() }; return _refused }

    /// Holds the request whose first record is `first` as the script says; true when it is to
    /// be refused.
    func arrive(first: Int) -> Bool {
        lock.lock()
        arrivals += 1
        if waiting > 0 { _overlapped = true }
        let refuse = first % 7 == 0 && _refused.insert(first).inserted
        let hold = arrivals % 2 == 1
        let seen = arrivals
        if hold { waiting += 1 }
        lock.unlock()
        if hold {
            for _ in 0..<5 {
                lock.lock()
                let moved = arrivals != seen
                lock.unlock()
                if moved { break }
                usleep(10_000)
            }
            lock.lock()
            waiting -= 1
            lock.unlock()
        }
        return refuse
    }
}
