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
        let link = try SetupLink.build(receiver: chosen.name, config: chosen.config, topology: t,
                                       host: options.values["--host"], format: options.values["--format"] ?? "native",
                                       scheme: options.values["--scheme"] ?? "syncky")
        print(link)
        if options.flags.contains("--qr") { print(try TerminalQR.render(link), terminator: "") }
        return 0
    }
}

/// Builds `syncky://webhook?v=1&name=…&url=…&format=…&auth=…[&header=][&user=][&token=][&hmac=][&types=]`.
enum SetupLink {
    static let schemes = ["syncky", "syncky-dev", "syncky-staging"]
    static let formats = ["native", "hae", "csv", "influx"]

    static func build(receiver: String, config c: ReceiverConfig, topology t: Topology, host: String?,
                      format: String, scheme: String) throws -> String {
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
        return "\(scheme)://webhook?" + q.map { k, v in
            k == "types" ? "types=" + v.split(separator: ",").map { PercentEncoding.encode(String($0)) }.joined(separator: ",")
                         : "\(k)=\(PercentEncoding.encode(v))"
        }.joined(separator: "&")
    }

    /// The receiver's URL as a phone reaches it: `public_url`, else this machine's name.
    static func publicURL(config c: ReceiverConfig, topology t: Topology, host: String?) -> String {
        if let u = c.public_url, host == nil { return u }
        let scheme = t.tls != nil ? "https" : "http"
        var h = host ?? t.listenHost
        if host == nil && (h == "0.0.0.0" || h == "::") {
            var buf = [CChar](repeating: 0, count: 256)
            gethostname(&buf, buf.count)
            h = buf.withUnsafeBufferPointer { String(cString: $0.baseAddress!) } + ".local"
        }
        if h.contains(":") && !h.hasPrefix("[") { h = "[\(h)]" }
        let defaultPort = (scheme == "https" && t.listenPort == 443) || (scheme == "http" && t.listenPort == 80)
        return "\(scheme)://\(h)\(defaultPort ? "" : ":\(t.listenPort)")\(c.path ?? "/syncky")"
    }
}
