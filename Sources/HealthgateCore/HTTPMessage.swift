/// An HTTP request as the gateway's handlers see it: no sockets, so tests build one in memory.
/// A verified TLS client certificate: its subject as GnuTLS writes it (RFC 4514, e.g.
/// `CN=alice,O=Example`) and the SHA-256 of its DER in lower-case hex.
public struct ClientCertificate: Sendable, Equatable {
    public var subject: String
    public var sha256: String

    public init(subject: String, sha256: String) {
        self.subject = subject
        self.sha256 = sha256
    }
}

public struct HTTPRequest: Sendable {
    public var method: String
    /// The path without the query string, e.g. `/syncky`.
    public var path: String
    /// The raw query string after `?`, or empty.
    public var query: String
    /// Header names in lower case, in arrival order; repeated headers appear repeatedly.
    public var headers: [(name: String, value: String)]
    /// The body. The server reserves `bodySlack` bytes of room after a body of announced length,
    /// so that a parser which reads past the end (simdjson) parses it where it lies.
    public var body: [UInt8]
    /// Bytes of spare capacity kept after a body whose length was announced (Content-Length).
    public static let bodySlack = 64
    /// True when the request came over TLS (reply signatures are mandatory over plain HTTP).
    public var isTLS: Bool
    public var remoteAddress: String
    /// The client certificate the TLS handshake verified, where `tls.client_ca` asks for one.
    public var clientCertificate: ClientCertificate?

    public init(
        method: String, path: String, query: String = "", headers: [(name: String, value: String)] = [],
        body: [UInt8] = [], isTLS: Bool = false, remoteAddress: String = "127.0.0.1"
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers.map { ($0.name.lowercased(), $0.value) }
        self.body = body
        self.isTLS = isTLS
        self.remoteAddress = remoteAddress
    }

    /// The first value of a header (name compared case-insensitively).
    public func header(_ name: String) -> String? {
        let lower = name.lowercased()
        for h in headers where h.name == lower { return h.value }
        return nil
    }

    /// The value of a query parameter (percent-decoding `+` and `%XX`).
    public func queryParameter(_ name: String) -> String? {
        for pair in query.split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            if PercentEncoding.decode(String(kv[0])) == name {
                return kv.count > 1 ? PercentEncoding.decode(String(kv[1])) : ""
            }
        }
        return nil
    }
}

public struct HTTPResponse: Sendable, Equatable {
    public var status: Int
    public var headers: [HTTPHeader]
    public var body: [UInt8]
    /// Held by the server until the answer is sent or its connection gone (a share of a budget
    /// of answers in flight); not part of what the answer is.
    public var hold: ResponseHold?

    public init(status: Int, headers: [HTTPHeader] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public func header(_ name: String) -> String? {
        let lower = name.lowercased()
        return headers.first { $0.name.lowercased() == lower }?.value
    }

    public var bodyText: String { String(decoding: body, as: UTF8.self) }

    public static func == (a: HTTPResponse, b: HTTPResponse) -> Bool {
        a.status == b.status && a.headers == b.headers && a.body == b.body
    }
}

/// What an answer holds until it is let go: `release` runs once, when the last copy goes.
public final class ResponseHold: Sendable {
    let release: @Sendable () -> Void

    public init(release: @escaping @Sendable () -> Void) { self.release = release }

    deinit { release() }
}

public struct HTTPHeader: Sendable, Equatable {
    public var name: String
    public var value: String

    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

public enum PercentEncoding {
    /// Encodes every byte outside `A-Z a-z 0-9 - . _ ~` as `%XX` (uppercase hex), as setup links need.
    public static func encode(_ s: String) -> String {
        var out = [UInt8]()
        let hex = Array("0123456789ABCDEF".utf8)
        for b in s.utf8 {
            switch b {
            case 0x41...0x5A, 0x61...0x7A, 0x30...0x39, 0x2D, 0x2E, 0x5F, 0x7E:
                out.append(b)
            default:
                out.append(0x25)
                out.append(hex[Int(b >> 4)])
                out.append(hex[Int(b & 0xF)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes `%XX` and `+` (as a space); invalid escapes are kept as they are.
    public static func decode(_ s: String) -> String {
        var out = [UInt8]()
        let b = Array(s.utf8)
        var i = 0
        func hexValue(_ c: UInt8) -> UInt8? {
            switch c {
            case 0x30...0x39: return c - 0x30
            case 0x41...0x46: return c - 0x37
            case 0x61...0x66: return c - 0x57
            default: return nil
            }
        }
        while i < b.count {
            if b[i] == 0x25, i + 2 < b.count, let h = hexValue(b[i + 1]), let l = hexValue(b[i + 2]) {
                out.append(h << 4 | l)
                i += 3
            } else {
                out.append(b[i] == 0x2B ? 0x20 : b[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
