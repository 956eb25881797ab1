import Foundation
import Glibc

/// A minimal HTTP/1.1 client over a real loopback socket, so tests send exactly the bytes
/// they mean (the guide's vectors, broken bodies, slow clients) and read what came back.
final class RawHTTPClient {
    struct Response {
        var status: Int
        var headers: [(String, String)]
        var body: [UInt8]

        func header(_ name: String) -> String? {
            headers.first { $0.0.lowercased() == name.lowercased() }?.1
        }

        var text: String { String(decoding: body, as: UTF8.self) }

        var json: [String: Any]? {
            (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]
        }
    }

    struct ClientError: Error, CustomStringConvertible {
        var description: String
    }

    let port: UInt16
    private(set) var fd: Int32 = -1
    private var pending: [UInt8] = []

    init(port: UInt16) {
        self.port = port
    }

    deinit { close() }

    func connect() throws {
        if fd >= 0 { return }
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var tv = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        if rc != 0 {
            let e = errno
            close()
            throw ClientError(description: "connect to 127.0.0.1:\(port): \(String(cString: strerror(e)))")
        }
        pending = []
    }

    func close() {
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
    }

    func sendRaw(_ bytes: [UInt8]) throws {
        try connect()
        var off = 0
        while off < bytes.count {
            let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + off, bytes.count - off, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { throw ClientError(description: "send failed: \(String(cString: strerror(errno)))") }
            off += n
        }
    }

    /// Sends one request (keep-alive) and reads the response; `Host` is 127.0.0.1:port unless
    /// `headers` name one.
    func request(_ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8] = []) throws -> Response {
        var head = "\(method) \(path) HTTP/1.1\r\n"
        if !headers.contains(where: { $0.0.lowercased() == "host" }) { head += "Host: 127.0.0.1:\(port)\r\n" }
        for (k, v) in headers { head += "\(k): \(v)\r\n" }
        if !body.isEmpty || method == "POST" { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        try sendRaw(Array(head.utf8) + body)
        return try readResponse()
    }

    func post(_ path: String, headers: [(String, String)], body: String) throws -> Response {
        try request("POST", path, headers: headers, body: Array(body.utf8))
    }

    private func fill() throws -> Bool {
        var buf = [UInt8](repeating: 0, count: 65_536)
        let n = buf.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n < 0 { throw ClientError(description: "recv failed: \(String(cString: strerror(errno)))") }
        if n == 0 { return false }
        pending.append(contentsOf: buf[0..<n])
        return true
    }

    func readResponse() throws -> Response {
        let sep: [UInt8] = [13, 10, 13, 10]
        var headerEnd: Int?
        while headerEnd == nil {
            if let r = find(sep, in: pending) { headerEnd = r; break }
            guard try fill() else { throw ClientError(description: "connection closed before a response") }
        }
        let head = String(decoding: pending[0..<headerEnd!], as: UTF8.self)
        pending.removeFirst(headerEnd! + 4)
        var lines = head.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else {
            throw ClientError(description: "bad status line: \(head)")
        }
        var headers: [(String, String)] = []
        for l in lines {
            guard let colon = l.firstIndex(of: ":") else { continue }
            headers.append((String(l[..<colon]), l[l.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        if headers.contains(where: { $0.0.lowercased() == "transfer-encoding" && $0.1.lowercased().contains("chunked") }) {
            return Response(status: status, headers: headers, body: try readChunked())
        }
        let length = headers.first { $0.0.lowercased() == "content-length" }.flatMap { Int($0.1) } ?? 0
        while pending.count < length {
            guard try fill() else { throw ClientError(description: "connection closed in the body") }
        }
        let body = Array(pending[0..<length])
        pending.removeFirst(length)
        if headers.contains(where: { $0.0.lowercased() == "connection" && $0.1.lowercased() == "close" }) { close() }
        return Response(status: status, headers: headers, body: body)
    }

    /// A chunked body (InfluxDB answers queries so).
    private func readChunked() throws -> [UInt8] {
        var body: [UInt8] = []
        while true {
            var lineEnd: Int?
            while lineEnd == nil {
                if let r = find([13, 10], in: pending) { lineEnd = r; break }
                guard try fill() else { throw ClientError(description: "connection closed in a chunked body") }
            }
            let sizeText = String(decoding: pending[0..<lineEnd!], as: UTF8.self).split(separator: ";").first ?? ""
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) else {
                throw ClientError(description: "bad chunk size \(sizeText)")
            }
            pending.removeFirst(lineEnd! + 2)
            while pending.count < size + 2 {
                guard try fill() else { throw ClientError(description: "connection closed in a chunk") }
            }
            body.append(contentsOf: pending[0..<size])
            pending.removeFirst(size + 2)
            if size == 0 { return body }
        }
    }

    private func find(_ needle: [UInt8], in hay: [UInt8]) -> Int? {
        guard hay.count >= needle.count else { return nil }
        for i in 0...(hay.count - needle.count) where hay[i] == needle[0] && Array(hay[i..<(i + needle.count)]) == needle {
            return i
        }
        return nil
    }
}
