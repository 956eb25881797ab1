import CWebSockets
import FastJSON

/// A connection to Home Assistant's websocket API (`/api/websocket`): authenticated with a
/// long-lived access token, then one command at a time, each answered by its result. Owned by
/// one thread (the sink's). The token is never in an error.
public final class HAConnection {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
        /// Home Assistant answered and refused (the command, or the token); the connection is
        /// not at fault.
        public var refused = false
    }

    /// The version Home Assistant said it is (`auth_ok`): what it accepts depends on it.
    public let haVersion: String
    private let ws: UnsafeMutablePointer<hg_ws>
    private let timeout: Double
    private var nextID = 1
    private let parser: JSONParser

    /// Answers (history for weeks) can be large; past this a message closes the connection.
    static let maxMessage = 64 << 20

    /// `url`: Home Assistant's address as its users know it (`http://homeassistant.local:8123`,
    /// `https://…`); the websocket is at `/api/websocket` under it.
    public init(url: String, token: String, timeout: Double = 10) throws(Failure) {
        let (tls, host, port, base) = try HAConnection.parse(url)
        let parser = JSONParser()
        self.parser = parser
        var error = [CChar](repeating: 0, count: 256)
        guard let ws = hg_ws_open(host, Int32(port), base + "/api/websocket", tls ? 1 : 0, timeout, HAConnection.maxMessage, &error, 256)
        else {
            throw Failure(
                description: "cannot reach Home Assistant at \(url): "
                    + String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        do throws(Failure) {
            let hello = try HAConnection.receive(ws, parser, timeout)
            guard hello.type == "auth_required" else { throw Failure(description: "\(url) is not Home Assistant's websocket API") }
            var w = JSONWriter(capacity: 128)
            w.beginObject()
            w.key("type"); w.string("auth")
            w.key("access_token"); w.string(token)
            w.endObject()
            try HAConnection.send(ws, w.bytes, timeout)
            let answer = try HAConnection.receive(ws, parser, timeout)
            switch answer.type {
            case "auth_ok": haVersion = answer.version ?? ""
            case "auth_invalid":
                throw Failure(description: "Home Assistant refused the access token (\(answer.message ?? "auth_invalid"))", refused: true)
            default: throw Failure(description: "Home Assistant answered the login with \(answer.type)")
            }
        } catch {
            hg_ws_close(ws)
            throw error
        }
        self.ws = ws
        self.timeout = timeout
    }

    deinit { hg_ws_close(ws) }

    /// Runs command `type` with the members `fields` writes; the JSON of its `result`, or a
    /// failure with Home Assistant's code and message.
    public func call(_ type: String, _ fields: (inout JSONWriter) -> Void = { _ in }) throws(Failure) -> [UInt8] {
        let id = nextID
        nextID += 1
        var w = JSONWriter(capacity: 1024)
        w.beginObject()
        w.key("id"); w.int(id)
        w.key("type"); w.string(type)
        fields(&w)
        w.endObject()
        try HAConnection.send(ws, w.bytes, timeout)
        while true {
            let bytes = try HAConnection.receiveBytes(ws, timeout)
            guard let doc = try? parser.parse(bytes), doc.root["id"]?.int64 == Int64(id) else { continue }
            guard doc.root["type"]?.string == "result" else { continue }
            if doc.root["success"]?.bool == true {
                var out = JSONWriter(capacity: bytes.count)
                if let result = doc.root["result"] { result.write(to: &out) } else { out.raw(Array("null".utf8)) }
                return out.bytes
            }
            let error = doc.root["error"]
            throw Failure(
                description: "Home Assistant refused \(type): \(error?["code"]?.string ?? "error"): \(error?["message"]?.string ?? "")",
                refused: true)
        }
    }

    private static func send(_ ws: UnsafeMutablePointer<hg_ws>, _ bytes: [UInt8], _ timeout: Double) throws(Failure) {
        let rc = bytes.withUnsafeBytes { hg_ws_send(ws, $0.baseAddress, $0.count, timeout) }
        guard rc == 0 else { throw Failure(description: "Home Assistant: cannot send (\(String(cString: hg_ws_error(ws))))") }
    }

    private static func receiveBytes(_ ws: UnsafeMutablePointer<hg_ws>, _ timeout: Double) throws(Failure) -> [UInt8] {
        var pointer: UnsafePointer<UInt8>?
        var length = 0
        switch hg_ws_receive(ws, timeout, &pointer, &length) {
        case 1:
            let bytes = Array(UnsafeBufferPointer(start: pointer, count: length))
            hg_ws_consumed(ws)
            return bytes
        case 0: throw Failure(description: "Home Assistant did not answer within \(Int(timeout)) s")
        default: throw Failure(description: "Home Assistant: \(String(cString: hg_ws_error(ws)))")
        }
    }

    private static func receive(_ ws: UnsafeMutablePointer<hg_ws>, _ parser: JSONParser, _ timeout: Double) throws(Failure) -> (
        type: String, version: String?, message: String?
    ) {
        let bytes = try receiveBytes(ws, timeout)
        guard let doc = try? parser.parse(bytes) else { throw Failure(description: "Home Assistant sent what is not JSON") }
        return (doc.root["type"]?.string ?? "", doc.root["ha_version"]?.string, doc.root["message"]?.string)
    }

    /// `http(s)://host[:port][/base]` (or `ws(s)://`): TLS, host, port, base path.
    static func parse(_ url: String) throws(Failure) -> (Bool, String, Int, String) {
        let schemes = ["http://": false, "ws://": false, "https://": true, "wss://": true]
        guard let (prefix, tls) = schemes.first(where: { url.lowercased().hasPrefix($0.key) }) else {
            throw Failure(description: "not an http:// or https:// URL: \(url)")
        }
        var rest = Substring(url.dropFirst(prefix.count))
        let authority = rest.prefix { $0 != "/" }
        rest = rest.dropFirst(authority.count)
        var host = String(authority)
        var port = tls ? 443 : 80
        if host.hasPrefix("["), let end = host.firstIndex(of: "]") {
            let after = host[host.index(after: end)...]
            if after.hasPrefix(":") { port = Int(after.dropFirst()) ?? -1 }
            host = String(host[host.index(after: host.startIndex)..<end])
        } else if let colon = host.lastIndex(of: ":") {
            port = Int(host[host.index(after: colon)...]) ?? -1
            host = String(host[..<colon])
        }
        guard !host.isEmpty, (1...65535).contains(port), !host.contains("@") else {
            throw Failure(description: "not a Home Assistant address (host and port): \(url)")
        }
        var base = String(rest)
        while base.hasSuffix("/") { base.removeLast() }
        return (tls, host, port, base)
    }
}
