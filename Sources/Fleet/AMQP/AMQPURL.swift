import HealthgateCore

/// One broker of `fleet.brokers`: `amqp://user:password@host:port/vhost` (RabbitMQ's URI
/// spec: user, password and vhost percent-encoded, so the vhost `/` is `%2f`; no path is the
/// default vhost `/`; `amqps://` is TLS, port 5671). Parsed here, not by rabbitmq-c, which
/// refuses any query and says little about why.
public struct AMQPURL: Sendable, Equatable {
    public var tls: Bool
    public var host: String
    public var port: Int
    public var user: String
    public var password: String
    public var vhost: String

    public struct Invalid: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    public init(tls: Bool, host: String, port: Int, user: String, password: String, vhost: String) {
        (self.tls, self.host, self.port, self.user, self.password, self.vhost) = (tls, host, port, user, password, vhost)
    }

    public init(_ text: String) throws(Invalid) {
        // The text is not repeated: it holds the password (the config says where it is written).
        func fail(_ why: String) -> Invalid { Invalid(description: "not an AMQP URL (\(why))") }
        let rest: Substring
        if text.hasPrefix("amqp://") {
            (tls, rest) = (false, text.dropFirst(7))
        } else if text.hasPrefix("amqps://") {
            (tls, rest) = (true, text.dropFirst(8))
        } else {
            throw fail("it must start with amqp:// or amqps://")
        }
        if rest.contains("?") || rest.contains("#") { throw fail("query parameters are not supported") }
        let slash = rest.firstIndex(of: "/")
        let authority = slash.map { rest[..<$0] } ?? rest
        if let slash {
            let path = rest[rest.index(after: slash)...]
            guard !path.contains("/") else { throw fail("a vhost holding '/' is written %2f") }
            guard let v = AMQPURL.percentDecoded(path) else { throw fail("a bad %-escape in the vhost") }
            vhost = v
        } else {
            vhost = "/"
        }
        var hostPort = authority
        (user, password) = ("guest", "guest")
        if let at = authority.lastIndex(of: "@") {
            let credentials = authority[..<at]
            hostPort = authority[authority.index(after: at)...]
            let colon = credentials.firstIndex(of: ":")
            guard let u = AMQPURL.percentDecoded(colon.map { credentials[..<$0] } ?? credentials),
                let p = AMQPURL.percentDecoded(colon.map { credentials[credentials.index(after: $0)...] } ?? "")
            else { throw fail("a bad %-escape in the user or password") }
            (user, password) = (u, p)
        }
        var portText: Substring?
        if hostPort.hasPrefix("[") {
            guard let close = hostPort.firstIndex(of: "]") else { throw fail("an IPv6 address without its ']'") }
            host = String(hostPort[hostPort.index(after: hostPort.startIndex)..<close])
            let after = hostPort[hostPort.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw fail("text after the IPv6 address") }
                portText = after.dropFirst()
            }
        } else if let colon = hostPort.lastIndex(of: ":") {
            host = String(hostPort[..<colon])
            portText = hostPort[hostPort.index(after: colon)...]
        } else {
            host = String(hostPort)
        }
        guard !host.isEmpty else { throw fail("no host") }
        if let portText {
            guard let p = Int(portText), (1...65535).contains(p) else { throw fail("the port must be a number from 1 to 65535") }
            port = p
        } else {
            port = tls ? 5671 : 5672
        }
    }

    /// The URL as it may be shown: the password replaced by `***`.
    public var shown: String {
        let scheme = tls ? "amqps" : "amqp"
        let h = host.contains(":") ? "[\(host)]" : host
        return "\(scheme)://\(user):***@\(h):\(port)/\(vhost == "/" ? "%2f" : vhost)"
    }

    static func percentDecoded(_ s: Substring) -> String? {
        var out: [UInt8] = []
        var bytes = Array(s.utf8)[...]
        while let b = bytes.popFirst() {
            guard b == UInt8(ascii: "%") else {
                out.append(b)
                continue
            }
            guard bytes.count >= 2, let v = UInt8(String(decoding: bytes.prefix(2), as: UTF8.self), radix: 16) else { return nil }
            out.append(v)
            bytes = bytes.dropFirst(2)
        }
        return String(validating: out, as: UTF8.self)
    }
}
