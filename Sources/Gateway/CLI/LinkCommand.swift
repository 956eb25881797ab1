import Glibc
import HealthgateCore
import Posix

/// `healthgate link`: the Syncky setup link of a receiver (guide section 9).
struct LinkCommand {
    let options: Options
    init(_ o: Options) { options = o }

    func run() throws -> Int32 {
        let source = try ConfigSource.resolve(options)
        let t = try source.load(logger: Logger(component: "link", sink: StderrLogSink(minimum: .warning)))
        ConfigSource.announce("link", source, t)
        let synckys = t.receivers.filter { $0.config.kind == "syncky" }
        let chosen: (name: String, config: ReceiverConfig, receiver: any Receiver)
        if let name = options.values["--receiver"] {
            guard let r = synckys.first(where: { $0.name == name }) else {
                throw UsageError("no syncky receiver is named \"\(name)\"\(suggestion(name, synckys.map(\.name)))")
            }
            chosen = r
        } else {
            guard let r = synckys.first else { throw UsageError("the config has no syncky receiver") }
            chosen = r
        }
        let link = try SetupLink.build(
            receiver: chosen.name, config: chosen.config, topology: t,
            host: options.values["--host"], format: options.values["--format"] ?? "native",
            scheme: options.values["--scheme"] ?? "syncky")
        print(link)
        if options.flags.contains("--qr") { print(try TerminalQR.render(link), terminator: "") }
        if let w = SetupLink.hostWarning(config: chosen.config, topology: t, host: options.values["--host"]) { printErr(w) }
        return 0
    }
}

/// Builds `syncky://webhook?v=1&name=…&url=…&format=…&auth=…[&header=][&user=][&token=][&hmac=][&types=]`.
enum SetupLink {
    static let schemes = ["syncky", "syncky-dev", "syncky-staging"]
    static let formats = ["native", "hae", "csv", "influx"]

    static func build(
        receiver: String, config c: ReceiverConfig, topology t: Topology, host: String?,
        format: String, scheme: String
    ) throws -> String {
        guard schemes.contains(scheme) else {
            throw UsageError("--scheme must be one of \(schemes.joined(separator: ", "))")
        }
        guard formats.contains(format) else {
            throw UsageError("--format must be one of \(formats.joined(separator: ", "))")
        }
        let url = publicURL(config: c, topology: t, host: host)
        var q: [(String, String)] = [("v", "1"), ("name", c.name ?? receiver), ("url", url), ("format", format)]
        let auth = c.auth?.type ?? .none
        q.append(("auth", auth.rawValue))
        if auth == .header, let h = c.auth?.header { q.append(("header", h)) }
        if auth == .basic, let u = c.auth?.user { q.append(("user", u)) }
        if auth != .none, let tok = c.auth?.token { q.append(("token", tok)) }
        if let s = c.hmac?.secret { q.append(("hmac", s)) }
        if let types = c.types, !types.isEmpty { q.append(("types", types.joined(separator: ","))) }
        return "\(scheme)://webhook?"
            + q.map { k, v in
                k == "types"
                    ? "types=" + v.split(separator: ",").map { PercentEncoding.encode(String($0)) }.joined(separator: ",")
                    : "\(k)=\(PercentEncoding.encode(v))"
            }.joined(separator: "&")
    }

    /// The receiver's URL as a phone reaches it: `public_url`, else this machine's name.
    static func publicURL(config c: ReceiverConfig, topology t: Topology, host: String?, path: String? = nil) -> String {
        if let u = c.public_url, host == nil { return u }
        let scheme = t.tls != nil ? "https" : "http"
        var h = linkHost(topology: t, host: host)
        if h.contains(":") && !h.hasPrefix("[") { h = "[\(h)]" }
        let defaultPort = (scheme == "https" && t.listenPort == 443) || (scheme == "http" && t.listenPort == 80)
        return "\(scheme)://\(h)\(defaultPort ? "" : ":\(t.listenPort)")\(path ?? c.path ?? "/syncky")"
    }
}

extension SetupLink {
    /// The host a link names when the config gives no `public_url`: `--host`, the listen
    /// address, or this machine's mDNS name when it listens on every address.
    static func linkHost(topology t: Topology, host: String?) -> String {
        if let host { return host }
        if t.listenHost != "0.0.0.0" && t.listenHost != "::" { return t.listenHost }
        var buf = [CChar](repeating: 0, count: 256)
        gethostname(&buf, buf.count)
        return buf.withUnsafeBufferPointer { String(cString: $0.baseAddress!) } + ".local"
    }

    /// A warning when the link's host name does not resolve on this machine (a `.local` name
    /// without an mDNS responder, typically): the phone will not reach it either. It names the
    /// machine's own addresses to pass as `--host` instead.
    static func hostWarning(config c: ReceiverConfig, topology t: Topology, host: String?) -> String? {
        if c.public_url != nil && host == nil { return nil }
        let h = linkHost(topology: t, host: host)
        if h.contains(":") || h.allSatisfy({ $0.isNumber || $0 == "." }) { return nil } // an address
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var res: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(h, nil, &hints, &res)
        if rc == 0 {
            freeaddrinfo(res)
            return nil
        }
        let addresses = ownAddresses()
        var w = "warning: the link names \(h), which does not resolve on this machine"
        if h.hasSuffix(".local") { w += " (no mDNS responder: `sudo apt install avahi-daemon`)" }
        w += "; a phone may not reach it either. "
        w +=
            addresses.isEmpty
            ? "Pass --host with a name or address the phone can reach"
            : "Pass --host with one the phone can reach, e.g. --host \(addresses[0])"
                + (addresses.count > 1 ? " (this machine also has \(addresses.dropFirst().joined(separator: ", ")))" : "")
        return w + ", or set the receiver's public_url"
    }

    /// This machine's IPv4 addresses other than loopback, as text.
    static func ownAddresses() -> [String] {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0 else { return [] }
        defer { freeifaddrs(list) }
        var out: [String] = []
        var p = list
        while let a = p {
            defer { p = a.pointee.ifa_next }
            guard let sa = a.pointee.ifa_addr, sa.pointee.sa_family == sa_family_t(AF_INET) else { continue }
            var buf = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            guard getnameinfo(sa, socklen_t(MemoryLayout<sockaddr_in>.size), &buf, socklen_t(buf.count), nil, 0, NI_NUMERICHOST) == 0 else {
                continue
            }
            let text = buf.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            if !text.hasPrefix("127.") { out.append(text) }
        }
        return out
    }
}
